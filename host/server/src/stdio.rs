//! The MCP stdio transport of `capsaga mcp` (issue 24 item 4): messages
//! are newline-delimited JSON, read here rather than by rmcp so that each
//! line goes through the door's admission ([`capsaga_door::dispatch::admit`])
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
//! - Every refusal has a failed `{mcp.method.name}` span (issue 30), as
//!   over HTTP (`mcp::refused`): the transport's own (above), and rmcp's
//!   (an unsupported revision, a missing `_meta`, an unknown method), told
//!   from a handler's error by the [`Handled`] mark each request carries
//!   into its handler ([`Unanswered`]).

use super::mcp::refused::{Asked, Handled};
use capsaga_door::dispatch::admit::{Refused, admit_message, error_response};
use futures::{Sink, Stream};
use rmcp::RoleServer;
use rmcp::model::{GetExtensions, JsonRpcMessage, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
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

/// Most requests tracked at once by [`Unanswered`]. A client may leave
/// requests unanswered (cancelled ones are not answered); beyond this many
/// a request is not tracked, and a refusal of it has no span.
const MAX_TRACKED: usize = 1024;

/// The requests handed to rmcp and not answered yet, by id, each with the
/// mark its handler sets when it opens its span and what a refusal's span
/// would say of it. An error answer to a request no handler marked is
/// rmcp's own refusal.
#[derive(Clone, Default)]
struct Unanswered(Arc<Mutex<HashMap<String, (Handled, Asked)>>>);

fn id_key(id: &RequestId) -> String {
    serde_json::to_string(id).unwrap_or_default()
}

impl Unanswered {
    /// Track `msg` (a request, read from `value`), marking it for its
    /// handler.
    fn track(&self, msg: &mut RxJsonRpcMessage<RoleServer>, value: &Value) {
        match msg {
            JsonRpcMessage::Request(r) => {
                let handled = Handled::default();
                r.request.extensions_mut().insert(handled.clone());
                if let Ok(mut m) = self.0.lock()
                    && m.len() < MAX_TRACKED
                {
                    m.insert(id_key(&r.id), (handled, Asked::read(value, None)));
                }
            }
            // A cancelled request is not answered: forget it.
            JsonRpcMessage::Notification(_)
                if value.get("method").and_then(Value::as_str)
                    == Some("notifications/cancelled") =>
            {
                if let (Some(id), Ok(mut m)) = (value.pointer("/params/requestId"), self.0.lock()) {
                    m.remove(&id.to_string());
                }
            }
            _ => {}
        }
    }

    /// `msg` is about to be written: an answer ends its request's
    /// tracking; an error answer to a request no handler saw gets the
    /// refusal's span.
    fn answered(&self, msg: &TxJsonRpcMessage<RoleServer>) {
        let (id, code) = match msg {
            JsonRpcMessage::Response(r) => (&r.id, None),
            JsonRpcMessage::Error(e) => match &e.id {
                Some(id) => (id, Some(i64::from(e.error.code.0))),
                None => return,
            },
            _ => return,
        };
        let Some((handled, asked)) = self.0.lock().ok().and_then(|mut m| m.remove(&id_key(id)))
        else {
            return;
        };
        if code.is_some() && !handled.is_set() {
            asked.refused("pipe", None, code);
        }
    }
}

/// The span of a refusal the transport answered itself (`response` is
/// its JSON-RPC error; `request` the line, when it was read).
fn refused_here(request: &Value, response: &Value) {
    let code = response.pointer("/error/code").and_then(Value::as_i64);
    Asked::read(request, None).refused("pipe", None, code);
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
    let unanswered = Unanswered::default();
    tokio::spawn(read_loop(
        input,
        limit,
        in_tx,
        out_tx.clone(),
        unanswered.clone(),
    ));
    let sink = futures::sink::unfold(
        (out_tx, unanswered),
        |(tx, unanswered), msg: TxJsonRpcMessage<RoleServer>| async move {
            unanswered.answered(&msg);
            let line = serde_json::to_vec(&msg).map_err(io::Error::other)?;
            tx.send(line)
                .await
                .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the output is closed"))?;
            Ok::<_, io::Error>((tx, unanswered))
        },
    );
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
    unanswered: Unanswered,
) {
    let mut r = BufReader::with_capacity(64 * 1024, input);
    let mut buf = Vec::new();
    loop {
        match read_line(&mut r, &mut buf, limit).await {
            Ok(Line::Eof) | Err(_) => break,
            Ok(Line::TooLong(len)) => {
                let response = error_response(&Refused::TooLarge { len, limit }, None);
                refused_here(&Value::Null, &response);
                answer(&out, response).await;
            }
            Ok(Line::Whole) => {
                let line = buf.strip_suffix(b"\r").unwrap_or(&buf);
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                match admit_message(line, limit) {
                    Err((refused, id)) => {
                        // Nothing of a refused line is read.
                        let response = error_response(&refused, id.as_ref());
                        refused_here(&Value::Null, &response);
                        answer(&out, response).await;
                    }
                    Ok(admitted) => {
                        // Admitted: strict JSON within the limit.
                        let value: Value = serde_json::from_slice(line).unwrap_or(Value::Null);
                        match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(line) {
                            Ok(mut msg) => {
                                unanswered.track(&mut msg, &value);
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
                                refused_here(&value, &response);
                                answer(&out, response).await;
                            }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(v: &Value) -> RxJsonRpcMessage<RoleServer> {
        serde_json::from_value(v.clone()).unwrap()
    }

    #[test]
    fn unanswered_requests_are_bounded_and_forgotten_when_answered_or_cancelled() {
        let u = Unanswered::default();
        let len = || u.0.lock().unwrap().len();
        for id in 0..MAX_TRACKED + 100 {
            let v = json!({"jsonrpc": "2.0", "id": id, "method": "ping"});
            let mut m = msg(&v);
            u.track(&mut m, &v);
            let JsonRpcMessage::Request(r) = &m else {
                panic!("a request")
            };
            assert!(r.request.extensions().get::<Handled>().is_some(), "marked");
        }
        assert_eq!(len(), MAX_TRACKED, "bounded");
        let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 3}});
        u.track(&mut msg(&cancel), &cancel);
        assert_eq!(len(), MAX_TRACKED - 1, "a cancelled request is forgotten");
        let answer: TxJsonRpcMessage<RoleServer> =
            serde_json::from_value(json!({"jsonrpc": "2.0", "id": 4, "result": {}})).unwrap();
        u.answered(&answer);
        assert_eq!(len(), MAX_TRACKED - 2, "an answered one too");
    }

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
