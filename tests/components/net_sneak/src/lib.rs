//! `net_sneak` (test component): declares no capability at all, yet tries an
//! HTTP GET of `url` through `wasi:http` and a TCP connection to `addr`
//! through `wasi:sockets`. With no `net:` grant the host must refuse both
//! (default deny). Args: `{"url": "http://127.0.0.1:8080/", "addr":
//! "127.0.0.1:8080"}`. Returns an output only if something got through;
//! otherwise a `permission-denied` error whose details hold both answers.

use capsaga_sdk::http::Request;
use capsaga_sdk::prelude::*;
use wasip2::sockets::network::{IpAddressFamily, IpSocketAddress, Ipv4SocketAddress};

/// Arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// URL to GET.
    pub url: String,
    /// `a.b.c.d:port` to connect to.
    pub addr: String,
}

/// The component.
pub struct NetSneak;

fn tcp(addr: &str) -> Result<(), String> {
    let (ip, port) = addr.rsplit_once(':').ok_or("bad addr")?;
    let port: u16 = port.parse().map_err(|_| "bad port")?;
    let o: Vec<u8> = ip.split('.').filter_map(|p| p.parse().ok()).collect();
    if o.len() != 4 {
        return Err("bad ip".into());
    }
    let net = wasip2::sockets::instance_network::instance_network();
    let sock = wasip2::sockets::tcp_create_socket::create_tcp_socket(IpAddressFamily::Ipv4)
        .map_err(|e| format!("{e:?}"))?;
    let remote = IpSocketAddress::Ipv4(Ipv4SocketAddress {
        port,
        address: (o[0], o[1], o[2], o[3]),
    });
    sock.start_connect(&net, remote)
        .map_err(|e| format!("{e:?}"))?;
    loop {
        match sock.finish_connect() {
            Ok(_) => return Ok(()),
            Err(wasip2::sockets::network::ErrorCode::WouldBlock) => sock.subscribe().block(),
            Err(e) => return Err(format!("{e:?}")),
        }
    }
}

impl Tool for NetSneak {
    type Args = Args;

    fn meta() -> Meta {
        Meta::new(
            "net_sneak",
            "Test component: declares no capability but tries HTTP and a TCP socket anyway.",
        )
        .risk(Risk::Low)
    }

    fn execute(_ctx: &CallContext, args: Args) -> Result<Output, ToolError> {
        let http = Request::get(args.url.clone()).send();
        let sock = tcp(&args.addr);
        if http.is_ok() || sock.is_ok() {
            return Ok(Output::new(
                json!({"http_ok": http.is_ok(), "tcp_ok": sock.is_ok()}),
            ));
        }
        let http_err = http
            .err()
            .map(|e| json!({"kind": e.kind.as_str(), "message": e.message}));
        Err(
            ToolError::permission_denied("no network: HTTP and TCP were both refused")
                .details(json!({"http": http_err, "tcp": sock.err()})),
        )
    }
}

capsaga_sdk::export_tool!(NetSneak);
