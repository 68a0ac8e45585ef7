//! Printing that never panics: `println!` panics when stdout is a closed
//! pipe (`capsaga --json tools list | head -1`: Rust ignores SIGPIPE, so the
//! write fails with EPIPE). Every line the command line prints goes through
//! [`outln!`] (stdout) or [`errln!`] (stderr), which drop what cannot be
//! written: a reader that went away does not want the rest, and the command
//! still finishes its work and returns its exit code.

/// `println!` to stdout, ignoring write errors (a closed pipe).
#[macro_export]
macro_rules! outln {
    () => {
        $crate::pipe::write_out(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::pipe::write_out(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprintln!` to stderr, ignoring write errors (a closed pipe).
#[macro_export]
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::pipe::write_err(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// Write to stdout; errors (EPIPE) are dropped.
pub fn write_out(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_fmt(args);
}

/// Write to stderr, scrubbed of the host's secrets like the log output
/// (`capsaga_telemetry::secrets::scrub`: a provider's error body echoing a
/// key, a store error); errors are dropped. Stdout is the command's answer
/// (`tokens create` prints the new secret there) and is not scrubbed.
pub fn write_err(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let text = args.to_string();
    let text = capsaga_telemetry::secrets::scrub(&text);
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}
