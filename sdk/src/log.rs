//! Logging into the host's trace (WIT import `capsaga:tool/log`).
//!
//! On wasm32 each call goes to the host, which caps messages in size and count
//! per call and drops anything past the cap. Elsewhere (native unit tests of a
//! tool) messages go to stderr as `[level] message`.
//!
//! The format-style macros [`trace!`](crate::trace), [`debug!`](crate::debug),
//! [`info!`](crate::info), [`warn!`](crate::warn) and
//! [`error!`](crate::error) are in the [`prelude`](crate::prelude).

use std::fmt;

/// Severity of a log message (WIT `log.level`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Very detailed tracing.
    Trace,
    /// Debugging details.
    Debug,
    /// Normal progress.
    Info,
    /// Something unexpected that the tool recovered from.
    Warn,
    /// A failure.
    Error,
}

impl Level {
    /// Lowercase name: `trace`, `debug`, `info`, `warn` or `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Trace => "trace",
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Records `message` at `level`: in the host's trace on wasm32, on stderr
/// elsewhere. Never fails; the host may drop messages past its caps.
pub fn log(level: Level, message: &str) {
    #[cfg(target_arch = "wasm32")]
    {
        use crate::__private::bindings::capsaga::tool::log as wit;
        let level = match level {
            Level::Trace => wit::Level::Trace,
            Level::Debug => wit::Level::Debug,
            Level::Info => wit::Level::Info,
            Level::Warn => wit::Level::Warn,
            Level::Error => wit::Level::Error,
        };
        wit::log(level, message);
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        eprintln!("[{level}] {message}");
    }
}

/// Records `message` at [`Level::Trace`].
pub fn trace(message: &str) {
    log(Level::Trace, message);
}

/// Records `message` at [`Level::Debug`].
pub fn debug(message: &str) {
    log(Level::Debug, message);
}

/// Records `message` at [`Level::Info`].
pub fn info(message: &str) {
    log(Level::Info, message);
}

/// Records `message` at [`Level::Warn`].
pub fn warn(message: &str) {
    log(Level::Warn, message);
}

/// Records `message` at [`Level::Error`].
pub fn error(message: &str) {
    log(Level::Error, message);
}

/// `trace!("read {} bytes", n)`: [`log::trace`](crate::log::trace) with `format!` arguments.
#[macro_export]
macro_rules! trace {
    ($($arg:tt)+) => { $crate::log::trace(&::std::format!($($arg)+)) };
}

/// `debug!("read {} bytes", n)`: [`log::debug`](crate::log::debug) with `format!` arguments.
#[macro_export]
macro_rules! debug {
    ($($arg:tt)+) => { $crate::log::debug(&::std::format!($($arg)+)) };
}

/// `info!("read {} bytes", n)`: [`log::info`](crate::log::info) with `format!` arguments.
#[macro_export]
macro_rules! info {
    ($($arg:tt)+) => { $crate::log::info(&::std::format!($($arg)+)) };
}

/// `warn!("read {} bytes", n)`: [`log::warn`](crate::log::warn) with `format!` arguments.
#[macro_export]
macro_rules! warn {
    ($($arg:tt)+) => { $crate::log::warn(&::std::format!($($arg)+)) };
}

/// `error!("read {} bytes", n)`: [`log::error`](crate::log::error) with `format!` arguments.
#[macro_export]
macro_rules! error {
    ($($arg:tt)+) => { $crate::log::error(&::std::format!($($arg)+)) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_order_and_names() {
        assert!(Level::Trace < Level::Error);
        assert_eq!(Level::Warn.to_string(), "warn");
    }

    #[test]
    fn native_logging_does_not_panic() {
        trace("t");
        debug("d");
        info("i");
        warn("w");
        error("e");
        crate::info!("formatted {}", 1);
        crate::warn!("formatted {}", 2);
    }
}
