//! The `log` import of the tool world: guest log records, capped in bytes
//! per call. [`LogBuffer`] is the import's own context: the import is
//! implemented on it and linked with the accessor of [`LogView`]
//! ([`add_to_linker`]), as wasmtime-wasi links each of its interfaces.

use super::bindings::{LogLevel, capsaga};
use wasmtime::component::{HasSelf, Linker};

/// What each log record costs against the log cap besides its message,
/// bytes, so that a flood of empty messages is capped too.
pub const LOG_RECORD_OVERHEAD: usize = 32;

/// One log record written by the guest.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LogRecord {
    /// `trace`, `debug`, `info`, `warn` or `error`.
    pub level: &'static str,
    /// The message (clipped to the remaining budget).
    pub message: String,
}

/// Guest log records, capped in bytes per call.
#[derive(Debug, Default)]
pub struct LogBuffer {
    tool: String,
    cap_bytes: usize,
    used_bytes: usize,
    /// Records kept.
    pub records: Vec<LogRecord>,
    /// Records dropped past the cap.
    pub dropped: usize,
}

impl LogBuffer {
    /// An empty buffer of `tool`'s call keeping at most `cap_bytes` of
    /// messages.
    pub fn new(tool: &str, cap_bytes: usize) -> Self {
        LogBuffer {
            tool: tool.to_string(),
            cap_bytes,
            ..Default::default()
        }
    }

    /// Record `message`, clipped to what is left of the cap (each record
    /// also costs [`LOG_RECORD_OVERHEAD`]); dropped when nothing is left.
    fn push(&mut self, level: &'static str, message: &str) {
        let left = self.cap_bytes.saturating_sub(self.used_bytes);
        if left <= LOG_RECORD_OVERHEAD {
            self.dropped += 1;
            self.used_bytes = self.cap_bytes;
            return;
        }
        let room = left - LOG_RECORD_OVERHEAD;
        let mut cut = message.len().min(room);
        while !message.is_char_boundary(cut) {
            cut -= 1;
        }
        let message = message[..cut].to_string();
        self.used_bytes += message.len() + LOG_RECORD_OVERHEAD;
        self.records.push(LogRecord { level, message });
    }
}

/// A store's data that holds a [`LogBuffer`] (the accessor the `log`
/// import is linked with).
pub trait LogView {
    /// The call's log buffer.
    fn log(&mut self) -> &mut LogBuffer;
}

/// Link the `capsaga:tool/log` import, implemented on [`LogBuffer`], into
/// `linker`.
///
/// # Errors
/// When the linker refuses the definition.
pub fn add_to_linker<T: LogView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    capsaga::tool::log::add_to_linker::<T, HasSelf<LogBuffer>>(linker, T::log)
}

impl capsaga::tool::log::Host for LogBuffer {
    /// The message arrives already copied (at most the call's transfer cap,
    /// see `outcome::transfer_cap_bytes`); only what fits the log cap is kept.
    fn log(&mut self, level: LogLevel, message: String) {
        let level = match level {
            LogLevel::Trace => "trace",
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
            LogLevel::Error => "error",
        };
        tracing::debug!(tool = %self.tool, level, "guest log: {}", message.chars().take(200).collect::<String>());
        self.push(level, &message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_buffer_caps_bytes() {
        let o = LOG_RECORD_OVERHEAD;
        let mut b = LogBuffer::new("t", 2 * o + 10);
        b.push("info", "hello");
        b.push("info", "wörld!!");
        b.push("info", "more");
        assert_eq!(b.records.len(), 2);
        assert_eq!(b.records[1].message, "wörl");
        assert_eq!(b.dropped, 1);
    }

    #[test]
    fn log_buffer_caps_empty_records_too() {
        let mut b = LogBuffer::new("t", 10 * LOG_RECORD_OVERHEAD);
        for _ in 0..1_000_000 {
            b.push("info", "");
        }
        assert!(b.records.len() < 10, "{}", b.records.len());
        assert!(b.dropped > 999_000);
    }
}
