//! Host bindings of the `capsaga:tool` package, generated from `wit/`: the
//! `llm-tool` world, which is the `tool` world (the four exports and the
//! `log` import) plus the `llm` import (`wit/llm.wit`). A component of the
//! plain `tool` world links against it unchanged.

// What `bindgen!` generates has no documentation of its own (the WIT's is
// in `wit/`).
#![allow(missing_docs)]

wasmtime::component::bindgen!({
    path: "../../wit",
    world: "llm-tool",
    imports: { "capsaga:tool/llm.ask": async },
    exports: { default: async },
});

/// The generated world, under the name the sandbox uses.
pub type Tool = LlmTool;
/// The pre-instantiated world.
pub type ToolPre<T> = LlmToolPre<T>;

pub use capsaga::tool::llm::{LlmAnswer as WitLlmAnswer, LlmRequest as WitLlmRequest};
pub use capsaga::tool::log::Level as LogLevel;
pub use capsaga::tool::types::{
    CallContext as WitCallContext, ErrorKind as WitErrorKind, FieldIntegrity as WitFieldIntegrity,
    OutputField as WitOutputField, Risk as WitRisk, ToolError as WitToolError,
    ToolMeta as WitToolMeta, ToolOutput as WitToolOutput,
};

/// The optional export of the `labelled-tool` world (`wit/tool.wit`): the
/// field labels of the output. Not in the bindings' world, so that a
/// component without it links as before; looked up by name at load.
pub const OUTPUT_FIELDS_EXPORT: &str = "output-fields";

use capsaga_core::error::{ErrorKind as CoreErrorKind, ToolError as CoreToolError};

fn kind_to_wit(k: CoreErrorKind) -> WitErrorKind {
    match k {
        CoreErrorKind::InvalidArgs => WitErrorKind::InvalidArgs,
        CoreErrorKind::NotFound => WitErrorKind::NotFound,
        CoreErrorKind::PermissionDenied => WitErrorKind::PermissionDenied,
        CoreErrorKind::NetworkError => WitErrorKind::NetworkError,
        CoreErrorKind::ExternalError => WitErrorKind::ExternalError,
        CoreErrorKind::QuotaExceeded => WitErrorKind::QuotaExceeded,
        CoreErrorKind::Unsupported => WitErrorKind::Unsupported,
        CoreErrorKind::Timeout => WitErrorKind::Timeout,
        CoreErrorKind::Unrevertible => WitErrorKind::Unrevertible,
        CoreErrorKind::Unknown => WitErrorKind::Unknown,
    }
}

/// A host error handed to a guest (the answer of a host import).
pub(crate) fn error_to_wit(e: &CoreToolError) -> WitToolError {
    WitToolError {
        kind: kind_to_wit(e.kind),
        message: e.message.clone(),
        llm_hint: e.llm_hint.clone(),
        details: e.details.as_ref().map(|d| d.to_string()),
        retriable: e.retriable,
    }
}
