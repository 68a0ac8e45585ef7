//! Conversions between the generated WIT records and the host's types, and the
//! mapping of traps and limits to typed tool errors.

use super::bindings::{
    WitErrorKind, WitFieldIntegrity, WitOutputField, WitRisk, WitToolError, WitToolMeta,
    WitToolOutput,
};
use capsaga_core::error::{ErrorKind, ToolError};
use capsaga_core::json::parse_strict;
use capsaga_core::meta::{FieldIntegrity, OutputField, RawToolMeta, Risk};
use capsaga_core::policy::Limits;
use capsaga_core::tool::ToolOutput;
use wasmtime::Trap;

/// Largest `details` JSON text kept from a guest error, bytes.
const MAX_DETAILS_BYTES: usize = 64 * 1024;
/// Largest message or hint kept from a guest error, bytes.
const MAX_TEXT_BYTES: usize = 8 * 1024;

/// The meta and the field labels a component returned, as the host's raw
/// meta (checked later by `ToolMeta::from_raw`).
pub(super) fn raw_meta(m: WitToolMeta, fields: Vec<WitOutputField>) -> RawToolMeta {
    RawToolMeta {
        name: m.name,
        description: m.description,
        args_schema: m.args_schema,
        has_side_effects: m.has_side_effects,
        risk: match m.risk {
            WitRisk::Low => Risk::Low,
            WitRisk::Medium => Risk::Medium,
            WitRisk::High => Risk::High,
        },
        returns_untrusted: m.returns_untrusted,
        idempotent: m.idempotent,
        supports_dry_run: m.supports_dry_run,
        capabilities: m.capabilities,
        version: m.version,
        output_fields: fields
            .into_iter()
            .map(|f| OutputField {
                path: f.path,
                integrity: match f.integrity {
                    WitFieldIntegrity::Trusted => FieldIntegrity::Trusted,
                    WitFieldIntegrity::Untrusted => FieldIntegrity::Untrusted,
                },
            })
            .collect(),
    }
}

fn kind_from_wit(k: WitErrorKind) -> ErrorKind {
    match k {
        WitErrorKind::InvalidArgs => ErrorKind::InvalidArgs,
        WitErrorKind::NotFound => ErrorKind::NotFound,
        WitErrorKind::PermissionDenied => ErrorKind::PermissionDenied,
        WitErrorKind::NetworkError => ErrorKind::NetworkError,
        WitErrorKind::ExternalError => ErrorKind::ExternalError,
        WitErrorKind::QuotaExceeded => ErrorKind::QuotaExceeded,
        WitErrorKind::Unsupported => ErrorKind::Unsupported,
        WitErrorKind::Timeout => ErrorKind::Timeout,
        WitErrorKind::Unrevertible => ErrorKind::Unrevertible,
        WitErrorKind::Unknown => ErrorKind::Unknown,
    }
}

fn clip(s: String, max: usize) -> String {
    if s.len() <= max { s } else { clip_str(&s, max) }
}

/// At most `max` bytes of `text`, cut at a char boundary, marked `[...]`
/// when cut.
fn clip_str(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{} [...]", &text[..cut])
}

/// A guest's own error, with oversized fields clipped and `details` parsed
/// (kept as a string when it is not JSON).
pub(super) fn error_from_wit(e: WitToolError) -> ToolError {
    let details = e.details.map(|d| {
        Box::new(
            parse_strict(&d, MAX_DETAILS_BYTES)
                .unwrap_or_else(|_| serde_json::Value::String(clip(d, MAX_TEXT_BYTES))),
        )
    });
    let mut err = ToolError::with_hint(
        kind_from_wit(e.kind),
        clip(e.message, MAX_TEXT_BYTES),
        clip(e.llm_hint, MAX_TEXT_BYTES),
    )
    .retriable(e.retriable);
    err.details = details;
    err
}

/// A guest output, checked against the output cap and parsed.
pub(super) fn output_from_wit(
    tool: &str,
    o: WitToolOutput,
    limits: &Limits,
) -> Result<ToolOutput, ToolError> {
    let size = o.data.len()
        + o.effects.iter().map(String::len).sum::<usize>()
        + o.next_hint.as_ref().map_or(0, String::len)
        + o.summary.len();
    if size as u64 > limits.output_bytes {
        return Err(ToolError::with_hint(
            ErrorKind::QuotaExceeded,
            format!(
                "tool `{tool}` returned {size} bytes of output, over the cap of {} bytes",
                limits.output_bytes
            ),
            "Ask for less data at once (a smaller range, a lower max_bytes, a narrower query).",
        ));
    }
    let data = parse_strict(&o.data, limits.output_bytes as usize).map_err(|e| {
        ToolError::with_hint(
            ErrorKind::Unknown,
            format!("tool `{tool}` returned output data that is not valid JSON: {e}"),
            "The tool is faulty; try another tool or report it to the operator.",
        )
    })?;
    Ok(ToolOutput {
        data,
        effects: o.effects,
        next_hint: o.next_hint,
        summary: o.summary,
    })
}

/// The host's output record lowered back to WIT (for `compensate`).
pub(super) fn output_to_wit(o: &ToolOutput) -> WitToolOutput {
    WitToolOutput {
        data: o.data.to_string(),
        effects: o.effects.clone(),
        next_hint: o.next_hint.clone(),
        summary: o.summary.clone(),
    }
}

/// Context marking an error raised while instantiating the component (before
/// any export ran): a component that needs more memories, tables or core
/// instances than the per-call caps allow fails there.
#[derive(Debug)]
pub(super) struct Instantiating;

impl std::fmt::Display for Instantiating {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("cannot instantiate the component")
    }
}

/// The error for a call that passed its deadline on the host side.
pub(super) fn deadline_error(tool: &str, op: &str, limits: &Limits) -> ToolError {
    ToolError::with_hint(
        ErrorKind::Timeout,
        format!(
            "tool `{tool}` {op} exceeded its deadline of {} ms and was stopped",
            limits.deadline_ms
        ),
        "The call took too long. Try a smaller request, or a different approach.",
    )
    .retriable(false)
}

/// A call the file journal stopped (issue 28): over its quota, or unable
/// to record.
#[cfg(unix)]
fn journal_error(
    tool: &str,
    op: &str,
    stop: &super::factors::fs::journal::JournalStop,
) -> ToolError {
    if stop.quota {
        ToolError::with_hint(
            ErrorKind::QuotaExceeded,
            format!(
                "tool `{tool}` {op} was stopped before changing more files: {}",
                stop.message
            ),
            "The call changes more file bytes than the host may journal for one call or saga. Change fewer or smaller files, or ask the operator.",
        )
    } else {
        ToolError::with_hint(
            ErrorKind::Unknown,
            format!("tool `{tool}` {op} was stopped: {}", stop.message),
            "The host could not record the files this call changes; retry later.",
        )
    }
}

/// Classify a trap or host error from a call.
pub(super) fn trap_to_error(
    tool: &str,
    op: &str,
    err: &wasmtime::Error,
    limiter_hit: Option<&str>,
    stdio: &str,
    limits: &Limits,
) -> ToolError {
    let trap = err.downcast_ref::<Trap>().copied();
    let details = || {
        let tail: String = stdio
            .chars()
            .rev()
            .take(2000)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        serde_json::json!({ "trap": format!("{err:#}").chars().take(2000).collect::<String>(), "stderr": tail })
    };
    if matches!(trap, Some(Trap::Interrupt)) {
        return deadline_error(tool, op, limits).with_details(details());
    }
    if matches!(trap, Some(Trap::OutOfFuel)) {
        return ToolError::with_hint(
            ErrorKind::QuotaExceeded,
            format!(
                "tool `{tool}` {op} used all its fuel ({} units) and was stopped",
                limits.fuel
            ),
            "The call needed too much computation. Try a smaller request.",
        )
        .with_details(details());
    }
    if is_transfer_cap(err) {
        return ToolError::with_hint(
            ErrorKind::QuotaExceeded,
            format!(
                "tool `{tool}` {op} tried to pass more than {} bytes to the host at once \
                 (an output, error or log message over the transfer cap)",
                transfer_cap_bytes(limits)
            ),
            "Ask for less data at once (a smaller range, a lower max_bytes, a narrower query).",
        )
        .with_details(details());
    }
    #[cfg(unix)]
    if let Some(stop) = err.downcast_ref::<super::factors::fs::journal::JournalStop>() {
        return journal_error(tool, op, stop).with_details(details());
    }
    if let Some(hit) = limiter_hit {
        return ToolError::with_hint(
            ErrorKind::QuotaExceeded,
            format!("tool `{tool}` {op} was stopped: {hit}"),
            "The call needed too much memory. Try a smaller request.",
        )
        .with_details(details());
    }
    if trap.is_none() && err.downcast_ref::<Instantiating>().is_some() {
        let root = err
            .chain()
            .last()
            .map(|e| e.to_string())
            .unwrap_or_default();
        return ToolError::with_hint(
            ErrorKind::QuotaExceeded,
            format!(
                "tool `{tool}` cannot be instantiated within the sandbox's per-call caps \
                 (memories, tables, core instances): {}",
                root.chars().take(500).collect::<String>()
            ),
            "This tool cannot run in this sandbox; use another tool.",
        )
        .with_details(details());
    }
    if matches!(trap, Some(Trap::StackOverflow)) {
        return ToolError::with_hint(
            ErrorKind::QuotaExceeded,
            format!("tool `{tool}` {op} exhausted its call stack"),
            "The call recursed too deeply. Try a smaller or flatter input.",
        )
        .with_details(details());
    }
    let what = match trap {
        Some(t) => format!("trapped ({t})"),
        None => format!(
            "failed in the host: {}",
            format!("{err:#}").chars().take(500).collect::<String>()
        ),
    };
    let panic_line = panic_message(stdio)
        .map(|l| format!(": {l}"))
        .unwrap_or_default();
    ToolError::with_hint(
        ErrorKind::Unknown,
        format!("tool `{tool}` {op} {what}{panic_line}"),
        "The tool crashed. Do not retry the same call; try another tool or different arguments.",
    )
    .with_details(details())
}

/// Bytes a guest may pass to the host in one transfer (the results of an
/// export, or the arguments of one host call such as `log` or a WASI call),
/// enforced by Wasmtime's hostcall fuel before anything is copied: the output
/// cap, at least 2 MiB (WASI writes pass up to 1 MiB at a time), plus 64 KiB
/// for the record around the data.
pub fn transfer_cap_bytes(limits: &Limits) -> usize {
    let out = usize::try_from(limits.output_bytes).unwrap_or(usize::MAX);
    out.max(2 * 1024 * 1024).saturating_add(64 * 1024)
}

/// True when `err` is Wasmtime refusing to copy more than the hostcall fuel
/// allows (its error type is private; its message is stable in Wasmtime 48
/// and checked by the hostile-component tests).
fn is_transfer_cap(err: &wasmtime::Error) -> bool {
    err.chain().any(|e| {
        e.to_string()
            .contains("fuel allocated for hostcalls has been exhausted")
    })
}

/// The guest's panic report from its captured stderr: the `panicked at` line
/// and the message Rust prints on the line after it, at most 600 characters.
fn panic_message(stdio: &str) -> Option<String> {
    let mut lines = stdio.lines();
    let at = lines.find(|l| l.contains("panicked"))?;
    let mut text = at.trim().to_string();
    if let Some(next) = lines.next().filter(|l| !l.trim().is_empty()) {
        text.push(' ');
        text.push_str(next.trim());
    }
    Some(text.chars().take(600).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panic_message_keeps_the_message_line() {
        let err = "noise\nthread '<unnamed>' (1) panicked at src/lib.rs:33:9:\ndeliberate panic\nnote: run with RUST_BACKTRACE\n";
        assert_eq!(
            panic_message(err).as_deref(),
            Some("thread '<unnamed>' (1) panicked at src/lib.rs:33:9: deliberate panic")
        );
        assert_eq!(panic_message("no panic here"), None);
        let old_style = "thread 'main' panicked at 'boom', src/lib.rs:1:1";
        assert_eq!(panic_message(old_style).as_deref(), Some(old_style));
    }

    #[test]
    fn clip_cuts_at_char_boundaries() {
        assert_eq!(clip_str("short", 10), "short");
        assert_eq!(clip_str("ééé", 3), "é [...]");
    }
}
