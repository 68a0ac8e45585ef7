//! The response body a guest reads: capped in bytes, stopped at the
//! request's deadline, with the operator's secret values redacted.

use super::CallNet;
use bytes::Bytes;
use capsaga_secrets::redact::Redactor;
use http_body::{Body, Frame, SizeHint};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::time::{Instant, Sleep};
use wasmtime_wasi_http::Error;

/// A response body under the net guard's limits.
pub(super) struct GuardedBody {
    inner: hyper::body::Incoming,
    cap: u64,
    seen: u64,
    redactor: Redactor,
    deadline: Pin<Box<Sleep>>,
    call: Arc<CallNet>,
    record: usize,
    finished: bool,
}

impl GuardedBody {
    pub(super) fn new(
        inner: hyper::body::Incoming,
        cap: u64,
        redactor: Redactor,
        deadline: Instant,
        call: Arc<CallNet>,
        record: usize,
    ) -> GuardedBody {
        GuardedBody {
            inner,
            cap,
            seen: 0,
            redactor,
            deadline: Box::pin(tokio::time::sleep_until(deadline)),
            call,
            record,
            finished: false,
        }
    }
}

impl Body for GuardedBody {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let this = &mut *self;
        if this.finished {
            return Poll::Ready(None);
        }
        if this.deadline.as_mut().poll(cx).is_ready() {
            this.finished = true;
            this.call.update(this.record, |r| {
                r.outcome = "truncated";
                r.reason = Some("the response body did not finish before the deadline".into());
            });
            return Poll::Ready(Some(Err(Error::ConnectionReadTimeout)));
        }
        loop {
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => {
                    this.finished = true;
                    let rest = this.redactor.finish();
                    if rest.is_empty() {
                        return Poll::Ready(None);
                    }
                    return Poll::Ready(Some(Ok(Frame::data(Bytes::from(rest)))));
                }
                Poll::Ready(Some(Err(e))) => {
                    this.finished = true;
                    return Poll::Ready(Some(Err(Error::from(e))));
                }
                Poll::Ready(Some(Ok(frame))) => {
                    let frame = match frame.into_data() {
                        Ok(data) => data,
                        // Trailers are not passed on: they could carry a
                        // secret past the redactor, and guests do not need them.
                        Err(_) => continue,
                    };
                    this.seen = this.seen.saturating_add(frame.len() as u64);
                    let seen = this.seen;
                    this.call.update(this.record, |r| r.body_bytes = seen);
                    if seen > this.cap {
                        this.finished = true;
                        let cap = this.cap;
                        this.call.update(this.record, |r| {
                            r.outcome = "truncated";
                            r.reason =
                                Some(format!("the response body is over the cap of {cap} bytes"));
                        });
                        return Poll::Ready(Some(Err(Error::HttpResponseBodySize(Some(cap)))));
                    }
                    let out = this.redactor.push(&frame);
                    if out.is_empty() {
                        continue;
                    }
                    return Poll::Ready(Some(Ok(Frame::data(Bytes::from(out)))));
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.finished
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}
