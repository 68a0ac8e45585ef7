//! `capsaga audit verify`: three checks over the state database.
//!
//! 1. The hash chain over `wal_log` ([`chain::verify`]): an edited row, a
//!    deleted row in the middle, or rows in another order break it at the
//!    first bad row.
//! 2. The anchored head (`wal_head`, moved in the transaction of every
//!    append): deleting the *newest* rows leaves a chain that verifies, but
//!    the log then ends before the head; rows added after the head, or a
//!    newest row edited and re-hashed, disagree with it too.
//! 3. A replay of the log against the tables it describes: the state of every
//!    saga, the status of every step and of every approval must be what the
//!    log's records say. This catches a table edited behind the log's back
//!    (say a COMPENSATION_FAILED step turned COMPENSATED to hide it, or an
//!    approval turned approved without an APPROVAL_APPROVED record), and a
//!    log whose rows were deleted while the tables kept their effect. An
//!    MCP task row must be what its last `TASK` record pins (its status,
//!    version and a hash of its fields): a task's status or result edited
//!    in its table is found (rows from before SQLite schema 15 / PostgreSQL
//!    migration 9 are not in the log and are left out).
//!
//! The PostgreSQL store keeps one chain per writer (a host's store
//! opening) in one shared order (`seq`), so 1 and 2 run per chain, and a
//! fourth check reads the `ANCHOR` records each writer appends with the
//! heads of the other chains it saw: a chain cut short or deleted whole
//! behind an anchor is found even with its own head moved back. The replay
//! (3) runs over all chains' rows in `seq` order.
//!
//! A fifth check reads the replay's result: a saga the log ends Done
//! while one of its steps has no outcome (BEGIN only) is reported
//! (`outcome`): the store refuses that state (`SagaStore::set_state`), so it
//! comes from an older capsaga or from someone writing the log.
//!
//! All three live in the same file as what they protect: someone who can
//! rewrite the whole database consistently (re-hashing every row after an
//! edit and moving the head) is not detected. `capsaga audit verify`
//! prints the head so that it can be witnessed elsewhere, and
//! `--expect-head <seq>:<hash>` checks the log against a witnessed head.

use super::{LogRow, Store, StoreError, TableStates};
use capsaga_core::wal_row::{self as chain, ChainBreak};
use serde::Serialize;
use std::collections::BTreeMap;

/// One problem found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The first bad row of the log, when the problem is in the log (or the
    /// last log row about the thing that disagrees).
    pub seq: Option<i64>,
    /// `chain`, `head`, `anchor`, `replay` or `outcome` (a Done saga
    /// holding a step without an outcome).
    pub check: &'static str,
    /// What is wrong.
    pub reason: String,
}

/// What `audit verify` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditReport {
    /// Rows in the log.
    pub rows: usize,
    /// Hash chains the log is made of (1 on SQLite; on PostgreSQL one per
    /// writer that appended, besides a log of migration 2's).
    pub chains: usize,
    /// The anchored head (seq, hash), if any.
    pub head: Option<(i64, String)>,
    /// The first break of the chain, if any.
    pub chain: Option<ChainBreak>,
    /// Every problem: the chain's first break, the head's, then the
    /// replay's disagreements.
    pub findings: Vec<Finding>,
}

impl AuditReport {
    /// True when nothing was found.
    pub fn ok(&self) -> bool {
        self.findings.is_empty()
    }

    /// The first bad row of the log: the lowest `seq` among the chain,
    /// head and anchor findings, else the first other finding's (replay,
    /// outcome).
    pub fn first_bad_row(&self) -> Option<i64> {
        self.findings
            .iter()
            .filter(|f| !matches!(f.check, "replay" | "outcome"))
            .filter_map(|f| f.seq)
            .min()
            .or_else(|| self.findings.iter().find_map(|f| f.seq))
    }
}

/// Check the head: the newest row must be the anchored one.
fn check_head(rows: &[LogRow], head: Option<&(i64, String)>, anchor: &str) -> Option<Finding> {
    let last = rows.last().map(|r| (r.seq, r.hash.as_str()));
    let finding = |seq: Option<i64>, reason: String| Finding {
        seq,
        check: "head",
        reason,
    };
    match (last, head) {
        (None, None) => None,
        (Some(_), None) => Some(finding(
            Some(1),
            format!("the {anchor} is missing: it was deleted"),
        )),
        (None, Some((hs, _))) => Some(finding(
            Some(1),
            format!("the log is empty but the {anchor} is row {hs}: rows 1 to {hs} were deleted"),
        )),
        (Some((ls, lh)), Some((hs, hh))) => {
            if ls < *hs {
                Some(finding(
                    Some(ls + 1),
                    format!(
                        "the log ends at row {ls} but the {anchor} is row {hs}: rows {} to {hs} were deleted from the end",
                        ls + 1
                    ),
                ))
            } else if ls > *hs {
                Some(finding(
                    Some(hs + 1),
                    format!(
                        "the log goes on to row {ls} after the {anchor} (row {hs}): rows were added outside capsaga"
                    ),
                ))
            } else if lh != hh {
                Some(finding(
                    Some(ls),
                    format!("row {ls} does not have the hash of the {anchor}: it was edited"),
                ))
            } else {
                None
            }
        }
    }
}

#[derive(Default)]
struct Replayed {
    sagas: BTreeMap<String, (String, i64)>,
    steps: BTreeMap<(String, u64), (String, i64)>,
    approvals: BTreeMap<String, (String, i64)>,
    tasks: BTreeMap<String, (String, i64)>,
}

fn replay(rows: &[LogRow]) -> Replayed {
    let mut r = Replayed::default();
    for row in rows {
        let approval_id = row
            .detail
            .get("approval_id")
            .and_then(|v| v.as_str())
            .map(str::to_string);
        match (row.record.as_str(), row.step_seq) {
            ("STATE", _) => {
                if let Some(state) = row.detail.get("state").and_then(|v| v.as_str()) {
                    r.sagas
                        .insert(row.saga_id.clone(), (state.to_string(), row.seq));
                }
            }
            ("BEGIN" | "COMMIT" | "FAIL" | "COMPENSATED" | "COMPENSATION_FAILED", Some(step)) => {
                r.steps
                    .insert((row.saga_id.clone(), step), (row.record.clone(), row.seq));
            }
            ("TASK", _) => {
                let field = |k: &str| row.detail.get(k).and_then(|v| v.as_str());
                if let Some(id) = field("task_id") {
                    match (field("event"), field("row")) {
                        (Some("forgotten"), _) => {
                            r.tasks.remove(id);
                        }
                        (_, Some(pin)) => {
                            r.tasks.insert(id.to_string(), (pin.to_string(), row.seq));
                        }
                        _ => {}
                    }
                }
            }
            ("APPROVAL_REQUESTED", _) => {
                if let Some(id) = approval_id {
                    r.approvals.insert(id, ("pending".into(), row.seq));
                }
            }
            (
                "APPROVAL_APPROVED" | "APPROVAL_DENIED" | "APPROVAL_CLAIMED" | "APPROVAL_STALE"
                | "APPROVAL_EXPIRED",
                _,
            ) => {
                let status = match row.record.as_str() {
                    "APPROVAL_APPROVED" => "approved",
                    "APPROVAL_DENIED" => "denied",
                    "APPROVAL_STALE" => "stale",
                    "APPROVAL_EXPIRED" => "expired",
                    _ => "claimed",
                };
                if let Some(id) = approval_id {
                    r.approvals.insert(id, (status.into(), row.seq));
                }
            }
            _ => {}
        }
    }
    r
}

/// Compare what the tables say with what the log says, by key.
fn compare(
    what: &str,
    tables: BTreeMap<String, String>,
    log: BTreeMap<String, (String, i64)>,
    out: &mut Vec<Finding>,
) {
    for (key, value) in &tables {
        match log.get(key) {
            Some((logged, _)) if logged == value => {}
            Some((logged, seq)) => out.push(Finding {
                seq: Some(*seq),
                check: "replay",
                reason: format!(
                    "{what} {key} is {value} in its table but {logged} in the log (last record: row {seq})"
                ),
            }),
            None => out.push(Finding {
                seq: None,
                check: "replay",
                reason: format!("{what} {key} ({value}) has no record in the log"),
            }),
        }
    }
    for (key, (logged, seq)) in &log {
        if !tables.contains_key(key) {
            out.push(Finding {
                seq: Some(*seq),
                check: "replay",
                reason: format!(
                    "{what} {key} is {logged} in the log (row {seq}) but missing from its table"
                ),
            });
        }
    }
}

/// Every saga the log ends Done while one of its steps has no outcome (its
/// last record is BEGIN: no COMMIT, FAIL or compensation): a step whose
/// outcome was never written (the store failed while it ran) in a saga
/// that was committed anyway. Its effect may stand, unrecorded. The
/// finding names the saga's Done record.
fn done_with_a_step_in_doubt(r: &Replayed) -> Vec<Finding> {
    r.steps
        .iter()
        .filter(|(_, (status, _))| status == "BEGIN")
        .filter_map(|((saga, step), (_, begin))| {
            let (state, done) = r.sagas.get(saga)?;
            (state == "Done").then(|| Finding {
                seq: Some(*done),
                check: "outcome",
                reason: format!(
                    "saga {saga} is Done (row {done}) but its step {step} has no outcome (BEGIN at row {begin}, no COMMIT or FAIL): its effect may stand unrecorded; undo the saga (`capsaga undo`) or check the step by hand"
                ),
            })
        })
        .collect()
}

/// What a chain's head is called in findings.
fn anchor_name(chain: &str) -> String {
    if chain == chain::SHARED_CHAIN {
        "anchored head".to_string()
    } else {
        format!("anchored head of chain {chain}")
    }
}

/// Check every `ANCHOR` record: each chain head it names (`{"heads":
/// [{"chain", "seq", "hash"}]}`, written by another chain's writer) must
/// still be in the log, in that chain, with that hash. A chain truncated,
/// or deleted whole, behind an anchor is found here even when its own head
/// row was moved back (or deleted) with it.
fn check_anchors(rows: &[LogRow], chain_of: &BTreeMap<i64, &str>) -> Vec<Finding> {
    let by_seq: BTreeMap<i64, &LogRow> = rows.iter().map(|r| (r.seq, r)).collect();
    let mut out = Vec::new();
    for a in rows.iter().filter(|r| r.record == ANCHOR) {
        let from = chain_of.get(&a.seq).copied().unwrap_or("?");
        let Some(heads) = a.detail.get("heads").and_then(|h| h.as_array()) else {
            out.push(Finding {
                seq: Some(a.seq),
                check: "anchor",
                reason: format!("anchor row {} names no heads: it was edited", a.seq),
            });
            continue;
        };
        for h in heads {
            let (Some(c), Some(seq), Some(hash)) = (
                h.get("chain").and_then(|v| v.as_str()),
                h.get("seq").and_then(serde_json::Value::as_i64),
                h.get("hash").and_then(|v| v.as_str()),
            ) else {
                out.push(Finding {
                    seq: Some(a.seq),
                    check: "anchor",
                    reason: format!("anchor row {} has a head that does not decode", a.seq),
                });
                continue;
            };
            let reason = match (by_seq.get(&seq), chain_of.get(&seq)) {
                (Some(r), Some(rc)) if *rc == c && r.hash == hash => continue,
                (Some(_), Some(rc)) if *rc != c => format!(
                    "row {seq} is in chain {rc}, but anchor row {} (chain {from}) saw it as the head of chain {c}: rows were moved",
                    a.seq
                ),
                (Some(_), _) => format!(
                    "row {seq} of chain {c} does not have the hash anchor row {} (chain {from}) saw: it was rewritten",
                    a.seq
                ),
                (None, _) => format!(
                    "row {seq} of chain {c}, anchored by row {} (chain {from}), is not in the log: rows were deleted",
                    a.seq
                ),
            };
            out.push(Finding {
                seq: Some(seq),
                check: "anchor",
                reason,
            });
        }
    }
    out
}

/// The log record a writer appends to its own chain with the heads of the
/// other chains it saw (PostgreSQL's per-writer chains).
pub const ANCHOR: &str = "ANCHOR";

/// Run the checks: every chain ([`super::LogStore::chains`]), each
/// chain's anchored head, the anchors between chains, then the replay of
/// all rows in `seq` order. `expect_head` is a witnessed head (seq, hash)
/// to check the log against, besides the anchored ones.
///
/// # Errors
/// [`StoreError`] when the tables cannot be read.
pub async fn verify(
    store: &dyn Store,
    expect_head: Option<&(i64, String)>,
) -> Result<AuditReport, StoreError> {
    let chains = store.chains().await?;
    let mut findings = Vec::new();
    let mut chain: Option<ChainBreak> = None;
    let mut chain_of: BTreeMap<i64, &str> = BTreeMap::new();
    for c in &chains {
        if let Some(b) = chain::verify_chain(&c.rows, &c.name) {
            findings.push(Finding {
                seq: Some(b.seq),
                check: "chain",
                reason: if c.name == chain::SHARED_CHAIN {
                    b.reason.clone()
                } else {
                    format!("chain {}: {}", c.name, b.reason)
                },
            });
            if chain.as_ref().is_none_or(|first| b.seq < first.seq) {
                chain = Some(b);
            }
        }
        findings.extend(check_head(&c.rows, c.head.as_ref(), &anchor_name(&c.name)));
        for r in &c.rows {
            chain_of.insert(r.seq, &c.name);
        }
    }
    let mut rows: Vec<LogRow> = chains.iter().flat_map(|c| c.rows.iter().cloned()).collect();
    rows.sort_by_key(|r| r.seq);
    findings.extend(check_anchors(&rows, &chain_of));
    // The newest anchored head of all chains: what to witness elsewhere.
    let head = chains
        .iter()
        .filter_map(|c| c.head.clone())
        .max_by_key(|h| h.0);
    if let Some(w) = expect_head {
        // A witnessed head older than the log is fine as long as that row
        // is still there with the same hash; the chain covers the rest.
        match rows.iter().find(|r| r.seq == w.0) {
            Some(r) if r.hash == w.1 => {}
            Some(r) => findings.push(Finding {
                seq: Some(r.seq),
                check: "head",
                reason: format!(
                    "row {} does not have the witnessed hash: the log was rewritten",
                    r.seq
                ),
            }),
            None => findings.push(Finding {
                seq: Some(rows.last().map_or(1, |r| r.seq + 1)),
                check: "head",
                reason: format!(
                    "the witnessed head row {} is not in the log: rows were deleted",
                    w.0
                ),
            }),
        }
    }

    let replayed = replay(&rows);
    findings.extend(done_with_a_step_in_doubt(&replayed));
    let TableStates {
        sagas,
        steps,
        approvals,
        mut tasks,
    } = store.table_states().await?;
    // A task row from before the tasks joined the log is not checked
    // unless the log names it (then its row was marked unchained after).
    tasks.retain(|id, pin| pin != super::UNCHAINED_TASK || replayed.tasks.contains_key(id));
    compare("saga", sagas, replayed.sagas, &mut findings);
    compare(
        "step",
        steps,
        replayed
            .steps
            .into_iter()
            .map(|((saga, seq), v)| (format!("{saga}#{seq}"), v))
            .collect(),
        &mut findings,
    );
    compare("approval", approvals, replayed.approvals, &mut findings);
    compare("task", tasks, replayed.tasks, &mut findings);
    Ok(AuditReport {
        rows: rows.len(),
        chains: chains.len(),
        head,
        chain,
        findings,
    })
}
