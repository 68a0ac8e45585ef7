//! Output helpers: human text or one JSON document.

use capsaga_agent::trace::{PolicyDecision, TraceStep, Validation};
use capsaga_core::error::ToolError;
use capsaga_core::tool::ToolOutput;
use capsaga_store::{LogRow, StepRow};
use serde::Serialize;

/// Where and how to print.
pub struct Out {
    /// One JSON document (`--json`) instead of text.
    pub json: bool,
}

impl Out {
    /// Print `value` as JSON (pretty) when `--json`.
    pub fn json<T: Serialize>(&self, value: &T) {
        match serde_json::to_string_pretty(value) {
            Ok(s) => outln!("{s}"),
            Err(e) => errln!("capsaga: cannot render JSON: {e}"),
        }
    }
}

/// One line for a tool output.
pub(crate) fn output_line(o: &ToolOutput) -> String {
    let mut s = if o.summary.is_empty() {
        clip(&o.data.to_string(), 160)
    } else {
        o.summary.clone()
    };
    if !o.effects.is_empty() {
        s.push_str(&format!(" [{}]", o.effects.join("; ")));
    }
    s
}

/// One line for a tool error.
pub(crate) fn error_line(e: &ToolError) -> String {
    format!("{}: {}", kind_name(e.kind), e.message)
}

/// An error kind as every output of the command line spells it: the JSON
/// (serde) name, e.g. `permission_denied`, in text as in `--json`.
pub fn kind_name(k: capsaga_core::error::ErrorKind) -> String {
    match serde_json::to_value(k) {
        Ok(serde_json::Value::String(s)) => s,
        _ => k.as_str().replace('-', "_"),
    }
}

pub(crate) fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n).collect::<String>())
    }
}

/// A `wal_log` row as one line.
pub(crate) fn log_line(r: &LogRow) -> String {
    let step = r
        .step_seq
        .map(|s| format!("step {s}"))
        .unwrap_or_else(|| "saga".into());
    let detail = match r.record.as_str() {
        "BEGIN" => format!(
            "{} {}",
            r.detail.get("tool").and_then(|v| v.as_str()).unwrap_or("?"),
            clip(
                &r.detail
                    .get("args")
                    .map(|a| a.to_string())
                    .unwrap_or_default(),
                100
            )
        ),
        "COMMIT" => r
            .detail
            .get("output")
            .and_then(|o| serde_json::from_value::<ToolOutput>(o.clone()).ok())
            .map(|o| output_line(&o))
            .unwrap_or_default(),
        "FAIL" | "COMPENSATION_FAILED" => r
            .detail
            .get("error")
            .and_then(|e| serde_json::from_value::<ToolError>(e.clone()).ok())
            .map(|e| error_line(&e))
            .unwrap_or_default(),
        "STATE" => {
            format!(
                "{}{}",
                r.detail
                    .get("state")
                    .and_then(|v| v.as_str())
                    .unwrap_or("?"),
                r.detail
                    .get("event")
                    .and_then(|v| v.as_str())
                    .map(|e| format!(" (after {e})"))
                    .unwrap_or_default()
            ) + r
                .detail
                .get("actor")
                .and_then(|v| v.as_str())
                .map(|a| format!(" by the {a}"))
                .unwrap_or_default()
                .as_str()
        }
        // Information flow (issue 47): what the step brought into its saga,
        // its fields' labels, then where it came from.
        "LABEL" => match r.detail.get("label") {
            Some(l) => match serde_json::from_value::<capsaga_flow::Label>(l.clone()) {
                Ok(parsed) => format!("output label: {} (from {})", label_text(l), parsed.source),
                Err(_) => "unreadable label".into(),
            },
            None => "unreadable label".into(),
        },
        "IN_DOUBT" => format!(
            "stopped by the host after it ran, in doubt (compensated from its pre-image): {}",
            r.detail
                .get("error")
                .and_then(|e| e.get("message"))
                .and_then(|v| v.as_str())
                .unwrap_or("")
        ),
        "RETRY" => format!(
            "attempt {} failed, retrying in {} ms: {}",
            r.detail
                .get("attempt")
                .and_then(|v| v.as_u64())
                .unwrap_or(0),
            r.detail
                .get("delay_ms")
                .and_then(|v| v.as_u64())
                .unwrap_or(0),
            r.detail
                .get("error")
                .and_then(|e| serde_json::from_value::<ToolError>(e.clone()).ok())
                .map(|e| error_line(&e))
                .unwrap_or_default()
        ),
        "OWNER" => format!(
            "owner {} ({})",
            r.detail
                .get("owner")
                .and_then(|v| v.as_str())
                .unwrap_or("none"),
            r.detail.get("why").and_then(|v| v.as_str()).unwrap_or("")
        ),
        "APPROVAL_REQUESTED" | "APPROVAL_APPROVED" | "APPROVAL_DENIED" | "APPROVAL_STALE"
        | "APPROVAL_EXPIRED" | "APPROVAL_CLAIMED" => approval_detail(r),
        "FS_RESTORE" => restore_detail(r),
        _ => String::new(),
    };
    format!(
        "{:>5}  {}  {:<8} {:<20} {}",
        r.seq, r.at, step, r.record, detail
    )
}

/// The detail of an approval's record (`APPROVAL_*`).
fn approval_detail(r: &LogRow) -> String {
    match r.record.as_str() {
        "APPROVAL_REQUESTED" => format!(
            "{} {}: {}",
            r.detail
                .get("approval_id")
                .and_then(|v| v.as_str())
                .unwrap_or("?"),
            r.detail.get("tool").and_then(|v| v.as_str()).unwrap_or("?"),
            clip(
                r.detail
                    .get("summary")
                    .and_then(|v| v.as_str())
                    .unwrap_or(""),
                100
            )
        ),
        "APPROVAL_APPROVED" | "APPROVAL_DENIED" => format!(
            "{} by {}{}",
            r.detail
                .get("approval_id")
                .and_then(|v| v.as_str())
                .unwrap_or("?"),
            r.detail.get("by").and_then(|v| v.as_str()).unwrap_or("?"),
            r.detail
                .get("note")
                .and_then(|v| v.as_str())
                .map(|n| format!(" (note: {})", clip(n, 200)))
                .unwrap_or_default()
        ),
        "APPROVAL_STALE" | "APPROVAL_EXPIRED" => format!(
            "{}{}",
            r.detail
                .get("approval_id")
                .and_then(|v| v.as_str())
                .unwrap_or("?"),
            r.detail
                .get("replaced_by")
                .and_then(|v| v.as_str())
                .map(|n| format!(", asked again as {n}"))
                .unwrap_or_default()
        ),
        "APPROVAL_CLAIMED" => r
            .detail
            .get("approval_id")
            .and_then(|v| v.as_str())
            .unwrap_or("?")
            .to_string(),
        _ => String::new(),
    }
}

/// The detail of an `FS_RESTORE` record: what the host restored, path by
/// path.
fn restore_detail(r: &LogRow) -> String {
    let report: Option<capsaga_guest_fs::RestoreReport> =
        serde_json::from_value(r.detail.clone()).ok();
    let mut text = match &report {
        Some(rep) => format!(
            "the host restored {} of {} path(s){}{}",
            rep.paths.iter().filter(|p| p.ok).count(),
            rep.paths.len(),
            if rep.resumed { " (resumed)" } else { "" },
            r.detail
                .get("tool_compensate")
                .and_then(|v| v.as_str())
                .map(|t| format!("; the tool's compensate: {t}"))
                .unwrap_or_default()
        ),
        None => "the host restored files (unreadable report)".into(),
    };
    for line in report.iter().flat_map(restore_lines) {
        text.push_str("\n         ");
        text.push_str(&line);
    }
    text
}

/// What the host did to each path of a step's files (issue 28), one line
/// per path: `restored /ws/a.txt: rewrote its 12 bytes`, `LEFT /ws/b: ...`.
pub(crate) fn restore_lines(r: &capsaga_guest_fs::RestoreReport) -> Vec<String> {
    r.paths
        .iter()
        .map(|p| {
            format!(
                "{} {}: {}",
                if p.ok { "restored" } else { "LEFT" },
                p.path,
                p.action
            )
        })
        .collect()
}

/// A `saga_steps` row as one line.
pub(crate) fn step_line(s: &StepRow) -> String {
    format!(
        "  step {:<3} {:<12} {:<20} {}",
        s.step_seq,
        s.tool_id,
        s.status.as_str(),
        clip(&s.args.to_string(), 100)
    )
}

/// A step's label (information flow) as one line: its integrity, and the
/// fields labelled otherwise (`untrusted; trusted fields /events/*/id`).
pub(crate) fn label_text(l: &serde_json::Value) -> String {
    let mut out = l
        .get("integrity")
        .and_then(|i| i.as_str())
        .unwrap_or("?")
        .to_string();
    for kind in ["trusted", "untrusted"] {
        let paths: Vec<&str> = l
            .pointer(&format!("/fields/{kind}"))
            .and_then(|x| x.as_array())
            .into_iter()
            .flatten()
            .filter_map(|p| p.as_str())
            .collect();
        if !paths.is_empty() {
            out.push_str(&format!("; {kind} fields {}", paths.join(", ")));
        }
    }
    out
}

/// One trace step as readable lines (`capsaga agent`, `capsaga trace`).
pub(crate) fn trace_step_line(s: &TraceStep) -> String {
    match s {
        TraceStep::Thought { .. } => thought_line(s),
        TraceStep::Action { .. } => action_line(s),
        TraceStep::SubCall {
            tool_name,
            provider,
            model,
            tier,
            prompt_tokens,
            response_tokens,
            finish_reason,
            problem,
            cost_usd,
            wall_ms,
            ..
        } => {
            let mut out = format!(
                "  subcall  {tool_name} asked {provider}/{model} [{}] {prompt_tokens} in, {response_tokens} out, ${cost_usd:.6}, {wall_ms} ms, {finish_reason}",
                serde_json::to_value(tier)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default()
            );
            if let Some(p) = problem {
                out.push_str(&format!("\n           problem: {}", clip(p, 300)));
            }
            out
        }
        TraceStep::Critic {
            purpose,
            input,
            verdict,
            reason,
        } => format!(
            "  critic   {purpose}: {verdict} ({reason}) [{}]",
            clip(input, 160)
        ),
    }
}

/// A Thought step: the model's answer, its cost and what it asked.
fn thought_line(s: &TraceStep) -> String {
    let TraceStep::Thought {
        provider,
        model,
        prompt_tokens,
        response_tokens,
        finish_reason,
        text,
        tool_calls,
        cost_usd,
        wall_ms,
        tier,
        attempts,
        finish_raw,
        problem,
        repairs,
        tool_choice,
    } = s
    else {
        return String::new();
    };
    let raw = if finish_raw.is_empty() {
        String::new()
    } else {
        format!(" ({finish_raw})")
    };
    let mut out = format!(
        "  thought  {provider}/{model} [{}] {prompt_tokens} in, {response_tokens} out, ${cost_usd:.6}, {wall_ms} ms, {finish_reason}{raw}",
        serde_json::to_value(tier)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    );
    if let Some(c) = tool_choice {
        out.push_str(&format!("\n           tool_choice: {c}"));
    }
    if let Some(p) = problem {
        out.push_str(&format!("\n           problem: {}", clip(p, 300)));
    }
    for r in repairs {
        out.push_str(&format!("\n           read leniently: {}", clip(r, 160)));
    }
    for a in attempts.iter().filter(|a| a.error.is_some()) {
        out.push_str(&format!(
            "\n           failed try: {} ({}): {}",
            a.provider,
            a.model,
            clip(a.error.as_deref().unwrap_or_default(), 160)
        ));
    }
    if !text.is_empty() {
        out.push_str(&format!("\n           {}", clip(text, 200)));
    }
    if !tool_calls.is_empty() {
        out.push_str(&format!("\n           calls: {}", tool_calls.join(", ")));
    }
    out
}

/// An Action step: the call, the door's checks and its result.
fn action_line(s: &TraceStep) -> String {
    let TraceStep::Action {
        tool_name,
        args,
        validation,
        policy_decision,
        step_seq,
        exec_result,
        error,
        wall_ms,
        untrusted,
        flow,
        ..
    } = s
    else {
        return String::new();
    };
    let seq = step_seq
        .map(|q| format!("step {q}"))
        .unwrap_or_else(|| "no step".into());
    let validation = match validation {
        Validation::Ok => "valid",
        Validation::SchemaError => "INVALID ARGS",
        Validation::UnknownTool => "UNKNOWN TOOL",
    };
    let policy = match policy_decision {
        PolicyDecision::Allow => "allow",
        PolicyDecision::Deny => "DENY",
        PolicyDecision::ApproveRequired => "approve_required",
        PolicyDecision::NotEvaluated => "-",
    };
    let mut out = format!(
        "  action   {tool_name} {} ({seq}; {validation}; policy {policy}; {wall_ms} ms{})",
        clip(&args.to_string(), 120),
        if *untrusted {
            "; result wrapped untrusted"
        } else {
            ""
        }
    );
    match (exec_result, error) {
        (_, Some(e)) => {
            out.push_str(&format!(
                "\n           error: {}",
                clip(&error_line(e), 200)
            ));
            // What the model was told to try next.
            if !e.llm_hint.is_empty() {
                out.push_str(&format!(
                    "\n           hint to the model: {}",
                    clip(&e.llm_hint, 300)
                ));
            }
        }
        (Some(r), None) => out.push_str(&format!(
            "\n           result: {}",
            clip(&r.to_string(), 160)
        )),
        (None, None) => {}
    }
    if let Some(f) = flow {
        out.push_str(&flow_lines(f));
    }
    out
}

/// The information-flow lines of an action (issue 47): the door's decision
/// when it was not `allow`, each failing value and where it came from, and
/// the label of the output.
fn flow_lines(f: &serde_json::Value) -> String {
    let mut out = String::new();
    let decision = f.get("decision").and_then(|d| d.as_str()).unwrap_or("?");
    if decision != "allow" {
        out.push_str(&format!(
            "\n           flow: {} by {}: {}",
            decision.to_uppercase(),
            f.get("layer").and_then(|l| l.as_str()).unwrap_or("?"),
            clip(f.get("reason").and_then(|r| r.as_str()).unwrap_or(""), 300)
        ));
    }
    for x in f
        .get("findings")
        .and_then(|x| x.as_array())
        .into_iter()
        .flatten()
    {
        out.push_str(&format!(
            "\n           value {} = {} ({}): {}",
            x.get("argument").and_then(|a| a.as_str()).unwrap_or("?"),
            clip(x.get("value").and_then(|a| a.as_str()).unwrap_or("?"), 80),
            x.get("level").and_then(|a| a.as_str()).unwrap_or("?"),
            clip(
                &x.get("provenance")
                    .map(|p| p.to_string())
                    .unwrap_or_default(),
                200
            )
        ));
    }
    if let Some(l) = f.get("label") {
        out.push_str(&format!("\n           output label: {}", label_text(l)));
    }
    out
}
