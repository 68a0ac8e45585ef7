//! Capture of a guest's stdout and stderr: bounded, and never failing.
//!
//! Wasmtime's `MemoryOutputPipe` refuses writes past its capacity, and a Rust
//! guest's `print!` panics when a write fails, so an ordinary tool that prints
//! a lot would crash. [`CapturePipe`] accepts every write, keeps the first and
//! the last [`CapturePipe::new`]`/2` bytes (the tail holds a panic message
//! printed last) and counts what it dropped in between, so host memory per
//! call stays bounded whatever the guest writes.

use bytes::Bytes;
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// Bytes the guest may hand over per write (the WASI `check-write` budget).
const WRITE_BUDGET: usize = 64 * 1024;

#[derive(Debug, Default)]
struct Capture {
    half: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    dropped: u64,
}

impl Capture {
    fn push(&mut self, mut bytes: &[u8]) {
        let room = self.half.saturating_sub(self.head.len());
        if room > 0 {
            let n = room.min(bytes.len());
            self.head.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
        }
        if bytes.len() > self.half {
            let skip = bytes.len() - self.half;
            self.dropped += (self.tail.len() + skip) as u64;
            self.tail.clear();
            bytes = &bytes[skip..];
        }
        let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.half);
        self.tail.drain(..overflow);
        self.dropped += overflow as u64;
        self.tail.extend(bytes);
    }
}

/// A bounded, never-failing sink for guest stdout/stderr. Clones share the
/// same buffer.
#[derive(Debug, Clone)]
pub struct CapturePipe {
    inner: Arc<Mutex<Capture>>,
}

impl CapturePipe {
    /// A pipe keeping at most `cap_bytes` (half from the start of the output,
    /// half from its end).
    pub fn new(cap_bytes: usize) -> Self {
        CapturePipe {
            inner: Arc::new(Mutex::new(Capture {
                half: cap_bytes / 2,
                ..Capture::default()
            })),
        }
    }

    fn push(&self, bytes: &[u8]) {
        if let Ok(mut c) = self.inner.lock() {
            c.push(bytes);
        }
    }

    /// What was kept, lossily decoded as UTF-8, with a
    /// `[... N bytes dropped ...]` line where output was dropped.
    pub fn contents(&self) -> String {
        let Ok(c) = self.inner.lock() else {
            return String::new();
        };
        let mut out = String::from_utf8_lossy(&c.head).into_owned();
        if c.dropped > 0 {
            out.push_str(&format!("\n[... {} bytes dropped ...]\n", c.dropped));
        }
        let (a, b) = c.tail.as_slices();
        out.push_str(&String::from_utf8_lossy(&[a, b].concat()));
        out
    }
}

impl OutputStream for CapturePipe {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(WRITE_BUDGET)
    }
}

#[async_trait::async_trait]
impl Pollable for CapturePipe {
    async fn ready(&mut self) {}
}

impl AsyncWrite for CapturePipe {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.push(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl IsTerminal for CapturePipe {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CapturePipe {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_head_and_tail_and_counts_the_rest() {
        let p = CapturePipe::new(8);
        p.push(b"0123");
        assert_eq!(p.contents(), "0123");
        p.push(b"4567");
        assert_eq!(p.contents(), "01234567");
        p.push(b"89abcdef");
        assert_eq!(p.contents(), "0123\n[... 8 bytes dropped ...]\ncdef");
        // One huge write: only its end is kept in the tail.
        p.push(&[b'x'; 1000]);
        p.push(b"END!");
        let c = p.contents();
        assert!(c.starts_with("0123\n[... 1012 bytes dropped ...]\n"), "{c}");
        assert!(c.ends_with("END!"), "{c}");
    }

    #[test]
    fn writes_never_fail() {
        let mut p = CapturePipe::new(16);
        for _ in 0..1000 {
            assert_eq!(p.check_write().ok(), Some(WRITE_BUDGET));
            assert!(p.write(Bytes::from_static(&[b'y'; 4096])).is_ok());
        }
        assert!(p.contents().len() < 100);
    }
}
