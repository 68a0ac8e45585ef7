//! `net_escape` (test component): tries to reach the network around the
//! host's net guard and reports what the host answered, so that the host's
//! tests can see each attempt refused (and count, on a loopback server, the
//! requests that arrived).
//!
//! Args: `{"mode": "...", "url": "...", "name": "...", "addr": "...",
//! "header": ["name", "value"], "data": "..."}`. Modes:
//! - `get`: one GET of `url` (optionally with `header`), no redirect followed;
//! - `follow`: GET `url` and follow up to 5 redirects, each a new request
//!   (e.g. from an allowed host to `http://169.254.169.254/`);
//! - `lookup`: resolve `name` with `wasi:sockets/ip-name-lookup`;
//! - `tcp`: connect to `addr` (`a.b.c.d:port`) with `wasi:sockets/tcp`;
//! - `udp`: bind a UDP socket (the first step of sending a datagram);
//! - `exfil`: DNS exfiltration: hex-encode `data` into labels under the
//!   domain `name` (`<hex>.<name>`), then try to get each name resolved, by
//!   `wasi:sockets` lookup and by an HTTP GET to `http://<hex>.<name>/`.
//!
//! Success (the request went out, the socket connected, the name resolved)
//! is an output `{"mode", "ok": true, "observed": ...}`; a refusal is a
//! `ToolError` (`permission-denied` for the host's refusals) with `details`
//! naming the mode and what the host answered. Needs `net:http:*`.

use capsaga_sdk::http::Request;
use capsaga_sdk::prelude::*;
use wasip2::sockets::network::{
    ErrorCode as SockError, IpAddressFamily, IpSocketAddress, Ipv4SocketAddress,
};

/// What to try.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// One GET of `url`.
    Get,
    /// GET `url` and follow redirects.
    Follow,
    /// Resolve `name` with wasi:sockets.
    Lookup,
    /// TCP connect to `addr`.
    Tcp,
    /// Bind a UDP socket.
    Udp,
    /// Encode `data` in DNS names under `name` and try to resolve them.
    Exfil,
}

/// Arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// What to try.
    pub mode: Mode,
    /// URL for `get` and `follow`.
    #[serde(default)]
    pub url: String,
    /// Name for `lookup`, domain for `exfil`.
    #[serde(default)]
    pub name: String,
    /// `a.b.c.d:port` for `tcp`.
    #[serde(default)]
    pub addr: String,
    /// A header to set on `get`.
    #[serde(default)]
    pub header: Option<(String, String)>,
    /// Data to exfiltrate.
    #[serde(default)]
    pub data: String,
}

/// The component.
pub struct NetEscape;

fn sock_error(mode: &str, target: &str, e: SockError) -> ToolError {
    let code = format!("{e:?}");
    let err = match e {
        // What wasmtime answers when the WASI context denies the use:
        // access-denied for sockets, permanent-resolver-failure for lookups
        // (returned before any resolution is attempted).
        SockError::AccessDenied | SockError::NotSupported | SockError::PermanentResolverFailure => {
            ToolError::permission_denied(format!("{mode} {target}: the sandbox refused ({code})"))
        }
        _ => ToolError::network(format!("{mode} {target}: {code}")),
    };
    err.details(json!({"mode": mode, "socket_error": code}))
}

fn lookup(name: &str) -> Result<Vec<String>, ToolError> {
    let net = wasip2::sockets::instance_network::instance_network();
    let stream = wasip2::sockets::ip_name_lookup::resolve_addresses(&net, name)
        .map_err(|e| sock_error("lookup", name, e))?;
    let mut out = Vec::new();
    loop {
        match stream.resolve_next_address() {
            Ok(Some(a)) => out.push(format!("{a:?}")),
            Ok(None) => break,
            Err(SockError::WouldBlock) => stream.subscribe().block(),
            Err(e) => return Err(sock_error("lookup", name, e)),
        }
    }
    Ok(out)
}

fn tcp(addr: &str) -> Result<String, ToolError> {
    let bad = || ToolError::invalid_args(format!("`{addr}` is not a.b.c.d:port"));
    let (ip, port) = addr.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    let o: Vec<u8> = ip.split('.').filter_map(|p| p.parse().ok()).collect();
    if o.len() != 4 {
        return Err(bad());
    }
    let net = wasip2::sockets::instance_network::instance_network();
    let sock = wasip2::sockets::tcp_create_socket::create_tcp_socket(IpAddressFamily::Ipv4)
        .map_err(|e| sock_error("tcp", addr, e))?;
    let remote = IpSocketAddress::Ipv4(Ipv4SocketAddress {
        port,
        address: (o[0], o[1], o[2], o[3]),
    });
    sock.start_connect(&net, remote)
        .map_err(|e| sock_error("tcp", addr, e))?;
    loop {
        match sock.finish_connect() {
            Ok(_) => return Ok(format!("connected to {addr}")),
            Err(SockError::WouldBlock) => sock.subscribe().block(),
            Err(e) => return Err(sock_error("tcp", addr, e)),
        }
    }
}

fn udp() -> Result<String, ToolError> {
    let net = wasip2::sockets::instance_network::instance_network();
    let sock = wasip2::sockets::udp_create_socket::create_udp_socket(IpAddressFamily::Ipv4)
        .map_err(|e| sock_error("udp", "0.0.0.0:0", e))?;
    let local = IpSocketAddress::Ipv4(Ipv4SocketAddress {
        port: 0,
        address: (0, 0, 0, 0),
    });
    sock.start_bind(&net, local)
        .map_err(|e| sock_error("udp", "0.0.0.0:0", e))?;
    loop {
        match sock.finish_bind() {
            Ok(()) => return Ok("bound a UDP socket".into()),
            Err(SockError::WouldBlock) => sock.subscribe().block(),
            Err(e) => return Err(sock_error("udp", "0.0.0.0:0", e)),
        }
    }
}

fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

impl Tool for NetEscape {
    type Args = Args;

    fn meta() -> Meta {
        Meta::new(
            "net_escape",
            "Test component: tries to reach the network around the net guard and reports the host's answer.",
        )
        .risk(Risk::Low)
        .capability("net:http:*")
    }

    fn execute(_ctx: &CallContext, args: Args) -> Result<Output, ToolError> {
        let observed = match args.mode {
            Mode::Get => {
                let mut req = Request::get(args.url.clone());
                if let Some((k, v)) = &args.header {
                    req = req.header(k.clone(), v.clone());
                }
                let r = req.send()?;
                json!({"status": r.status, "location": r.header("location"), "body": r.text()})
            }
            Mode::Follow => {
                let (r, chain) = Request::get(args.url.clone()).send_following(5)?;
                json!({"status": r.status, "final_url": r.url, "chain": chain, "body": r.text()})
            }
            Mode::Lookup => json!(lookup(&args.name)?),
            Mode::Tcp => json!(tcp(&args.addr)?),
            Mode::Udp => json!(udp()?),
            Mode::Exfil => {
                let mut attempts = Vec::new();
                let mut leaked = false;
                for chunk in args.data.as_bytes().chunks(30) {
                    let name = format!("{}.{}", hex(chunk), args.name);
                    let by_lookup = lookup(&name);
                    let by_lookup_msg = by_lookup.as_ref().err().map(|e| e.message.clone());
                    let by_http = Request::get(format!("http://{name}/")).send();
                    leaked |= by_lookup.is_ok() || by_http.is_ok();
                    attempts.push(json!({
                        "name": name,
                        "lookup": by_lookup.map(|a| json!(a)).unwrap_or_else(|e| json!(e.kind.as_str())),
                        "lookup_error": by_lookup_msg,
                        "http": by_http.map(|r| json!(r.status)).unwrap_or_else(|e| json!(e.kind.as_str())),
                    }));
                }
                if !leaked {
                    return Err(ToolError::permission_denied(
                        "every exfiltration attempt was refused",
                    )
                    .details(json!({"mode": "exfil", "attempts": attempts})));
                }
                json!(attempts)
            }
        };
        Ok(Output::new(
            json!({"mode": format!("{:?}", args.mode).to_lowercase(), "ok": true, "observed": observed}),
        ))
    }
}

capsaga_sdk::export_tool!(NetEscape);
