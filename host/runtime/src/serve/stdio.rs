//! The MCP stdio transport of `capsaga mcp` (issue 24 item 4): messages
//! are newline-delimited JSON, read here rather than by rmcp so that each
//! line goes through the door's admission ([`crate::dispatch::admit`])
//! before anything parses or logs it.
//!
//! - A line is read into at most `limit` bytes ([`super::MAX_MESSAGE_BYTES`]
//!   by default); a longer one is discarded as it streams in (memory stays
//!   bounded, whatever the client sends) and answered with a JSON-RPC
//!   error (`id` null: it was not read).
//! - A refused line is answered with the refusal's JSON-RPC error and its
//!   `id` when it could be read; an admitted line that is not a message
//!   rmcp knows is answered `-32600` (a notification: ignored, as rmcp
//!   does).
//! - Answers and rmcp's own messages are written whole, one line each, by
//!   one writer task, so they never interleave.

use crate::dispatch::admit::{Refused, admit_message, error_response};
use futures::{Sink, Stream};
use rmcp::RoleServer;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use serde_json::{Value, json};
use std::io;
use std::pin::Pin;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// The sink rmcp writes its messages to.
pub type LineSink = Pin<Box<dyn Sink<TxJsonRpcMessage<RoleServer>, Error = io::Error> + Send>>;
/// The stream of admitted messages rmcp reads.
pub type LineStream = Pin<Box<dyn Stream<Item = RxJsonRpcMessage<RoleServer>> + Send>>;

/// What reading one line gave.
#[derive(Debug, PartialEq)]
enum Line {
    /// A whole line is in the buffer (without its `\n`).
    Whole,
    /// A line longer than the limit was discarded; its length, bytes.
    TooLong(usize),
    /// End of input (a last line without `\n` is dropped, as rmcp does).
    Eof,
}

/// Read one line into `buf` (cleared first), keeping at most `limit` bytes.
async fn read_line<R: AsyncRead + Unpin>(
    r: &mut BufReader<R>,
    buf: &mut Vec<u8>,
    limit: usize,
) -> io::Result<Line> {
    buf.clear();
    let mut seen = 0usize;
    loop {
        let avail = r.fill_buf().await?;
        if avail.is_empty() {
            return Ok(Line::Eof);
        }
        let (chunk, newline) = match avail.iter().position(|&b| b == b'\n') {
            Some(i) => (&avail[..i], true),
            None => (avail, false),
        };
        let n = chunk.len();
        seen = seen.saturating_add(n);
        if seen <= limit {
            buf.extend_from_slice(chunk);
        } else if !buf.is_empty() {
            buf.clear();
            buf.shrink_to(64 * 1024);
        }
        r.consume(n + usize::from(newline));
        if newline {
            return Ok(if seen <= limit {
                Line::Whole
            } else {
                Line::TooLong(seen)
            });
        }
    }
}

/// A transport over `input` and `output` admitting lines of at most
/// `limit` bytes; the writer and reader run as tasks of the current
/// runtime. The returned handle finishes once every message was written.
pub fn transport<R, W>(
    input: R,
    output: W,
    limit: usize,
) -> (LineSink, LineStream, tokio::task::JoinHandle<()>)
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let (out_tx, mut out_rx) = mpsc::channel::<Vec<u8>>(64);
    let writer = tokio::spawn(async move {
        let mut w = output;
        while let Some(mut line) = out_rx.recv().await {
            line.push(b'\n');
            if w.write_all(&line).await.is_err() || w.flush().await.is_err() {
                break;
            }
        }
    });
    let (in_tx, mut in_rx) = mpsc::channel::<RxJsonRpcMessage<RoleServer>>(16);
    tokio::spawn(read_loop(input, limit, in_tx, out_tx.clone()));
    let sink = futures::sink::unfold(out_tx, |tx, msg: TxJsonRpcMessage<RoleServer>| async move {
        let line = serde_json::to_vec(&msg).map_err(io::Error::other)?;
        tx.send(line)
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the output is closed"))?;
        Ok::<_, io::Error>(tx)
    });
    let stream = futures::stream::poll_fn(move |cx| in_rx.poll_recv(cx));
    (Box::pin(sink), Box::pin(stream), writer)
}

async fn answer(out: &mpsc::Sender<Vec<u8>>, response: Value) {
    let _ = out.send(response.to_string().into_bytes()).await;
}

async fn read_loop<R: AsyncRead + Unpin>(
    input: R,
    limit: usize,
    to_rmcp: mpsc::Sender<RxJsonRpcMessage<RoleServer>>,
    out: mpsc::Sender<Vec<u8>>,
) {
    let mut r = BufReader::with_capacity(64 * 1024, input);
    let mut buf = Vec::new();
    loop {
        match read_line(&mut r, &mut buf, limit).await {
            Ok(Line::Eof) | Err(_) => break,
            Ok(Line::TooLong(len)) => {
                answer(
                    &out,
                    error_response(&Refused::TooLarge { len, limit }, None),
                )
                .await;
            }
            Ok(Line::Whole) => {
                let line = buf.strip_suffix(b"\r").unwrap_or(&buf);
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                match admit_message(line, limit) {
                    Err((refused, id)) => answer(&out, error_response(&refused, id.as_ref())).await,
                    Ok(admitted) => match serde_json::from_slice(line) {
                        Ok(msg) => {
                            if to_rmcp.send(msg).await.is_err() {
                                break;
                            }
                        }
                        // A notification rmcp does not know: ignored.
                        Err(_) if admitted.id.is_none() => {}
                        Err(e) => {
                            let response = json!({
                                "jsonrpc": "2.0",
                                "id": admitted.id,
                                "error": {"code": -32600, "message": format!("not a JSON-RPC message this server knows: {}", e.to_string().chars().take(200).collect::<String>())},
                            });
                            answer(&out, response).await;
                        }
                    },
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_bounded_and_long_ones_discarded() {
        let input: &[u8] = b"{\"a\":1}\r\n\nxxxxxxxxxxxxxxxxxxxx\n{\"b\":2}\nlast";
        let mut r = BufReader::with_capacity(4, input);
        let mut buf = Vec::new();
        assert_eq!(read_line(&mut r, &mut buf, 10).await.unwrap(), Line::Whole);
        assert_eq!(buf, b"{\"a\":1}\r");
        assert_eq!(read_line(&mut r, &mut buf, 10).await.unwrap(), Line::Whole);
        assert!(buf.is_empty());
        assert_eq!(
            read_line(&mut r, &mut buf, 10).await.unwrap(),
            Line::TooLong(20)
        );
        assert!(buf.capacity() <= 64 * 1024);
        assert_eq!(read_line(&mut r, &mut buf, 10).await.unwrap(), Line::Whole);
        assert_eq!(buf, b"{\"b\":2}");
        assert_eq!(read_line(&mut r, &mut buf, 10).await.unwrap(), Line::Eof);
    }
}
