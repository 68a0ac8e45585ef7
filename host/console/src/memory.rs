//! The memory page: fact proposals of the memory's reflection, each with
//! the episodes it was distilled from, and the operator's decision on
//! them (approve the checked ones, approve every one shown, discard the
//! checked ones).
//!
//! A proposal's text is model output distilled from turns any principal
//! may have written: until the operator approves it, it is untrusted data,
//! shown escaped in a `<pre class="untrusted">` block labelled so, like the
//! episodes' messages and answers. "Approve all" approves exactly the
//! proposals this page showed (their ids travel in the form), never one
//! that arrived since.

use crate::backend::ProposalView;
use crate::pages::{layout, untrusted};
use maud::{Markup, html};

/// The memory page: `rows` (`None` when the server runs without memory),
/// `all` when decided proposals are listed too.
pub fn page(
    operator: &str,
    csrf: &str,
    rows: Option<&[ProposalView]>,
    all: bool,
    flash: Option<&str>,
) -> Markup {
    let body = html! {
        h1 { "Memory proposals" }
        @match rows {
            None => p .empty #memory-off { "Memory is off on this server (" code { "[memory] enabled = false" } ")." },
            Some(rows) => {
                p {
                    "Facts the reflection proposes from past turns. A proposal enters semantic memory (every later turn may retrieve it) only when approved here, by "
                    code { "capsaga memory approve" } " or " code { "POST /v1/memory/proposals/{id}/approve" } ". "
                    @if all { a href="/console/memory" { "Pending only" } } @else { a href="/console/memory?all=true" #memory-all { "Every proposal" } }
                }
                @let pending: Vec<&ProposalView> = rows.iter().filter(|p| p.status == "pending").collect();
                p #proposals-pending data-pending=(pending.len()) { (pending.len()) " pending" }
                @if rows.is_empty() { p .empty { "No proposal." } }
                form method="post" action="/console/memory/decide" #memory-decide {
                    input type="hidden" name="csrf" value=(csrf);
                    @for p in rows {
                        section .proposal data-proposal=(p.id) data-status=(p.status) {
                            h2 {
                                @if p.status == "pending" {
                                    input type="hidden" name="shown" value=(p.id);
                                    label { input type="checkbox" name="id" value=(p.id); " select " }
                                }
                                code { (p.id) } " · " strong .status { (p.status) }
                            }
                            p .meta {
                                "namespace " code { (p.namespace) } " · from " (p.origin) " · proposed " (p.created_at)
                                @if let Some(d) = &p.decided_by { " · decided by " (d) }
                            }
                            (untrusted("Proposed fact (untrusted until approved)", &p.text))
                            details .episodes open[p.status == "pending"] {
                                summary { "Source episodes (" (p.episodes.len() + p.missing_episodes.len()) ")" }
                                @for e in &p.episodes {
                                    div .episode data-episode=(e.id) {
                                        p .meta { code { (e.id) } " · " (e.started_at) " · by " (e.sender) " · " (e.outcome) }
                                        (untrusted("User message", &e.user_message))
                                        @if let Some(r) = &e.final_response { (untrusted("Answer", r)) }
                                    }
                                }
                                @for m in &p.missing_episodes {
                                    p .meta { code { (m) } " · no longer stored (forgotten)" }
                                }
                            }
                        }
                    }
                    @if !pending.is_empty() {
                        div .actions {
                            button type="submit" name="verb" value="approve" .approve #approve-selected { "Approve selected" }
                            button type="submit" name="verb" value="approve-all" .approve #approve-all { "Approve all shown (" (pending.len()) ")" }
                            button type="submit" name="verb" value="discard" .deny #discard-selected { "Discard selected" }
                        }
                    }
                }
            }
        }
    };
    layout("Memory", Some((operator, csrf)), flash, body)
}

/// What a memory decision form asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryDecision {
    /// The session's CSRF token as posted.
    pub csrf: String,
    /// Approve (`true`) or discard.
    pub approve: bool,
    /// The proposals decided (deduplicated, in form order).
    pub ids: Vec<String>,
}

/// Most proposals one form may decide.
pub const MAX_IDS: usize = 500;

/// Read a memory decision form from its `(name, value)` pairs: `verb`
/// `approve` (the checked `id`s), `approve-all` (every `shown` id) or
/// `discard` (the checked `id`s). Ids must look like proposal ids
/// (`p-` then letters, digits, `-`).
///
/// # Errors
/// Why the form cannot be carried out, in words for the operator.
pub fn parse_decision(pairs: &[(String, String)]) -> Result<MemoryDecision, String> {
    let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let csrf = get("csrf").unwrap_or("").to_string();
    let (approve, key) = match get("verb") {
        Some("approve") => (true, "id"),
        Some("approve-all") => (true, "shown"),
        Some("discard") => (false, "id"),
        _ => return Err("verb: approve, approve-all or discard".into()),
    };
    let mut ids: Vec<String> = Vec::new();
    for (_, v) in pairs.iter().filter(|(n, _)| n == key) {
        let ok = v.len() <= 80
            && v.starts_with("p-")
            && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
        if !ok {
            return Err("not a proposal id".into());
        }
        if !ids.contains(v) {
            ids.push(v.clone());
        }
    }
    if ids.is_empty() {
        return Err("no proposal selected".into());
    }
    if ids.len() > MAX_IDS {
        return Err(format!("at most {MAX_IDS} proposals at once"));
    }
    Ok(MemoryDecision { csrf, approve, ids })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::EpisodeView;

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn proposals_and_episodes_render_as_marked_data() {
        let payload = r#"<script>window.__pwned=1</script><img src=x onerror=alert(1)>"' &"#;
        let p = ProposalView {
            id: "p-1".into(),
            namespace: payload.into(),
            text: payload.into(),
            origin: payload.into(),
            created_at: payload.into(),
            status: "pending".into(),
            decided_by: Some(payload.into()),
            episodes: vec![EpisodeView {
                id: payload.into(),
                started_at: payload.into(),
                sender: payload.into(),
                user_message: payload.into(),
                final_response: Some(payload.into()),
                outcome: payload.into(),
            }],
            missing_episodes: vec![payload.into()],
        };
        let html = page("op", "tok", Some(&[p]), false, Some(payload)).into_string();
        assert!(!html.contains("<script>window"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(html.contains("Proposed fact (untrusted until approved) (data, not rendered)"));
        assert_eq!(html.matches("<script").count(), 1, "only the static file");
        assert!(html.contains(r#"name="csrf" value="tok""#));
        assert!(html.contains(r#"name="shown" value="p-1""#));
        assert!(html.contains(r#"type="checkbox" name="id" value="p-1""#));
        let off = page("op", "tok", None, false, None).into_string();
        assert!(off.contains("memory-off") && !off.contains("memory-decide"));
    }

    #[test]
    fn a_decision_form_is_read_strictly() {
        let d = parse_decision(&pairs(&[
            ("csrf", "t"),
            ("shown", "p-a"),
            ("shown", "p-b"),
            ("id", "p-b"),
            ("id", "p-b"),
            ("verb", "approve"),
        ]))
        .unwrap();
        assert_eq!(
            (d.approve, d.ids.as_slice()),
            (true, &["p-b".to_string()][..])
        );
        let all = parse_decision(&pairs(&[
            ("shown", "p-a"),
            ("shown", "p-b"),
            ("verb", "approve-all"),
        ]))
        .unwrap();
        assert_eq!(all.ids, ["p-a", "p-b"]);
        let d = parse_decision(&pairs(&[("id", "p-a"), ("verb", "discard")])).unwrap();
        assert!(!d.approve);
        for bad in [
            pairs(&[("id", "p-a"), ("verb", "forget")]),
            pairs(&[("verb", "approve")]),
            pairs(&[("id", "e-1"), ("verb", "approve")]),
            pairs(&[("id", "p-<x>"), ("verb", "discard")]),
        ] {
            assert!(parse_decision(&bad).is_err(), "{bad:?}");
        }
    }
}
