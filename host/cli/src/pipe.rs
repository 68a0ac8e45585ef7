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

/// Write to stderr; errors are dropped.
pub fn write_err(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let _ = std::io::stderr().lock().write_fmt(args);
}
