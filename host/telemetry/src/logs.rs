//! The process's log output (stderr), scrubbed: the `tracing` fmt layer
//! the `capsaga` binary installs is built here, and its writer passes every
//! formatted event through [`crate::secrets::scrub`] before a byte reaches
//! the stream. The fmt layer formats each event whole into its buffer and
//! writes it once, so an event is scrubbed as one text: a secret split over
//! two fields of one line is still one line.
//!
//! Whatever the filter (`CAPSAGA_LOG=trace` included: a dependency's debug
//! output of a request, a guest's log line, a provider's error body), no
//! secret the process knows and no credential shape is written.

use std::io::Write;
use tracing::Subscriber;
use tracing_subscriber::Layer;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::registry::LookupSpan;

/// A [`MakeWriter`] whose writers scrub what they are given, event by
/// event, before handing it to `inner`'s.
#[derive(Debug, Clone)]
pub struct Scrubbed<M>(pub M);

/// One event's writer: buffers, then scrubs and writes at the end of the
/// event (flush or drop).
#[derive(Debug)]
pub struct ScrubbedWriter<W: Write> {
    inner: W,
    buf: Vec<u8>,
}

impl<W: Write> ScrubbedWriter<W> {
    fn emit(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let buf = std::mem::take(&mut self.buf);
        let out = crate::secrets::scrub_bytes(&buf);
        self.inner.write_all(&out)?;
        self.inner.flush()
    }
}

impl<W: Write> Write for ScrubbedWriter<W> {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.emit()
    }
}

impl<W: Write> Drop for ScrubbedWriter<W> {
    fn drop(&mut self) {
        let _ = self.emit();
    }
}

impl<'a, M: MakeWriter<'a>> MakeWriter<'a> for Scrubbed<M> {
    type Writer = ScrubbedWriter<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        ScrubbedWriter {
            inner: self.0.make_writer(),
            buf: Vec::new(),
        }
    }
}

/// The log layer of the `capsaga` binary: `tracing`'s fmt layer on stderr
/// (ANSI colours when stderr is a terminal), filtered by `CAPSAGA_LOG` when
/// set (else `default_filter`: `warn`, `info`, `debug`), every event
/// scrubbed.
pub fn layer<S>(default_filter: &str) -> Box<dyn Layer<S> + Send + Sync + 'static>
where
    S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    let filter = tracing_subscriber::EnvFilter::try_from_env("CAPSAGA_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter));
    Box::new(
        tracing_subscriber::fmt::layer()
            .with_writer(Scrubbed(std::io::stderr))
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .with_filter(filter),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl Write for Sink {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn every_event_is_scrubbed_before_it_is_written() {
        use tracing_subscriber::layer::SubscriberExt as _;
        let sink = Sink::default();
        let out = sink.clone();
        let layer = tracing_subscriber::fmt::layer()
            .with_writer(Scrubbed(move || sink.clone()))
            .with_ansi(false);
        let subscriber = tracing_subscriber::registry().with(layer);
        let key = "sk-proj-LogLine0123456789abcdefXYZ";
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(header = "Authorization", value = %format!("Bearer {key}"), "model call failed: HTTP 401: echo {key}");
        });
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        assert!(text.contains("model call failed"), "{text}");
        assert!(!text.contains(key), "{text}");
        assert!(!text.contains("LogLine0123"), "{text}");
    }
}
