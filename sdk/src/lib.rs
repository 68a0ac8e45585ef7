// The crate's documentation is its README (the guide for tool authors),
// followed by the API in brief below; `cargo test --doc -p capsaga-sdk`
// compiles and runs the Rust examples of both.
#![doc = include_str!("../README.md")]
//!
//! ## The API in brief
//!
//! A capsaga tool is a WebAssembly component (wasm32-wasip2) that exports the
//! `tool` world of `wit/tool.wit`: `meta`, `execute`, `dry-run` and
//! `compensate`. This crate generates the bindings and hides them: implement
//! [`Tool`] for a unit struct and call [`export_tool!`].
//!
//! ```
//! use capsaga_sdk::prelude::*;
//!
//! /// Arguments of `greet`. Doc comments become schema descriptions.
//! #[derive(Deserialize, JsonSchema)]
//! #[serde(deny_unknown_fields)]
//! struct Args {
//!     /// Who to greet.
//!     name: String,
//! }
//!
//! struct Greet;
//!
//! impl Tool for Greet {
//!     type Args = Args;
//!     fn meta() -> Meta {
//!         Meta::new("greet", "Returns a greeting for `name`.").idempotent(true)
//!     }
//!     fn execute(_ctx: &CallContext, args: Args) -> Result<Output, ToolError> {
//!         if args.name.is_empty() {
//!             return Err(ToolError::invalid_args("name is empty").hint("pass a non-empty name"));
//!         }
//!         info!("greeting {}", args.name);
//!         Ok(Output::new(json!({"greeting": format!("hello, {}", args.name)})))
//!     }
//! }
//!
//! capsaga_sdk::export_tool!(Greet);
//! # fn main() {
//! # let meta = capsaga_sdk::describe::<Greet>("0.1.0");
//! # assert_eq!(meta.check(), Ok(()));
//! # }
//! ```
//!
//! Paths given by the model are checked with [`fs::resolve`] before any
//! filesystem access: escapes from the granted directories become a
//! `permission-denied` error that names them. Outgoing HTTP goes through
//! [`http::Request`] (`wasi:http`), checked by the host's net guard. A
//! sub-question to the calling turn's model goes through [`llm::ask`]
//! (import `capsaga:tool/llm`, world `llm-tool` of `wit/llm.wit`).
//!
//! The same code compiles natively, where [`export_tool!`] only checks the
//! type and logging goes to stderr, so tools can be unit-tested with
//! `cargo test`; [`describe`] and [`parse_args`] help there.
//!
//! `#[derive(Deserialize, JsonSchema)]` expands to paths into the `serde` and
//! `schemars` crates, so a tool crate depends on `serde` (feature `derive`)
//! and `schemars` 1.x itself, or points the derives at this crate's
//! re-exports with `#[serde(crate = "capsaga_sdk::serde")]` and
//! `#[schemars(crate = "capsaga_sdk::schemars")]`.

pub mod fs;
pub mod http;
pub mod llm;
pub mod log;
mod meta;
mod output;
#[cfg(not(all(target_arch = "wasm32", target_os = "wasi", target_env = "p2")))]
pub mod testing;

use serde::de::DeserializeOwned;

// Shared with the host (crate `capsaga-types`), so the two cannot drift.
pub use capsaga_types::{CallContext, ErrorKind, Risk, ToolError};
pub use meta::{Meta, MetaError};
pub use output::Output;
pub use schemars::{self, JsonSchema};
pub use serde::{self, Deserialize, Serialize};
pub use serde_json;

/// Everything a tool author needs: `use capsaga_sdk::prelude::*;`.
pub mod prelude {
    pub use crate::{
        CallContext, Deserialize, ErrorKind, JsonSchema, Meta, Output, Risk, Serialize, Tool,
        ToolError,
    };
    pub use crate::{debug, error, info, trace, warn};
    pub use serde_json::{self, json};
}

/// A tool: its arguments, its description and its four operations.
///
/// Every method is an associated function (no `self`): the host creates a
/// fresh instance per call, so no state survives between calls. Whatever
/// [`Tool::compensate`] needs must be in the [`Output`] of
/// [`Tool::execute`] (and, for crash recovery, of [`Tool::dry_run`]).
pub trait Tool {
    /// The arguments, parsed from the call's JSON with serde. Its schemars
    /// schema becomes [`Meta::args_schema`], so schema and code cannot drift.
    /// Use `#[serde(deny_unknown_fields)]` so that a misspelt argument is an
    /// error and not silently ignored, and `#[serde(default)]` for optional
    /// ones. For a tool without arguments use an empty struct (`{}` in JSON).
    type Args: DeserializeOwned + JsonSchema;

    /// Describes the tool. Called in an instance with no grants: no files,
    /// network or environment. The SDK fills in the schema and the version.
    fn meta() -> Meta;

    /// Performs the call.
    ///
    /// # Errors
    /// A [`ToolError`] whose kind, message and hint tell the model what to
    /// do next; I/O errors convert with [`ToolError::from_io`].
    fn execute(ctx: &CallContext, args: Self::Args) -> Result<Output, ToolError>;

    /// Describes the effect `execute` would have, without causing it. The
    /// host runs it with read-only preopens (and HTTP limited to GET/HEAD),
    /// and logs its output as the pre-image for crash recovery, so put there
    /// what [`Tool::compensate`] needs. Declare support with
    /// [`Meta::dry_run`].
    ///
    /// Default: [`Tool::execute`] for a tool without side effects, otherwise
    /// an `unsupported` error.
    ///
    /// # Errors
    /// As for [`Tool::execute`].
    fn dry_run(ctx: &CallContext, args: Self::Args) -> Result<Output, ToolError> {
        let meta = Self::meta();
        if meta.has_side_effects {
            Err(ToolError::unsupported(format!(
                "{} has side effects and cannot preview them (no dry run)",
                meta.name
            ))
            .hint("call the tool for real if the operator allows it, or use another tool"))
        } else {
            Self::execute(ctx, args)
        }
    }

    /// Undoes a committed `execute`, given the same arguments and the output
    /// it returned, or, for a step that crashed in doubt, the output of
    /// `dry_run`. Must be idempotent and must tolerate an `execute` that never
    /// happened or happened only in part. Read the output back with
    /// [`Output::data_as`].
    ///
    /// Default: `Ok(())` for a tool without side effects, otherwise an
    /// `unrevertible` error.
    ///
    /// # Errors
    /// `unrevertible` when the effect cannot be undone (for example a third
    /// party changed the state since); other kinds for transient failures.
    fn compensate(ctx: &CallContext, args: Self::Args, output: &Output) -> Result<(), ToolError> {
        let _ = (ctx, args, output);
        let meta = Self::meta();
        if meta.has_side_effects {
            Err(ToolError::unrevertible(format!(
                "{} does not implement compensate",
                meta.name
            )))
        } else {
            Ok(())
        }
    }
}

/// The complete [`Meta`] of `T` as the host receives it: [`Tool::meta`] with
/// [`Meta::args_schema`] derived from `T::Args` and [`Meta::version`]
/// defaulted to `default_version` (the export macro passes the tool crate's
/// `CARGO_PKG_VERSION`; in a test pass `env!("CARGO_PKG_VERSION")`).
pub fn describe<T: Tool>(default_version: &str) -> Meta {
    let mut meta = T::meta();
    meta.args_schema = Some(args_schema::<T::Args>());
    if meta.version.is_none() {
        meta.version = Some(default_version.to_owned());
    }
    meta
}

/// The JSON Schema (draft 2020-12, with `$schema`) of an argument type, as
/// schemars derives it for deserialisation. The root `title` (the Rust type
/// name, meaningless to the model) is removed; doc comments on the type and
/// its fields become `description`s.
pub fn args_schema<A: JsonSchema>() -> serde_json::Value {
    let schema = schemars::generate::SchemaSettings::draft2020_12()
        .into_generator()
        .into_root_schema_for::<A>();
    let mut value = schema.to_value();
    if let Some(obj) = value.as_object_mut() {
        obj.remove("title");
    }
    value
}

/// Parses the call's JSON arguments into `A`. Blank text counts as `{}`.
///
/// # Errors
/// [`ToolError`] of kind `invalid-args` whose message and hint name the
/// problem and where it is, e.g. ``missing field `path` `` or
/// ``at `max_bytes`: invalid type: string "x", expected u64``.
pub fn parse_args<A: DeserializeOwned>(args_json: &str) -> Result<A, ToolError> {
    let text = if args_json.trim().is_empty() {
        "{}"
    } else {
        args_json
    };
    let mut de = serde_json::Deserializer::from_str(text);
    let parsed: Result<A, _> = serde_path_to_error::deserialize(&mut de);
    let problem = match parsed {
        Ok(args) => match de.end() {
            Ok(()) => return Ok(args),
            Err(e) => format!("trailing characters after the JSON object: {e}"),
        },
        Err(e) => {
            let path = e.path().to_string();
            if path == "." {
                e.into_inner().to_string()
            } else {
                format!("at `{path}`: {}", e.into_inner())
            }
        }
    };
    Err(
        ToolError::invalid_args(format!("invalid arguments: {problem}")).hint(format!(
            "the arguments do not match the tool's schema ({problem}); fix them and call again"
        )),
    )
}

/// Glue between the generated bindings and [`Tool`]; used by
/// [`export_tool!`]. Not part of the API.
#[doc(hidden)]
pub mod __private {
    /// Bindings of `wit/`, world `labelled-tool`: the `tool` world plus the
    /// `llm` import and the `output-fields` export. A component imports only
    /// what it calls, so a tool that never asks a model does not import
    /// `llm`.
    #[allow(missing_docs, clippy::all, clippy::pedantic)]
    pub mod bindings {
        wit_bindgen::generate!({
            path: "../wit",
            world: "labelled-tool",
            pub_export_macro: true,
            export_macro_name: "export_tool_world",
        });
    }

    use crate::{CallContext, ErrorKind, Output, Risk, Tool, ToolError, describe, parse_args};
    use bindings::capsaga::tool::types as wit;

    pub use bindings::Guest;
    pub use wit::{
        CallContext as WitCallContext, OutputField as WitOutputField, ToolError as WitToolError,
        ToolMeta as WitToolMeta, ToolOutput as WitToolOutput,
    };

    /// `meta` export: [`describe`] checked and converted. An invalid meta is a
    /// bug of the tool: it traps, and the host refuses to load the tool.
    pub fn meta<T: Tool>(default_version: &str) -> WitToolMeta {
        let meta = describe::<T>(default_version);
        if let Err(e) = meta.check() {
            panic!("{e}");
        }
        let r = meta.into_record(default_version);
        WitToolMeta {
            risk: match r.risk {
                Risk::Low => wit::Risk::Low,
                Risk::Medium => wit::Risk::Medium,
                Risk::High => wit::Risk::High,
            },
            name: r.name,
            description: r.description,
            args_schema: r.args_schema,
            has_side_effects: r.has_side_effects,
            returns_untrusted: r.returns_untrusted,
            idempotent: r.idempotent,
            supports_dry_run: r.supports_dry_run,
            capabilities: r.capabilities,
            version: r.version,
        }
    }

    /// `output-fields` export: the field labels of [`describe`]'s meta
    /// (checked by `meta`, which the host calls first).
    pub fn output_fields<T: Tool>(default_version: &str) -> Vec<WitOutputField> {
        describe::<T>(default_version)
            .output_fields
            .into_iter()
            .map(|f| WitOutputField {
                path: f.path,
                integrity: match f.integrity {
                    capsaga_types::FieldIntegrity::Trusted => wit::FieldIntegrity::Trusted,
                    capsaga_types::FieldIntegrity::Untrusted => wit::FieldIntegrity::Untrusted,
                },
            })
            .collect()
    }

    /// `execute` export.
    pub fn execute<T: Tool>(
        ctx: WitCallContext,
        args_json: String,
    ) -> Result<WitToolOutput, WitToolError> {
        let ctx = context(ctx);
        let args = parse_args::<T::Args>(&args_json).map_err(error)?;
        output::<T>(T::execute(&ctx, args))
    }

    /// `dry-run` export.
    pub fn dry_run<T: Tool>(
        ctx: WitCallContext,
        args_json: String,
    ) -> Result<WitToolOutput, WitToolError> {
        let ctx = context(ctx);
        let args = parse_args::<T::Args>(&args_json).map_err(error)?;
        output::<T>(T::dry_run(&ctx, args))
    }

    /// `compensate` export.
    pub fn compensate<T: Tool>(
        ctx: WitCallContext,
        args_json: String,
        out: WitToolOutput,
    ) -> Result<(), WitToolError> {
        let ctx = context(ctx);
        let args = parse_args::<T::Args>(&args_json).map_err(error)?;
        let out = Output::from_parts(out.data, out.effects, out.next_hint, out.summary);
        T::compensate(&ctx, args, &out).map_err(error)
    }

    fn context(ctx: WitCallContext) -> CallContext {
        CallContext {
            saga_id: ctx.saga_id,
            step_seq: ctx.step_seq,
            idempotency_key: ctx.idempotency_key,
            deadline_ms: ctx.deadline_ms,
            dry_run: ctx.dry_run,
        }
    }

    fn output<T: Tool>(result: Result<Output, ToolError>) -> Result<WitToolOutput, WitToolError> {
        let (data, effects, next_hint, summary) =
            result.and_then(Output::into_data_text).map_err(error)?;
        let summary = if !summary.is_empty() {
            summary
        } else if !effects.is_empty() {
            effects.join("; ")
        } else {
            format!("{} completed", T::meta().name)
        };
        Ok(WitToolOutput {
            data,
            effects,
            next_hint,
            summary,
        })
    }

    /// A host import's error as the SDK's [`ToolError`].
    #[cfg(target_arch = "wasm32")]
    pub(crate) fn error_from_wit(e: WitToolError) -> ToolError {
        let kind = match e.kind {
            wit::ErrorKind::InvalidArgs => ErrorKind::InvalidArgs,
            wit::ErrorKind::NotFound => ErrorKind::NotFound,
            wit::ErrorKind::PermissionDenied => ErrorKind::PermissionDenied,
            wit::ErrorKind::NetworkError => ErrorKind::NetworkError,
            wit::ErrorKind::ExternalError => ErrorKind::ExternalError,
            wit::ErrorKind::QuotaExceeded => ErrorKind::QuotaExceeded,
            wit::ErrorKind::Unsupported => ErrorKind::Unsupported,
            wit::ErrorKind::Timeout => ErrorKind::Timeout,
            wit::ErrorKind::Unrevertible => ErrorKind::Unrevertible,
            wit::ErrorKind::Unknown => ErrorKind::Unknown,
        };
        let mut err = ToolError::new(kind, e.message)
            .hint(e.llm_hint)
            .retriable(e.retriable);
        if let Some(d) = e.details.and_then(|d| serde_json::from_str(&d).ok()) {
            err = err.details(d);
        }
        err
    }

    fn error(e: ToolError) -> WitToolError {
        WitToolError {
            kind: match e.kind {
                ErrorKind::InvalidArgs => wit::ErrorKind::InvalidArgs,
                ErrorKind::NotFound => wit::ErrorKind::NotFound,
                ErrorKind::PermissionDenied => wit::ErrorKind::PermissionDenied,
                ErrorKind::NetworkError => wit::ErrorKind::NetworkError,
                ErrorKind::ExternalError => wit::ErrorKind::ExternalError,
                ErrorKind::QuotaExceeded => wit::ErrorKind::QuotaExceeded,
                ErrorKind::Unsupported => wit::ErrorKind::Unsupported,
                ErrorKind::Timeout => wit::ErrorKind::Timeout,
                ErrorKind::Unrevertible => wit::ErrorKind::Unrevertible,
                ErrorKind::Unknown => wit::ErrorKind::Unknown,
            },
            message: e.message,
            llm_hint: e.llm_hint,
            details: e.details.map(|d| d.to_string()),
            retriable: e.retriable,
        }
    }
}

/// Exports a [`Tool`] as the component's `tool` world:
/// `capsaga_sdk::export_tool!(MyTool);` once, at the top level of the tool's
/// `cdylib` crate.
///
/// On wasm32 it generates the `meta`, `execute`, `dry-run` and `compensate`
/// exports, which parse the JSON arguments ([`parse_args`]), call the tool,
/// and convert [`Output`]/[`ToolError`]; the version in `meta` defaults to the
/// tool crate's `CARGO_PKG_VERSION`. On other targets it only checks that the
/// type implements [`Tool`], so the crate still builds and tests natively.
#[macro_export]
macro_rules! export_tool {
    ($tool:ty) => {
        const _: fn() = || {
            fn assert_tool<T: $crate::Tool>() {}
            assert_tool::<$tool>();
        };

        #[cfg(target_arch = "wasm32")]
        const _: () = {
            struct __CapsagaToolExport;

            impl $crate::__private::Guest for __CapsagaToolExport {
                fn meta() -> $crate::__private::WitToolMeta {
                    $crate::__private::meta::<$tool>(::core::env!("CARGO_PKG_VERSION"))
                }
                fn output_fields() -> ::std::vec::Vec<$crate::__private::WitOutputField> {
                    $crate::__private::output_fields::<$tool>(::core::env!("CARGO_PKG_VERSION"))
                }
                fn execute(
                    ctx: $crate::__private::WitCallContext,
                    args_json: ::std::string::String,
                ) -> ::core::result::Result<
                    $crate::__private::WitToolOutput,
                    $crate::__private::WitToolError,
                > {
                    $crate::__private::execute::<$tool>(ctx, args_json)
                }
                fn dry_run(
                    ctx: $crate::__private::WitCallContext,
                    args_json: ::std::string::String,
                ) -> ::core::result::Result<
                    $crate::__private::WitToolOutput,
                    $crate::__private::WitToolError,
                > {
                    $crate::__private::dry_run::<$tool>(ctx, args_json)
                }
                fn compensate(
                    ctx: $crate::__private::WitCallContext,
                    args_json: ::std::string::String,
                    output: $crate::__private::WitToolOutput,
                ) -> ::core::result::Result<(), $crate::__private::WitToolError> {
                    $crate::__private::compensate::<$tool>(ctx, args_json, output)
                }
            }

            $crate::__private::bindings::export_tool_world!(
                __CapsagaToolExport with_types_in $crate::__private::bindings
            );
        };
    };
}

#[cfg(test)]
mod tests {
    use super::prelude::*;
    use super::*;

    /// Arguments of the test tool.
    #[derive(Deserialize, JsonSchema, Debug, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Args {
        /// Absolute path of the file.
        path: String,
        /// Bytes to read at most.
        #[serde(default = "default_max")]
        #[schemars(range(min = 1, max = 1024))]
        max_bytes: u64,
    }

    fn default_max() -> u64 {
        64
    }

    struct Reader;
    impl Tool for Reader {
        type Args = Args;
        fn meta() -> Meta {
            Meta::new("reader", "Reads.")
                .capability("fs:read:*")
                .idempotent(true)
        }
        fn execute(_ctx: &CallContext, args: Args) -> Result<Output, ToolError> {
            Ok(Output::new(json!({"path": args.path})))
        }
    }

    struct Writer;
    impl Tool for Writer {
        type Args = Args;
        fn meta() -> Meta {
            Meta::new("writer", "Writes.")
                .side_effects(true)
                .risk(Risk::Medium)
                .version("9.9.9")
        }
        fn execute(_ctx: &CallContext, _args: Args) -> Result<Output, ToolError> {
            Ok(Output::new(json!({})))
        }
    }

    crate::export_tool!(Reader);

    #[test]
    fn describe_fills_schema_and_version() {
        let meta = describe::<Reader>("1.0.0");
        assert_eq!(meta.check(), Ok(()));
        assert_eq!(meta.version.as_deref(), Some("1.0.0"));
        let schema = meta.args_schema.unwrap_or_default();
        assert_eq!(
            schema["$schema"],
            "https://json-schema.org/draft/2020-12/schema"
        );
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(schema["required"], json!(["path"]));
        assert_eq!(
            schema["properties"]["path"]["description"],
            "Absolute path of the file."
        );
        assert_eq!(schema["properties"]["max_bytes"]["default"], 64);
        assert_eq!(schema["properties"]["max_bytes"]["maximum"], 1024);
        assert!(schema.get("title").is_none());
        assert_eq!(schema["description"], "Arguments of the test tool.");
    }

    #[test]
    fn explicit_version_wins() {
        assert_eq!(
            describe::<Writer>("1.0.0").version.as_deref(),
            Some("9.9.9")
        );
    }

    #[test]
    fn empty_args_struct_schema() {
        #[derive(Deserialize, JsonSchema)]
        #[serde(deny_unknown_fields)]
        struct NoArgs {}
        let schema = args_schema::<NoArgs>();
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["additionalProperties"], false);
        assert!(parse_args::<NoArgs>("{}").is_ok());
        assert!(parse_args::<NoArgs>("  ").is_ok());
        assert!(parse_args::<NoArgs>(r#"{"x":1}"#).is_err());
    }

    #[test]
    fn parse_args_ok_and_default() {
        let a: Args = parse_args(r#"{"path":"/w/a"}"#).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            a,
            Args {
                path: "/w/a".into(),
                max_bytes: 64
            }
        );
    }

    #[test]
    fn parse_args_errors_name_the_problem() {
        let cases = [
            (r#"{}"#, "missing field `path`"),
            (r#"{"path":"/a","colour":1}"#, "unknown field `colour`"),
            (r#"{"path":"/a","max_bytes":"x"}"#, "at `max_bytes`"),
            (r#"{"path":"/a"} trailing"#, "trailing characters"),
            (r#"not json"#, "expected"),
        ];
        for (json, needle) in cases {
            let e = parse_args::<Args>(json).err();
            let e = e.unwrap_or_else(|| panic!("{json} should fail"));
            assert_eq!(e.kind, ErrorKind::InvalidArgs);
            assert!(e.message.contains(needle), "{json}: {}", e.message);
            assert!(e.llm_hint.contains(needle), "{json}: {}", e.llm_hint);
            assert!(!e.retriable);
        }
    }

    #[test]
    fn default_dry_run_and_compensate() {
        let ctx = CallContext::default();
        let args = || Args {
            path: "/w/a".into(),
            max_bytes: 1,
        };
        // No side effects: dry run = execute, compensate = nothing to undo.
        let out = Reader::dry_run(&ctx, args()).map_err(|e| e.to_string());
        assert_eq!(
            out.ok().and_then(|o| o.data_as::<serde_json::Value>().ok()),
            Some(json!({"path": "/w/a"}))
        );
        assert!(Reader::compensate(&ctx, args(), &Output::new(json!({}))).is_ok());
        // Side effects: dry run unsupported, compensate unrevertible.
        assert_eq!(
            Writer::dry_run(&ctx, args()).err().map(|e| e.kind),
            Some(ErrorKind::Unsupported)
        );
        assert_eq!(
            Writer::compensate(&ctx, args(), &Output::new(json!({})))
                .err()
                .map(|e| e.kind),
            Some(ErrorKind::Unrevertible)
        );
    }

    #[test]
    fn glue_converts_meta_output_and_errors() {
        let wit_meta = __private::meta::<Writer>("0.0.1");
        assert_eq!(wit_meta.name, "writer");
        assert_eq!(wit_meta.version, "9.9.9");
        assert!(wit_meta.has_side_effects);
        let schema: serde_json::Value =
            serde_json::from_str(&wit_meta.args_schema).unwrap_or_default();
        assert_eq!(schema["type"], "object");

        let ctx = __private::WitCallContext {
            saga_id: "s".into(),
            step_seq: 1,
            idempotency_key: "k".into(),
            deadline_ms: 0,
            dry_run: false,
        };
        let out = __private::execute::<Reader>(ctx.clone(), r#"{"path":"/w/a"}"#.into());
        let out = out.map_err(|e| e.message);
        assert_eq!(
            out.as_ref().map(|o| o.data.as_str()),
            Ok(r#"{"path":"/w/a"}"#)
        );
        assert_eq!(
            out.as_ref().map(|o| o.summary.as_str()),
            Ok("reader completed")
        );

        let err = __private::execute::<Reader>(ctx.clone(), "{}".into()).err();
        assert!(
            err.is_some_and(|e| e.llm_hint.contains("missing field `path`")
                && e.kind == __private::bindings::capsaga::tool::types::ErrorKind::InvalidArgs)
        );

        let err = __private::dry_run::<Writer>(ctx.clone(), r#"{"path":"/a"}"#.into()).err();
        assert!(err.is_some_and(|e| !e.retriable && e.details.is_none()));

        let wit_out = __private::WitToolOutput {
            data: "{}".into(),
            effects: vec![],
            next_hint: None,
            summary: String::new(),
        };
        assert!(__private::compensate::<Reader>(ctx, r#"{"path":"/a"}"#.into(), wit_out).is_ok());
    }
}
