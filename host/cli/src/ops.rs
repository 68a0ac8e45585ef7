//! Read-only operator commands: `tools list`, `log`, `sagas`, `trace`,
//! `audit verify`, `fsm --show`.

use super::render::{Out, clip, log_line, step_line, trace_step_line};
use super::{Failure, exit};
use capsaga_agent::trace;
use capsaga_core::fsm::Guardrail;
use capsaga_door::host::Host;
use capsaga_store::audit;
use serde_json::json;

/// `capsaga tools list`.
pub(crate) fn tools_list(host: &Host, out: &Out) -> u8 {
    if out.json {
        let tools: Vec<_> = host
            .registry
            .tools()
            .iter()
            .map(|t| {
                json!({
                    "name": t.meta.name,
                    "version": t.meta.version,
                    "description": t.meta.description,
                    "risk": t.meta.risk,
                    "has_side_effects": t.meta.has_side_effects,
                    "returns_untrusted": t.meta.returns_untrusted,
                    "idempotent": t.meta.idempotent,
                    "supports_dry_run": t.meta.supports_dry_run,
                    "requires": t.meta.capabilities,
                    "hash": t.hash,
                    "callable": t.grants.is_ok(),
                    "grants": t.grant_strings(),
                    "not_callable_because": t.grants.as_ref().err().map(|e| e.to_string()),
                })
            })
            .collect();
        out.json(&json!({"tools_dir": host.config.tools_dir, "tools": tools, "issues": host.registry.open_issues()}));
        return exit::OK;
    }
    outln!("tools in {}", host.config.tools_dir.display());
    for t in &host.registry.tools() {
        let effects = if t.meta.has_side_effects {
            "side effects"
        } else {
            "read-only"
        };
        outln!(
            "  {:<14} {:<8} risk {:<6} {:<12} {}",
            t.meta.name,
            t.meta.version,
            t.meta.risk,
            effects,
            clip(&t.meta.description, 70)
        );
        match &t.grants {
            Ok(g) if g.is_empty() => outln!("  {:<14} grants: (none needed)", ""),
            Ok(_) => outln!("  {:<14} grants: {}", "", t.grant_strings().join(", ")),
            Err(e) => outln!("  {:<14} NOT CALLABLE: {e}", ""),
        }
    }
    let issues = host.registry.open_issues();
    if !issues.is_empty() {
        outln!("load issues:");
        for i in issues {
            outln!("  {}: {}", i.source, i.error);
        }
    }
    exit::OK
}

/// `capsaga log [--saga <id>]`.
pub(crate) async fn log(host: &Host, out: &Out, saga: Option<&str>) -> Result<u8, Failure> {
    let store = &host.store;
    let row = match saga {
        Some(id) => store.saga(id).await?,
        None => store.sagas(1).await?.into_iter().next(),
    };
    let Some(row) = row else {
        return Err(Failure {
            code: exit::NOT_FOUND,
            message: match saga {
                Some(id) => format!("no saga `{}`", clip(id, 80)),
                None => "no saga has run yet".into(),
            },
        });
    };
    let log = store.log(Some(&row.saga_id)).await?;
    let steps = store.steps(&row.saga_id).await?;
    if out.json {
        out.json(&json!({"saga": row, "steps": steps, "log": log}));
        return Ok(exit::OK);
    }
    outln!(
        "saga {}  origin {}  state {}  {}",
        row.saga_id,
        row.origin,
        row.state,
        row.label
    );
    outln!("steps:");
    for s in &steps {
        outln!("{}", step_line(s));
    }
    outln!("write-ahead log:");
    for r in &log {
        outln!("{}", log_line(r));
    }
    Ok(exit::OK)
}

/// `capsaga sagas`.
pub(crate) async fn sagas(host: &Host, out: &Out, limit: usize) -> Result<u8, Failure> {
    let rows = host.store.sagas(limit).await?;
    if out.json {
        out.json(&rows);
    } else {
        for r in &rows {
            outln!(
                "{}  {:<22} {:<6} {}  {}",
                r.saga_id,
                r.state.as_str(),
                r.origin,
                r.created_at,
                clip(&r.label, 60)
            );
        }
    }
    Ok(exit::OK)
}

/// `capsaga trace <id>`.
pub(crate) async fn trace(host: &Host, out: &Out, id: &str) -> Result<u8, Failure> {
    let Some(t) = trace::load(&*host.store, id).await? else {
        return Err(Failure {
            code: exit::NOT_FOUND,
            message: format!("no trace `{}`", clip(id, 80)),
        });
    };
    if out.json {
        out.json(&t);
        return Ok(exit::OK);
    }
    outln!(
        "trace {}  outcome {}  {} ms",
        t.trace_id,
        t.outcome.as_str(),
        t.wall_time_ms
    );
    outln!("task: {}", t.user_message);
    outln!(
        "saga: {} ({})",
        t.saga_id.as_deref().unwrap_or("-"),
        t.saga_state.map(|s| s.to_string()).unwrap_or_default()
    );
    outln!(
        "model: {}  autonomy: {}",
        if t.provider_mode.is_empty() {
            "-"
        } else {
            &t.provider_mode
        },
        t.autonomy.map(|a| a.as_str()).unwrap_or("-")
    );
    outln!(
        "tokens: {} in, {} out  cost: ${:.6}  started {}  finished {}",
        t.prompt_tokens,
        t.response_tokens,
        t.cost_usd,
        t.started_at,
        t.finished_at.as_deref().unwrap_or("-")
    );
    outln!("steps:");
    for s in &t.steps {
        outln!("{}", trace_step_line(s));
    }
    if let Some(f) = &t.final_response {
        outln!("answer: {f}");
    }
    Ok(exit::OK)
}

/// `capsaga budget`: the caps, the spend per day, and the gap between
/// what providers reported and what the host estimated (per day, provider
/// and model asked: what was reserved, charged and charged beyond the
/// reservations, the largest ratios per side), with the ratios that scale
/// the next reservations (`capsaga_core::budget::learn`).
pub(crate) async fn budget(host: &Host, out: &Out, days: usize) -> Result<u8, Failure> {
    use capsaga_core::budget::learn::LEARN_DAYS;
    let rows = host.store.budget_days(days).await?;
    let caps = host.config.policy.budget.caps();
    let shown_days = u64::try_from(days.max(1)).unwrap_or(u64::MAX);
    let gaps = host
        .store
        .budget_gaps(&capsaga_store::clock::days_ago(
            shown_days.max(LEARN_DAYS) - 1,
        ))
        .await?;
    // The ratios in use: the largest of the learning window, per provider
    // and model.
    let window = capsaga_store::clock::days_ago(LEARN_DAYS - 1);
    let mut learnt: std::collections::BTreeMap<(String, String), (f64, f64)> =
        std::collections::BTreeMap::new();
    for g in gaps.iter().filter(|g| g.day >= window) {
        let e = learnt
            .entry((g.provider.clone(), g.model.clone()))
            .or_insert((0.0, 0.0));
        e.0 = e.0.max(g.input_ratio);
        e.1 = e.1.max(g.output_ratio);
    }
    let shown = capsaga_store::clock::days_ago(shown_days - 1);
    let gaps: Vec<_> = gaps.into_iter().filter(|g| g.day >= shown).collect();
    if out.json {
        let learnt: Vec<_> = learnt
            .iter()
            .map(|((p, m), (i, o))| {
                json!({"provider": p, "model": m, "input_ratio": i, "output_ratio": o,
                    "window_days": LEARN_DAYS})
            })
            .collect();
        out.json(&json!({"caps": caps, "days": rows, "gaps": gaps, "learnt": learnt}));
        return Ok(exit::OK);
    }
    let cap = |c: Option<f64>| {
        c.map(|v| format!("${v:.4}"))
            .unwrap_or_else(|| "none".into())
    };
    outln!(
        "caps: request soft {} hard {}; day (UTC) soft {} hard {}",
        cap(caps.request_soft_usd),
        cap(caps.request_hard_usd),
        cap(caps.day_soft_usd),
        cap(caps.day_hard_usd)
    );
    if rows.is_empty() {
        outln!("no model call recorded yet");
    }
    for r in &rows {
        let held = if r.reserved_usd > 0.0 {
            format!("  (${:.6} reserved by calls in flight)", r.reserved_usd)
        } else {
            String::new()
        };
        outln!(
            "  {}  ${:.6}  {} call(s)  {} in, {} out{held}",
            r.day,
            r.spent_usd,
            r.calls,
            r.input_tokens,
            r.output_tokens
        );
        for g in gaps.iter().filter(|g| g.day == r.day) {
            outln!(
                "      {}/{}: {} call(s) reserved ${:.6}, charged ${:.6}, ${:.6} beyond the reservations; charged/estimated up to x{:.2} in, x{:.2} out",
                g.provider,
                g.model,
                g.calls,
                g.reserved_usd,
                g.charged_usd,
                g.over_usd,
                g.input_ratio,
                g.output_ratio
            );
        }
    }
    let over: Vec<_> = learnt
        .iter()
        .filter(|(_, (i, o))| *i > 1.0 || *o > 1.0)
        .collect();
    if !over.is_empty() {
        outln!(
            "reservations scaled by what providers reported beyond the estimates (largest of the last {LEARN_DAYS} days):"
        );
        for ((p, m), (i, o)) in over {
            outln!(
                "  {p}/{m}: input x{:.2}, output x{:.2}",
                i.max(1.0),
                o.max(1.0)
            );
        }
    }
    Ok(exit::OK)
}

/// `capsaga audit verify [--expect-head <seq>:<hash>]`.
pub(crate) async fn audit_verify(
    host: &Host,
    out: &Out,
    expect_head: Option<&str>,
) -> Result<u8, Failure> {
    let witnessed = match expect_head {
        None => None,
        Some(text) => {
            let parsed = text.split_once(':').and_then(|(seq, hash)| {
                let ok = hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit());
                Some((seq.parse::<i64>().ok()?, hash.to_ascii_lowercase())).filter(|_| ok)
            });
            Some(parsed.ok_or_else(|| Failure {
                code: exit::USAGE,
                message: format!(
                    "--expect-head `{}` is not <seq>:<64 hex digits>",
                    clip(text, 100)
                ),
            })?)
        }
    };
    let report = audit::verify(&*host.store, witnessed.as_ref()).await?;
    if out.json {
        out.json(&json!({
            "ok": report.ok(),
            "rows": report.rows,
            "chains": report.chains,
            "head": report.head.as_ref().map(|(s, h)| format!("{s}:{h}")),
            "first_bad_row": report.first_bad_row(),
            "findings": report.findings,
        }));
    } else if report.ok() && report.chains > 1 {
        outln!(
            "write-ahead log intact: {} rows in {} hash chains, every chain verified, heads anchored, anchors between chains hold, tables match a replay of the log",
            report.rows,
            report.chains
        );
        if let Some((s, h)) = &report.head {
            outln!("newest head: {s}:{h}  (keep it elsewhere; check later with --expect-head)");
        }
    } else if report.ok() {
        outln!(
            "write-ahead log intact: {} rows, hash chain verified, head anchored, tables match a replay of the log",
            report.rows
        );
        if let Some((s, h)) = &report.head {
            outln!("head: {s}:{h}  (keep it elsewhere; check later with --expect-head)");
        }
    } else {
        match report.first_bad_row() {
            Some(seq) => outln!("write-ahead log BROKEN: first bad row {seq}"),
            None => outln!("write-ahead log BROKEN"),
        }
        for f in &report.findings {
            let at = f.seq.map(|s| format!("row {s}: ")).unwrap_or_default();
            outln!("  [{}] {at}{}", f.check, f.reason);
        }
    }
    Ok(if report.ok() {
        exit::OK
    } else {
        exit::NOT_SUCCESS
    })
}

/// `capsaga sagas --needs-operator`: FailedRollbackPartial sagas with their
/// failed compensations and why.
pub(crate) async fn needs_operator(host: &Host, out: &Out) -> Result<u8, Failure> {
    let rows = host.store.needs_operator().await?;
    if out.json {
        out.json(&json!({"needs_operator": rows}));
        return Ok(exit::OK);
    }
    if rows.is_empty() {
        outln!("no saga needs the operator");
        return Ok(exit::OK);
    }
    for n in &rows {
        outln!(
            "{}  {}  {} {}  {}",
            n.saga.saga_id,
            n.saga.state,
            n.saga.origin,
            n.saga.updated_at,
            clip(&n.saga.label, 60)
        );
        for f in &n.failed {
            let err = f.error.as_ref().and_then(|e| {
                serde_json::from_value::<capsaga_core::error::ToolError>(e.clone()).ok()
            });
            outln!(
                "    step {} {} args {}",
                f.step_seq,
                f.tool_id,
                clip(&f.args.to_string(), 120)
            );
            match err {
                Some(e) => {
                    outln!(
                        "      compensation failed: {}: {}",
                        super::render::kind_name(e.kind),
                        clip(&e.message, 300)
                    );
                    if !e.llm_hint.is_empty() {
                        outln!("      hint: {}", clip(&e.llm_hint, 200));
                    }
                }
                None => outln!("      compensation failed (no error recorded)"),
            }
        }
        outln!(
            "    repair what the error names, then `capsaga rollback --saga {}` retries",
            n.saga.saga_id
        );
    }
    Ok(exit::OK)
}

/// `capsaga fsm --show`: the table (normative rows, capsaga's rows, the
/// operator's `fsm.toml` rows when `guardrail` has them, the operator-only
/// row) and a Mermaid diagram.
pub(crate) fn fsm(out: &Out, guardrail: &Guardrail, source: Option<&std::path::Path>) -> u8 {
    let rows = guardrail.rows();
    if out.json {
        out.json(&json!({
            "fsm_toml": source.map(|p| p.display().to_string()),
            "transitions": rows,
            "mermaid": guardrail.mermaid(),
        }));
        return exit::OK;
    }
    if let Some(p) = source {
        outln!("extra rows loaded from {}", p.display());
    }
    outln!(
        "{:<22} {:<28} {:<22} {:<9} guard",
        "from",
        "event",
        "to",
        "source"
    );
    for r in &rows {
        outln!(
            "{:<22} {:<28} {:<22} {:<9} {}",
            r.from.as_str(),
            r.event,
            r.to.as_str(),
            r.source,
            r.guard
        );
    }
    outln!("\n```mermaid\n{}```", guardrail.mermaid());
    exit::OK
}
