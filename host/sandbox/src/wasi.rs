//! The WASI context of one call, before the factors bind the call's grants
//! into it (`factors`): no arguments, no inherited environment, stdin
//! closed, stdout/stderr captured in a capped buffer, no sockets and no name
//! lookup. The `fs` factor adds the preopens, the `env` factor the
//! variables; nothing else is ever added.

use super::stdio::CapturePipe;
use wasmtime_wasi::WasiCtxBuilder;

/// Bytes of guest stdout/stderr kept per call (for trap diagnostics): the
/// first and the last half; writes past it succeed and are dropped.
pub const STDIO_CAPTURE_BYTES: usize = 16 * 1024;

/// Why a WASI context could not be built.
#[derive(Debug, thiserror::Error)]
pub enum WasiSetupError {
    /// A granted directory could not be opened.
    #[error("granted directory `{dir}` cannot be opened: {error}")]
    Preopen {
        /// The directory.
        dir: String,
        /// The OS error.
        error: String,
    },
}

/// A builder with everything denied: no sockets, no name lookup, nothing
/// from the host process.
pub fn builder() -> WasiCtxBuilder {
    let mut b = WasiCtxBuilder::new();
    b.allow_tcp(false);
    b.allow_udp(false);
    b.allow_ip_name_lookup(false);
    b
}

/// Capture the guest's stdout and stderr (at most
/// [`STDIO_CAPTURE_BYTES`]); returns the pipe to read them from.
pub fn capture_stdio(b: &mut WasiCtxBuilder) -> CapturePipe {
    let stdio = CapturePipe::new(STDIO_CAPTURE_BYTES);
    b.stdout(stdio.clone());
    b.stderr(stdio.clone());
    stdio
}
