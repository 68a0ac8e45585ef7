//! HTTP/1.1 written by hand over a TCP connection to 127.0.0.1, for the
//! tests that send what a client library would not: a header twice under
//! two spellings of its name, a value with bytes outside ASCII, a
//! request-target in absolute form. The answer is read whole (its
//! `Content-Length`, or its chunks to the last one).

use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// An answer.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The status code.
    pub status: u16,
    /// The headers, names lower case, in order.
    pub headers: Vec<(String, String)>,
    /// The body (chunks joined).
    pub body: Vec<u8>,
}

impl Answer {
    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The JSON-RPC answer in the body, JSON or an SSE stream
    /// (`Value::Null` when there is none).
    pub fn json(&self) -> serde_json::Value {
        let t = self.text();
        if let Ok(v) = serde_json::from_str(&t) {
            return v;
        }
        t.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<serde_json::Value>(d.trim()).ok())
            .rfind(|v| v.get("id").is_some())
            .unwrap_or(serde_json::Value::Null)
    }

    /// The header `name`'s first value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A request: `start` (`POST /mcp`), the header lines as written (name and
/// value bytes, any spelling, any number of times), and a body; a
/// `Content-Length` and `Connection: close` are added.
pub fn request(start: &str, headers: &[(&str, &[u8])], body: &[u8]) -> Vec<u8> {
    let mut out = format!("{start} HTTP/1.1\r\n").into_bytes();
    for (k, v) in headers {
        out.extend_from_slice(k.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(v);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    out.extend_from_slice(body);
    out
}

/// Send `bytes` to `addr` and read the answer.
///
/// # Panics
/// When the connection fails or the answer is not HTTP/1.1.
pub async fn send(addr: SocketAddr, bytes: &[u8]) -> Answer {
    exchange(addr, bytes, true).await
}

/// [`send`], reading the status and headers only (an event stream that
/// stays open is not waited for; its body is left empty).
///
/// # Panics
/// As [`send`].
pub async fn send_head(addr: SocketAddr, bytes: &[u8]) -> Answer {
    exchange(addr, bytes, false).await
}

async fn exchange(addr: SocketAddr, bytes: &[u8], with_body: bool) -> Answer {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(bytes).await.expect("write the request");
    let mut buf = Vec::new();
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).await.expect("read the answer");
        assert!(n > 0, "the connection closed before the headers: {buf:?}");
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut rest = buf[head_end + 4..].to_vec();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .expect("a status line");
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let get = |n: &str| headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
    let body = if !with_body {
        Vec::new()
    } else if let Some(len) = get("content-length").and_then(|l| l.parse::<usize>().ok()) {
        while rest.len() < len {
            let mut chunk = [0u8; 4096];
            let n = s.read(&mut chunk).await.expect("read the body");
            assert!(n > 0, "the body ended early");
            rest.extend_from_slice(&chunk[..n]);
        }
        rest.truncate(len);
        rest
    } else if get("transfer-encoding").is_some_and(|t| t.contains("chunked")) {
        dechunk(&mut s, rest).await
    } else {
        let _ = s.read_to_end(&mut rest).await;
        rest
    };
    Answer {
        status,
        headers,
        body,
    }
}

/// Read chunks (some already in `buf`) to the last one; their data.
async fn dechunk(s: &mut TcpStream, mut buf: Vec<u8>) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line_end = loop {
            if let Some(i) = buf.windows(2).position(|w| w == b"\r\n") {
                break i;
            }
            let mut chunk = [0u8; 4096];
            let n = s.read(&mut chunk).await.expect("read a chunk");
            if n == 0 {
                return out;
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        let size_text = String::from_utf8_lossy(&buf[..line_end]).into_owned();
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .expect("a chunk size");
        buf.drain(..line_end + 2);
        if size == 0 {
            return out;
        }
        while buf.len() < size + 2 {
            let mut chunk = [0u8; 4096];
            let n = s.read(&mut chunk).await.expect("read a chunk's data");
            assert!(n > 0, "a chunk ended early");
            buf.extend_from_slice(&chunk[..n]);
        }
        out.extend_from_slice(&buf[..size]);
        buf.drain(..size + 2);
    }
}
