//! The records of the hash-chained log, written once for both dialects:
//! what each write appends (the saga or object it is about, the step, the
//! record's kind and its detail). A dialect only appends them, in the
//! write's own transaction (`sqlite/log.rs`, `postgres/log.rs`). A
//! record's detail is hashed into the chain: its shape never changes.

use crate::{NeuronRow, NewSaga, NewStep, RELEASED_WHY, Transition};
use capsaga_core::fsm::State;

use capsaga_core::pause::Mode;
use capsaga_core::principal::Role;
use capsaga_secrets::sealed::Sealed;
use serde::Serialize;
use serde_json::{Value, json};

/// One record about to be appended to the log.
#[derive(Debug, Clone)]
pub(crate) struct Record {
    /// The saga (or `key:`, `token:`, `neuron:`, `host:` object) it is about.
    pub saga_id: String,
    /// The step it is about, if any.
    pub step_seq: Option<u64>,
    /// Its kind (`STATE`, `OWNER`, `BEGIN`...).
    pub kind: &'static str,
    /// Its detail.
    pub detail: Value,
}

fn of(saga_id: &str, step_seq: Option<u64>, kind: &'static str, detail: Value) -> Record {
    Record {
        saga_id: saga_id.to_string(),
        step_seq,
        kind,
        detail,
    }
}

/// A saga created (`STATE`), with its origin, scope, label, the SHA-256 of
/// its plan, and its principal when it has one.
pub(crate) fn saga_created(s: &NewSaga<'_>) -> Record {
    let plan_hash = s
        .plan
        .map(|p| capsaga_core::idempotency::sha256_hex(p.as_bytes()));
    let (origin, scope) = (s.scope.origin(), s.scope.as_str());
    let mut detail = json!({"state": s.state.as_str(), "origin": origin, "scope": scope, "label": s.label, "plan_sha256": plan_hash});
    if let (Some(p), Some(d)) = (s.principal, detail.as_object_mut()) {
        d.insert("principal".into(), json!(p));
    }
    of(s.saga_id, None, "STATE", detail)
}

/// A saga's guardrail state set by `event` (`STATE`), with `extra`'s keys
/// that do not clash.
pub(crate) fn state_set(saga_id: &str, state: State, event: &str, extra: Option<&Value>) -> Record {
    let mut detail = json!({"state": state.as_str(), "event": event});
    if let (Some(Value::Object(m)), Some(d)) = (extra, detail.as_object_mut()) {
        for (k, v) in m {
            d.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    of(saga_id, None, "STATE", detail)
}

/// A saga taken by `owner` from `previous` (none: released or unowned)
/// for `why`, now at fencing token `fence` (`OWNER`).
pub(crate) fn owner_taken(
    saga_id: &str,
    owner: &str,
    previous: Option<&str>,
    why: &str,
    fence: u64,
) -> Record {
    of(
        saga_id,
        None,
        "OWNER",
        json!({"owner": owner, "previous": previous, "why": why, "fence": fence}),
    )
}

/// A saga released by `previous` between two requests, now at fencing
/// token `fence` (`OWNER`).
pub(crate) fn released(saga_id: &str, previous: &str, fence: u64) -> Record {
    of(
        saga_id,
        None,
        "OWNER",
        json!({"owner": null, "previous": previous, "why": RELEASED_WHY, "released": true, "fence": fence}),
    )
}

/// A step's BEGIN.
pub(crate) fn begin(s: &NewStep<'_>) -> Record {
    of(
        s.saga_id,
        Some(s.step_seq),
        "BEGIN",
        json!({
            "tool": s.tool_id,
            "tool_hash": s.tool_hash,
            "grants": s.grants,
            "idempotency_key": s.idempotency_key,
            "args": s.args,
            "preimage": s.preimage,
            "approval_id": s.approval,
        }),
    )
}

/// A step moved to `to` (its status is the record's kind), with its
/// output or its error.
pub(crate) fn step_moved<O: Serialize, E: Serialize>(
    saga_id: &str,
    step_seq: u64,
    to: &'static str,
    output: Option<&O>,
    error: Option<&E>,
) -> Record {
    let detail = match (output, error) {
        (Some(o), _) => json!({"output": o}),
        (None, Some(e)) => json!({"error": e}),
        (None, None) => json!({}),
    };
    of(saga_id, Some(step_seq), to, detail)
}

/// A step's label (`LABEL`).
pub(crate) fn label(saga_id: &str, step_seq: u64, label: &Value) -> Record {
    of(saga_id, Some(step_seq), "LABEL", json!({"label": label}))
}

/// A step's attempt that will be retried after `delay_ms` (`RETRY`).
pub(crate) fn retry(
    saga_id: &str,
    step_seq: u64,
    attempt: u32,
    delay_ms: u64,
    error: &impl Serialize,
) -> Record {
    of(
        saga_id,
        Some(step_seq),
        "RETRY",
        json!({"attempt": attempt, "delay_ms": delay_ms, "error": error}),
    )
}

/// A step left in doubt (`IN_DOUBT`).
pub(crate) fn in_doubt(saga_id: &str, step_seq: u64, error: &impl Serialize) -> Record {
    of(saga_id, Some(step_seq), "IN_DOUBT", json!({"error": error}))
}

/// The host's restore of a step's files (`FS_RESTORE`).
pub(crate) fn fs_restore(saga_id: &str, step_seq: u64, report: Value) -> Record {
    of(saga_id, Some(step_seq), "FS_RESTORE", report)
}

/// An approval claimed by a step's BEGIN (`APPROVAL_CLAIMED`).
pub(crate) fn approval_claimed(saga_id: &str, step_seq: u64, approval_id: &str) -> Record {
    of(
        saga_id,
        Some(step_seq),
        "APPROVAL_CLAIMED",
        json!({"approval_id": approval_id}),
    )
}

/// What an approval request records besides its row.
pub(crate) struct Requested<'a> {
    /// The approval's id.
    pub id: &'a str,
    /// The request.
    pub a: &'a crate::NewApproval<'a>,
    /// When it expires.
    pub expires_at: &'a str,
}

/// An approval requested (`APPROVAL_REQUESTED`).
pub(crate) fn approval_requested(r: &Requested<'_>) -> Record {
    let a = r.a;
    of(
        a.saga_id,
        Some(a.step_seq),
        "APPROVAL_REQUESTED",
        json!({
            "approval_id": r.id,
            "tool": a.binding.tool_id,
            "tool_hash": a.binding.tool_hash,
            "args_hash": a.binding.args_hash,
            "reason": a.reason,
            "summary": a.summary,
            "expires_at": r.expires_at,
            "replaces": a.replaces.map(|(old, _)| old),
        }),
    )
}

/// The saga parked by an approval request (`STATE`).
pub(crate) fn awaiting_approval(saga_id: &str) -> Record {
    of(
        saga_id,
        None,
        "STATE",
        json!({"state": State::AwaitingApproval.as_str(), "event": "ApprovalRequested"}),
    )
}

/// An approval that expired before its decision (`APPROVAL_EXPIRED`).
pub(crate) fn approval_expired(saga_id: &str, step_seq: u64, approval_id: &str) -> Record {
    of(
        saga_id,
        Some(step_seq),
        "APPROVAL_EXPIRED",
        json!({"approval_id": approval_id}),
    )
}

/// An approval decided (`kind`: `APPROVAL_APPROVED` or `APPROVAL_DENIED`).
pub(crate) fn approval_decided(
    saga_id: &str,
    step_seq: u64,
    kind: &'static str,
    approval_id: &str,
    by: &str,
    note: Option<&str>,
) -> Record {
    of(
        saga_id,
        Some(step_seq),
        kind,
        json!({"approval_id": approval_id, "by": by, "note": note}),
    )
}

/// An approval replaced by a newer one (`kind`: `APPROVAL_STALE` or
/// `APPROVAL_EXPIRED`).
pub(crate) fn approval_replaced(
    saga_id: &str,
    step_seq: Option<u64>,
    kind: &'static str,
    old: &str,
    new: &str,
) -> Record {
    of(
        saga_id,
        step_seq,
        kind,
        json!({"approval_id": old, "replaced_by": new}),
    )
}

/// A provider key sealed and stored (`KEY`): who and the last four, nothing
/// sealed.
pub(crate) fn key_sealed(name: &str, s: &Sealed, by: &str) -> Record {
    of(
        &format!("key:{name}"),
        None,
        "KEY",
        json!({"event": "sealed", "name": name, "last4": s.last4, "kek_id": s.kek_id, "by": by}),
    )
}

/// A provider key removed (`KEY`).
pub(crate) fn key_removed(name: &str, by: &str) -> Record {
    of(
        &format!("key:{name}"),
        None,
        "KEY",
        json!({"event": "removed", "name": name, "by": by}),
    )
}

/// The kill switch set (`SWITCH`).
pub(crate) fn switch_set(mode: Mode, by: &str, note: Option<&str>) -> Record {
    of(
        "host:switch",
        None,
        "SWITCH",
        json!({"mode": mode.as_str(), "by": by, "note": note}),
    )
}

/// A named token created (`TOKEN`).
pub(crate) fn token_created(name: &str, role: Role, by: &str) -> Record {
    of(
        &format!("token:{name}"),
        None,
        "TOKEN",
        json!({"event": "created", "name": name, "role": role.as_str(), "by": by}),
    )
}

/// A named token revoked (`TOKEN`).
pub(crate) fn token_revoked(name: &str, by: &str) -> Record {
    of(
        &format!("token:{name}"),
        None,
        "TOKEN",
        json!({"event": "revoked", "name": name, "by": by}),
    )
}

/// A neuron's version proposed (`NEURON`).
pub(crate) fn neuron_proposed(
    name: &str,
    version: i64,
    identity: &str,
    saga_id: Option<&str>,
    step_seq: Option<u64>,
) -> Record {
    neuron(
        name,
        json!({"name": name, "version": version, "identity": identity,
            "status": "proposed", "saga_id": saga_id, "step_seq": step_seq}),
    )
}

/// A neuron's active version retired by a newer one's activation (`NEURON`).
pub(crate) fn neuron_superseded(old: &NeuronRow, by: &str, note: &str) -> Record {
    neuron(
        &old.name,
        json!({"name": old.name, "version": old.version, "identity": old.identity,
            "status": "retired", "by": by, "note": note}),
    )
}

/// A neuron's version moved to another status by the operator (`NEURON`).
pub(crate) fn neuron_moved(t: &Transition<'_>, identity: &str) -> Record {
    neuron(
        t.name,
        json!({"name": t.name, "version": t.version, "identity": identity,
            "status": t.to.as_str(), "by": t.by, "note": t.note, "granted": t.granted}),
    )
}

/// A pending neuron's version removed (`NEURON`).
pub(crate) fn neuron_removed(cur: &NeuronRow, identity: &str, by: &str) -> Record {
    neuron(
        &cur.name,
        json!({"name": cur.name, "version": cur.version, "identity": identity,
            "status": "removed", "by": by}),
    )
}

fn neuron(name: &str, detail: Value) -> Record {
    of(&format!("neuron:{name}"), None, "NEURON", detail)
}

/// What the log pins of a task row (issue 48): `<status> v<version>
/// <sha256>`, the SHA-256 over every field but the id, so a row edited
/// behind the log's back (its status, result, answers, owner...)
/// disagrees with its last `TASK` record in `audit verify`'s replay.
pub(crate) fn task_pin(t: &crate::tasks::TaskRow) -> String {
    let fields = json!([
        t.principal,
        t.saga_id,
        t.owner,
        t.status,
        t.detail,
        t.answers,
        t.cancel_requested,
        t.created_at,
        t.updated_at,
        t.version
    ]);
    let hash = capsaga_core::idempotency::sha256_hex(fields.to_string().as_bytes());
    format!("{} v{} {hash}", t.status, t.version)
}

/// A task row created or changed (`TASK`, `event` `created` or
/// `changed`), as it is stored now.
pub(crate) fn task_written(t: &crate::tasks::TaskRow, event: &'static str) -> Record {
    of(
        &format!("task:{}", t.task_id),
        None,
        "TASK",
        json!({"event": event, "task_id": t.task_id, "status": t.status, "row": task_pin(t)}),
    )
}

/// An ended task row deleted (`TASK`, `event` `forgotten`).
pub(crate) fn task_forgotten(task_id: &str) -> Record {
    of(
        &format!("task:{task_id}"),
        None,
        "TASK",
        json!({"event": "forgotten", "task_id": task_id}),
    )
}
