//! Host bindings of the `capsaga:tool` world, generated from `wit/`.

wasmtime::component::bindgen!({
    path: "../../wit",
    world: "tool",
    exports: { default: async },
});

pub use capsaga::tool::log::Level as LogLevel;
pub use capsaga::tool::types::{
    CallContext as WitCallContext, ErrorKind as WitErrorKind, Risk as WitRisk,
    ToolError as WitToolError, ToolMeta as WitToolMeta, ToolOutput as WitToolOutput,
};
