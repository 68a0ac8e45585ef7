//! The pages, rendered by maud: every `(value)` interpolation is
//! HTML-escaped (`&`, `<`, `>`, `"`, `'`), and nothing here uses
//! `PreEscaped` on data. Untrusted text (tool arguments, file content,
//! model answers, log payloads) sits in `<pre class="untrusted">` blocks
//! marked as data. No inline script or style: the page loads
//! `/console/static/console.js` and `console.css` (the CSP allows nothing
//! else).

use crate::backend::{
    ApprovalView, HealthView, NeuronView, Paged, SagaDetail, SagaFilter, SagaView, StepLabelView,
    TraceView,
};
use maud::{DOCTYPE, Markup, html};

/// Rows per page of every list.
pub const PAGE_SIZE: u64 = 50;

/// The frame of every page: `title`, the signed-in operator (if any), the
/// body, and a flash message.
pub fn layout(
    title: &str,
    operator: Option<(&str, &str)>,
    flash: Option<&str>,
    body: Markup,
) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · capsaga console" }
                link rel="stylesheet" href="/console/static/console.css";
                script src="/console/static/console.js" defer {}
            }
            body {
                header {
                    strong { "capsaga console" }
                    @if let Some((op, csrf)) = operator {
                        nav {
                            a href="/console/approvals" { "Approvals" }
                            " "
                            span #pending-badge .badge hidden {}
                            a href="/console/sagas" { "Sagas" }
                            a href="/console/neurons" { "Neurons" }
                            a href="/console/memory" { "Memory" }
                            a href="/console/health" { "Budget & health" }
                        }
                        span .who { "signed in as " code #operator { (op) } }
                        form method="post" action="/console/logout" .logout {
                            input type="hidden" name="csrf" value=(csrf);
                            button type="submit" { "Sign out" }
                        }
                    }
                }
                main {
                    @if let Some(f) = flash {
                        p .flash #flash { (f) }
                    }
                    (body)
                }
            }
        }
    }
}

/// The sign-in form.
pub fn sign_in(error: Option<&str>) -> Markup {
    layout(
        "Sign in",
        None,
        error,
        html! {
            h1 { "Sign in" }
            p { "Paste an operator token (" code { "capsaga tokens create NAME --role operator" } "). Client tokens cannot open the console." }
            form method="post" action="/console/login" #login {
                label for="token" { "Token" }
                input type="password" name="token" #token autocomplete="off" autofocus;
                button type="submit" #sign-in { "Sign in" }
            }
        },
    )
}

/// A block of untrusted text: escaped, in a `<pre class="untrusted">`,
/// labelled as data.
pub(crate) fn untrusted(label: &str, text: &str) -> Markup {
    html! {
        div .data {
            span .data-label { (label) " (data, not rendered)" }
            pre .untrusted { (text) }
        }
    }
}

/// Like [`untrusted`] for a neuron's Python source: highlighted by
/// [`crate::highlight::python`] (escaped spans only), or plain text when it
/// cannot be.
fn untrusted_python(label: &str, source: &str) -> Markup {
    let highlighted = crate::highlight::python(source);
    html! {
        div .data {
            span .data-label { (label) " (data, not rendered)" }
            @match highlighted {
                Some(h) => pre .untrusted .code { (maud::PreEscaped(h)) },
                None => pre .untrusted { (source) },
            }
        }
    }
}

fn age(s: u64) -> String {
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min", s / 60),
        3600..86400 => format!("{} h", s / 3600),
        _ => format!("{} d", s / 86400),
    }
}

fn pager(base: &str, offset: u64, shown: usize, more: bool) -> Markup {
    let prev = offset.saturating_sub(PAGE_SIZE);
    let next = offset + shown as u64;
    let sep = if base.contains('?') { '&' } else { '?' };
    html! {
        nav .pager {
            @if offset > 0 { a #prev href={(base) (sep) "offset=" (prev)} { "← newer" } }
            @if more { a #next href={(base) (sep) "offset=" (next)} { "older →" } }
        }
    }
}

/// The approvals queue.
pub fn approvals(
    operator: &str,
    csrf: &str,
    page: &Paged<ApprovalView>,
    offset: u64,
    flash: Option<&str>,
) -> Markup {
    let body = html! {
        h1 { "Approvals" }
        p #pending data-pending=(page.total) { (page.total) " pending · " a #decided-link href="/console/approvals/decided" { "decided, stale and expired ones" } }
        @if page.rows.is_empty() {
            p .empty { "Nothing waits for a decision." }
        }
        @for a in &page.rows {
            section .approval data-approval=(a.id) {
                h2 { code { (a.tool) } " · step " (a.step_seq) " of saga " a href={"/console/sagas/" (a.saga_id)} { code { (short(&a.saga_id)) } } }
                p .meta {
                    "requested " (age(a.age_s)) " ago (" (a.created_at) ")"
                    @if let Some(e) = &a.expires_at { " · expires " (e) }
                    " · tool hash " code { (short(&a.tool_hash)) }
                }
                @match &a.risk {
                    Some(r) => p .risk data-risk=(r) { "Risk: " strong { (r) } " (declared by the tool)" },
                    None => p .risk data-risk="unknown" { "Risk: unknown (the component with this hash is no longer loaded)" },
                }
                p .reason { "Why: " (a.reason) }
                @if let Some(r) = &a.replaces {
                    p .stale { "Replaces approval " code { (short(r)) } ": the call's dry-run changed since it was asked, so the earlier one can no longer be approved." }
                }
                (untrusted("Dry-run summary", &a.summary))
                @if let Some(d) = &a.diff { (untrusted("Diff", d)) }
                @if let Some((title, text)) = &a.essentials { (untrusted(title, text)) }
                @if !a.flow.is_empty() { (flow_findings(a)) }
                (untrusted("Arguments", &a.args))
                @if let Some(p) = &a.preview { (untrusted("Dry-run output", p)) }
                form method="post" action={"/console/approvals/" (a.id) "/decide"} .decide {
                    input type="hidden" name="csrf" value=(csrf);
                    label { "Note " input type="text" name="note" maxlength="1000"; }
                    button type="submit" name="verb" value="approve" .approve { "Approve" }
                    button type="submit" name="verb" value="deny" .deny { "Deny" }
                }
            }
        }
        (pager("/console/approvals", offset, page.rows.len(), page.more))
    };
    layout("Approvals", Some((operator, csrf)), flash, body)
}

/// Approvals no longer pending, the newest first: who decided, when, the
/// note, and for a stale or expired one why it can no longer be approved.
pub fn decided_approvals(
    operator: &str,
    csrf: &str,
    page: &Paged<ApprovalView>,
    offset: u64,
) -> Markup {
    let body = html! {
        h1 { "Decided approvals" }
        p { (page.total) " no longer pending · " a href="/console/approvals" { "the pending queue" } }
        @if page.rows.is_empty() {
            p .empty { "No approval has been decided yet." }
        }
        @if !page.rows.is_empty() {
            table #decided {
                thead { tr { th { "Requested" } th { "Tool" } th { "Saga" } th { "Status" } th { "By" } th { "At" } th { "Note / why" } } }
                tbody {
                    @for a in &page.rows {
                        tr data-approval=(a.id) data-status=(a.status) {
                            td { (a.created_at) }
                            td { code { (a.tool) } " · step " (a.step_seq) }
                            td { a href={"/console/sagas/" (a.saga_id)} { code { (short(&a.saga_id)) } } }
                            td .status { (a.status) }
                            td { (a.decided_by.as_deref().unwrap_or("-")) }
                            td { (a.decided_at.as_deref().unwrap_or("-")) }
                            td {
                                @match a.status.as_str() {
                                    "stale" => { "the call's dry-run changed after it was asked: replaced by a new approval" }
                                    "expired" => { "not decided within its time to live" }
                                    _ => { @if let Some(n) = &a.note { span .untrusted { (n) } } }
                                }
                            }
                        }
                    }
                }
            }
        }
        (pager("/console/approvals/decided", offset, page.rows.len(), page.more))
    };
    layout("Decided approvals", Some((operator, csrf)), None, body)
}

/// The arguments information flow holds for a human: argument, value (as
/// data), the sink's level and the source step, linked to the saga's
/// timeline.
fn flow_findings(a: &ApprovalView) -> Markup {
    html! {
        table .flow {
            caption { "Information flow: values that came from untrusted data" }
            thead { tr { th { "argument" } th { "value" } th { "must be" } th { "came from" } } }
            tbody {
                @for f in &a.flow {
                    tr .finding data-argument=(f.argument) {
                        td { code { (f.argument) } }
                        td { span .untrusted { (f.value) } }
                        td { (f.level) }
                        td .source {
                            span .untrusted { (f.source) }
                            @for st in &f.steps {
                                " " a .source-step href={"/console/sagas/" (a.saga_id) "#step-" (st)} { "step " (st) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A step's label: its integrity, source and the fields labelled apart.
fn step_label(l: &StepLabelView) -> Markup {
    html! {
        p .label data-integrity=(l.integrity) {
            "Output label: " strong { (l.integrity) } " · from " span .untrusted-inline { (l.source) }
            @if !l.trusted_fields.is_empty() { " · trusted fields " code { (l.trusted_fields.join(", ")) } }
            @if !l.untrusted_fields.is_empty() { " · untrusted fields " code { (l.untrusted_fields.join(", ")) } }
        }
    }
}

fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

/// The sagas list with its filters.
pub fn sagas(
    operator: &str,
    csrf: &str,
    filter: &SagaFilter,
    page: &Paged<SagaView>,
    offset: u64,
    query: &str,
) -> Markup {
    let v = |o: &Option<String>| o.clone().unwrap_or_default();
    let body = html! {
        h1 { "Sagas" }
        form method="get" action="/console/sagas" .filters {
            label { "State " input name="state" value=(v(&filter.state)) placeholder="Done"; }
            label { "Tool " input name="tool" value=(v(&filter.tool)) placeholder="fs_write"; }
            label { "Principal " input name="principal" value=(v(&filter.principal)) placeholder="token:alice"; }
            label { "Since " input name="since" value=(v(&filter.since)) placeholder="2026-01-01T00:00:00Z"; }
            button type="submit" { "Filter" }
        }
        table #sagas {
            thead { tr { th { "saga" } th { "state" } th { "origin" } th { "principal" } th { "started" } th { "task / plan" } } }
            tbody {
                @for s in &page.rows {
                    tr {
                        td { a href={"/console/sagas/" (s.id)} { code { (short(&s.id)) } } }
                        td .state { (s.state) }
                        td { (s.origin) }
                        td { (s.principal.as_deref().unwrap_or("-")) }
                        td { (s.created_at) }
                        td .untrusted-inline { (s.label) }
                    }
                }
            }
        }
        (pager(&format!("/console/sagas{query}"), offset, page.rows.len(), page.more))
    };
    layout("Sagas", Some((operator, csrf)), None, body)
}

/// One saga's timeline and its actions.
pub fn saga(operator: &str, csrf: &str, d: &SagaDetail, flash: Option<&str>) -> Markup {
    let s = &d.saga;
    let body = html! {
        h1 { "Saga " code #saga-id { (s.id) } }
        p { "State " strong #saga-state { (s.state) } " · " (s.origin) " · by " (s.principal.as_deref().unwrap_or("-")) " · audit chain: see " a href="/console/health" { "Budget & health" } }
        @if let Some(t) = &d.trace_id { p { a #trace-link href={"/console/traces/" (t)} { "the turn's trace" } } }
        (untrusted("Task / plan", &s.label))
        form method="post" action={"/console/sagas/" (s.id) "/action"} .actions {
            input type="hidden" name="csrf" value=(csrf);
            button type="submit" name="action" value="resume" { "Resume" }
            button type="submit" name="action" value="rollback" { "Roll back" }
            button type="submit" name="action" value="undo" { "Undo (Done saga)" }
        }
        h2 { "Steps" }
        ol .steps {
            @for st in &d.steps {
                li .step id={"step-" (st.seq)} data-status=(st.status) data-integrity=[st.label.as_ref().map(|l| l.integrity.as_str())] {
                    code { (st.tool) } " · " strong { (st.status) }
                    @if let Some(ms) = st.duration_ms { " · " (ms) " ms" }
                    " · hash " code { (short(&st.tool_hash)) }
                    " · grants " code { (st.grants.join(", ")) }
                    (untrusted("Arguments", &st.args))
                    @if let Some(l) = &st.label { (step_label(l)) }
                    @if let Some(r) = &st.result { (untrusted("Result", r)) }
                }
            }
        }
        h2 { "Write-ahead log" }
        table .log {
            thead { tr { th { "seq" } th { "record" } th { "step" } th { "at" } th { "payload" } } }
            tbody {
                @for l in &d.log {
                    tr { td { (l.seq) } td { (l.kind) } td { (l.step_seq.map(|x| x.to_string()).unwrap_or_default()) } td { (l.at) } td { pre .untrusted { (l.detail) } } }
                }
            }
        }
    };
    layout("Saga", Some((operator, csrf)), flash, body)
}

/// An agent turn's trace.
pub fn trace(operator: &str, csrf: &str, t: &TraceView) -> Markup {
    let body = html! {
        h1 { "Trace " code { (t.id) } }
        p { "Outcome " strong { (t.outcome) } " · " (t.prompt_tokens) " prompt + " (t.response_tokens) " answer tokens · " (format!("{:.4}", t.cost_usd)) " USD" }
        @if let Some(s) = &t.saga_id { p { a href={"/console/sagas/" (s)} { "its saga" } } }
        (untrusted("Task", &t.task))
        @if let Some(f) = &t.final_response {
            div #final-answer data-after-untrusted=(t.after_untrusted) {
                @if t.after_untrusted {
                    p .after-untrusted { "Written after untrusted data entered the turn: it may repeat what that data said." }
                    (untrusted("Model answer (after untrusted data)", f))
                } @else {
                    (untrusted("Model answer", f))
                }
            }
        }
        ol .trace {
            @for st in &t.steps { li { strong { (st.kind) } (untrusted("Content", &st.content)) } }
        }
    };
    layout("Trace", Some((operator, csrf)), None, body)
}

/// Neuron versions, with the operator's decisions.
pub fn neurons(operator: &str, csrf: &str, rows: &[NeuronView], flash: Option<&str>) -> Markup {
    let body = html! {
        h1 { "Neurons" }
        @if rows.is_empty() { p .empty { "No neuron was proposed." } }
        @for n in rows {
            section .neuron data-neuron={(n.name) "@" (n.version)} {
                h2 { code { (n.name) } " v" (n.version) " · " strong .status { (n.status) } }
                p .meta { "proposed " (n.created_at)
                    @if let Some(d) = &n.decided_by { " · decided by " (d) } }
                (untrusted("Description", &n.description))
                p { "Requests " code { (n.requested.join(", ")) }
                    @if !n.granted.is_empty() { " · granted " code { (n.granted.join(", ")) } }
                    @if !n.withheld.is_empty() { " · " span .withheld { "withheld " code { (n.withheld.join(", ")) } } } }
                (untrusted_python("Source", &n.source))
                (untrusted("Examples", &n.examples))
                @if let Some(r) = &n.report { (untrusted("Test report", r)) }
                details .fitness-charts open[!n.fitness.is_empty()] {
                    summary { "Fitness over time" }
                    (crate::charts::fitness(n))
                }
                @if n.status == "awaiting_operator" {
                    form method="post" action={"/console/neurons/" (n.name) "/" (n.version)} .neuron-decide {
                        input type="hidden" name="csrf" value=(csrf);
                        label { "Grants, one per line (the request: delete a line to withhold it; replace a * by a directory or host) "
                            textarea name="grants" rows="3" cols="60" { (n.requested.join("\n")) } }
                        label { "Note " input type="text" name="note" maxlength="1000"; }
                        button type="submit" name="action" value="approve" .approve { "Approve" }
                        button type="submit" name="action" value="reject" .deny { "Reject" }
                    }
                }
                @if n.status == "active" {
                    form method="post" action={"/console/neurons/" (n.name) "/" (n.version)} .neuron-decide {
                        input type="hidden" name="csrf" value=(csrf);
                        input type="hidden" name="grants" value="";
                        input type="hidden" name="note" value="";
                        button type="submit" name="action" value="retire" .deny { "Retire" }
                    }
                }
            }
        }
    };
    layout("Neurons", Some((operator, csrf)), flash, body)
}

/// Budget and health.
pub fn health(operator: &str, csrf: &str, h: &HealthView) -> Markup {
    let cap = h.hard_cap_usd.or(h.soft_cap_usd).filter(|c| *c > 0.0);
    let pct = cap.map(|c| ((h.spent_today_usd / c) * 100.0).clamp(0.0, 100.0));
    let body = html! {
        h1 { "Budget & health" }
        p { "Spent on " (h.day) " (UTC): " strong { (format!("{:.4}", h.spent_today_usd)) " USD" }
            @if let Some(s) = h.soft_cap_usd { " · soft cap " (format!("{s:.2}")) }
            @if let Some(c) = h.hard_cap_usd { " · hard cap " (format!("{c:.2}")) } }
        @if let Some(p) = pct {
            meter min="0" max="100" value=(format!("{p:.1}")) { (format!("{p:.1}")) " %" }
        }
        (crate::charts::spend(h))
        form method="get" action="/console/health" .filters {
            label { "Days " input name="days" type="number" min="1" max=(crate::charts::MAX_CHART_DAYS) value=(h.history.len().max(1)); }
            button type="submit" { "Show" }
        }
        p { "Kill switch: " strong { (h.switch) } }
        p { "Audit chain: " strong #audit { (h.audit) } }
        h2 { "Model providers" }
        p { "Mode: " strong #mode { (h.mode) } }
        table #providers {
            thead { tr { th { "Provider" } th { "" } } }
            tbody {
                @for p in &h.providers {
                    tr data-provider=(p) { td { code { (p) } } td { @if h.default_provider.as_deref() == Some(p.as_str()) { "default" } } }
                }
            }
        }
        h2 { "Hosts" }
        p { "Store: " strong #store { (h.store) } " · this host's policy " code { (short(&h.policy_sha256)) } }
        table #hosts {
            thead { tr { th { "Host" } th { "Policy (SHA-256)" } th { "Started" } th { "" } } }
            tbody {
                @for x in &h.hosts {
                    @let same = x.policy_sha256.as_deref() == Some(h.policy_sha256.as_str());
                    tr data-host=(x.id) data-policy-same=(same) {
                        td { code { (x.id) } @if x.this { " (this host)" } }
                        td { code title=(x.policy_sha256.as_deref().unwrap_or("")) { (short(x.policy_sha256.as_deref().unwrap_or("-"))) } }
                        td { (x.started_at) }
                        td .policy { @if !same { strong .stale { "policy differs from this host's" } } }
                    }
                }
            }
        }
        (untrusted("GET /healthz", &h.healthz))
    };
    layout("Budget & health", Some((operator, csrf)), None, body)
}

/// An error page.
pub fn error(operator: Option<(&str, &str)>, title: &str, message: &str) -> Markup {
    layout(
        title,
        operator,
        None,
        html! { h1 { (title) } p .error { (message) } },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::HostView;

    #[test]
    fn every_value_is_escaped() {
        let payload = r#"<script>window.__pwned=1</script><img src=x onerror=alert(1)>"' &"#;
        let a = ApprovalView {
            id: payload.into(),
            saga_id: payload.into(),
            step_seq: 0,
            tool: payload.into(),
            tool_hash: payload.into(),
            risk: Some(payload.into()),
            args: payload.into(),
            reason: payload.into(),
            summary: payload.into(),
            diff: Some(payload.into()),
            essentials: Some(("Request".into(), payload.into())),
            preview: Some(payload.into()),
            status: "pending".into(),
            created_at: payload.into(),
            age_s: 3,
            expires_at: Some(payload.into()),
            replaces: Some(payload.into()),
            decided_by: Some(payload.into()),
            decided_at: Some(payload.into()),
            note: Some(payload.into()),
            flow: vec![crate::backend::FlowFindingView {
                argument: payload.into(),
                value: payload.into(),
                level: payload.into(),
                source: payload.into(),
                steps: vec![0],
            }],
        };
        let page = Paged {
            rows: vec![a],
            total: 1,
            more: false,
        };
        let html = approvals(payload, payload, &page, 0, Some(payload)).into_string();
        assert!(!html.contains("<script>window"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(!html.contains("\"' &"), "quotes and ampersands escaped");
        assert!(html.contains("&lt;script&gt;"));
        // The only script is the static file.
        assert_eq!(html.matches("<script").count(), 1);

        // The health page: hosts sharing the store, one with another
        // policy flagged; names escaped.
        let h = HealthView {
            day: "2026-01-01".into(),
            spent_today_usd: 0.0,
            soft_cap_usd: None,
            hard_cap_usd: None,
            switch: "normal".into(),
            audit: "ok".into(),
            healthz: payload.into(),
            providers: vec![payload.into(), "openai".into()],
            default_provider: Some("openai".into()),
            mode: "live".into(),
            store: "postgres".into(),
            policy_sha256: "aa".repeat(32),
            hosts: vec![
                HostView {
                    id: "host-a".into(),
                    policy_sha256: Some("aa".repeat(32)),
                    started_at: "2026-01-01T00:00:00Z".into(),
                    this: true,
                },
                HostView {
                    id: payload.into(),
                    policy_sha256: Some("bb".repeat(32)),
                    started_at: "2026-01-01T00:00:01Z".into(),
                    this: false,
                },
            ],
            history: Vec::new(),
        };
        let html = health(payload, payload, &h).into_string();
        assert!(!html.contains("<script>window"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert_eq!(html.matches("policy differs from this host's").count(), 1);
        assert!(html.contains("host-a</code> (this host)"), "{html}");
        assert_eq!(html.matches("data-policy-same=\"true\"").count(), 1);

        // The decided page shows who decided and their note: escaped too.
        let html = decided_approvals(payload, payload, &page, 0).into_string();
        assert!(!html.contains("<script>window"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(html.contains("&lt;script&gt;"));
        assert_eq!(html.matches("<script").count(), 1);
    }
}
