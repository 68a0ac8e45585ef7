//! Conversions between the generated WIT records and the host's types, and the
//! mapping of traps and limits to typed tool errors.

use super::bindings::{WitErrorKind, WitRisk, WitToolError, WitToolMeta, WitToolOutput};
use capsaga_core::error::{ErrorKind, ToolError};
use capsaga_core::json::parse_strict;
use capsaga_core::meta::{RawToolMeta, Risk};
use capsaga_core::policy::Limits;
use capsaga_core::tool::ToolOutput;
use wasmtime::Trap;

/// Largest `details` JSON text kept from a guest error, bytes.
const MAX_DETAILS_BYTES: usize = 64 * 1024;
/// Largest message or hint kept from a guest error, bytes.
const MAX_TEXT_BYTES: usize = 8 * 1024;

pub(super) fn raw_meta(m: WitToolMeta) -> RawToolMeta {
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

fn clip(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str(" [...]");
    }
    s
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
    ToolError {
        kind: kind_from_wit(e.kind),
        message: clip(e.message, MAX_TEXT_BYTES),
        llm_hint: clip(e.llm_hint, MAX_TEXT_BYTES),
        details,
        retriable: e.retriable,
    }
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
        return Err(ToolError::new(
            ErrorKind::QuotaExceeded,
            format!(
                "tool `{tool}` returned {size} bytes of output, over the cap of {} bytes",
                limits.output_bytes
            ),
            "Ask for less data at once (a smaller range, a lower max_bytes, a narrower query).",
        ));
    }
    let data = parse_strict(&o.data, limits.output_bytes as usize).map_err(|e| {
        ToolError::new(
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

/// The error for a call that passed its deadline on the host side.
pub(super) fn deadline_error(tool: &str, op: &str, limits: &Limits) -> ToolError {
    ToolError::new(
        ErrorKind::Timeout,
        format!(
            "tool `{tool}` {op} exceeded its deadline of {} ms and was stopped",
            limits.deadline_ms
        ),
        "The call took too long. Try a smaller request, or a different approach.",
    )
    .retriable(false)
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
        return ToolError::new(
            ErrorKind::QuotaExceeded,
            format!(
                "tool `{tool}` {op} used all its fuel ({} units) and was stopped",
                limits.fuel
            ),
            "The call needed too much computation. Try a smaller request.",
        )
        .with_details(details());
    }
    if let Some(hit) = limiter_hit {
        return ToolError::new(
            ErrorKind::QuotaExceeded,
            format!("tool `{tool}` {op} was stopped: {hit}"),
            "The call needed too much memory. Try a smaller request.",
        )
        .with_details(details());
    }
    if matches!(trap, Some(Trap::StackOverflow)) {
        return ToolError::new(
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
    let panic_line = stdio
        .lines()
        .find(|l| l.contains("panicked"))
        .map(|l| format!(": {}", l.chars().take(300).collect::<String>()))
        .unwrap_or_default();
    ToolError::new(
        ErrorKind::Unknown,
        format!("tool `{tool}` {op} {what}{panic_line}"),
        "The tool crashed. Do not retry the same call; try another tool or different arguments.",
    )
    .with_details(details())
}
