//! `neurons`: every version of every agent-written tool. Each write appends
//! a `NEURON` record (saga id `neuron:<name>`) to the hash-chained log in
//! the same transaction.

use super::super::{
    NeuronOpError, NeuronRow, NeuronStore, NewNeuron, Removed, StoreError, Transition,
};
use super::Cached;
use super::log::log_record;
use super::{SqliteStore, to_json};
use crate::clock::now_rfc3339;
use crate::records;
use async_trait::async_trait;
use capsaga_core::neuron::Status;
use capsaga_core::neuron::fitness::CallRecord;
use rusqlite::{Connection, params};

/// The columns read, with the provenance found through the turn's trace.
const SELECT: &str = "SELECT n.name, n.version, n.identity, n.runner_hash, n.status, n.meta, n.source, n.examples, n.report, n.granted, n.saga_id, n.step_seq, n.decided_by, n.note, n.created_at, n.updated_at,
    (SELECT t.trace_id FROM traces t WHERE t.saga_id = n.saga_id ORDER BY t.started_at LIMIT 1),
    (SELECT json_extract(s.value, '$.model') FROM traces t, json_each(t.trace, '$.steps') s
       WHERE t.saga_id = n.saga_id AND json_extract(s.value, '$.type') = 'thought' LIMIT 1)
    FROM neurons n";

fn query(
    c: &Connection,
    filter: &str,
    p: &[&dyn rusqlite::ToSql],
) -> Result<Vec<NeuronRow>, StoreError> {
    super::all(c, &format!("{SELECT} {filter}"), p, |r| {
        crate::decode::neuron(r)
    })
}

fn one(
    c: &Connection,
    filter: &str,
    p: &[&dyn rusqlite::ToSql],
) -> Result<Option<NeuronRow>, StoreError> {
    Ok(query(c, filter, p)?.into_iter().next())
}

#[async_trait]
impl NeuronStore for SqliteStore {
    async fn propose_neuron(&self, n: &NewNeuron<'_>) -> Result<(NeuronRow, bool), StoreError> {
        let name = n.meta.name.clone();
        let (identity, runner_hash, meta, source, examples, report, saga_id, step_seq) = (
            n.identity.to_owned(),
            n.runner_hash.to_owned(),
            n.meta.clone(),
            n.source.to_owned(),
            n.examples.clone(),
            n.report.cloned(),
            n.saga_id.map(str::to_owned),
            n.step_seq,
        );
        self.write(move |tx| {
            let n = NewNeuron {
                identity: &identity,
                runner_hash: &runner_hash,
                meta: &meta,
                source: &source,
                examples: &examples,
                report: report.as_ref(),
                saga_id: saga_id.as_deref(),
                step_seq,
            };
            if let Some(row) = one(tx, "WHERE n.identity = ?1", &[&n.identity])? {
                return Ok((row, false));
            }
            let version: u32 = tx.row(
                "SELECT COALESCE(MAX(version), 0) + 1 FROM neurons WHERE name = ?1",
                params![name],
                |r| r.get(0),
            )?;
            let mut meta = n.meta.clone();
            meta.version = version.to_string();
            let now = now_rfc3339();
            tx.exec(
                "INSERT INTO neurons (name, version, identity, runner_hash, status, meta, source, examples, report, granted, saga_id, step_seq, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, 'proposed', ?5, ?6, ?7, ?11, '[]', ?8, ?9, ?10, ?10)",
                params![
                    name,
                    version,
                    n.identity,
                    n.runner_hash,
                    to_json(&meta),
                    n.source,
                    to_json(n.examples),
                    n.saga_id,
                    n.step_seq.map(|s| s as i64),
                    now,
                    n.report.map(to_json)
                ],
            )?;
            let proposed = records::neuron_proposed(
                &name,
                i64::from(version),
                n.identity,
                n.saga_id,
                n.step_seq,
            );
            log_record(tx, &proposed, &now)?;
            let row = one(tx, "WHERE n.identity = ?1", &[&n.identity])?
                .ok_or_else(|| StoreError::Decode("inserted neuron not found".into()))?;
            Ok((row, true))
        })
        .await
    }

    async fn transition_neuron(&self, t: &Transition<'_>) -> Result<NeuronRow, NeuronOpError> {
        let (name, version, to, by, note, granted, report) = (
            t.name.to_owned(),
            t.version,
            t.to,
            t.by.to_owned(),
            t.note.map(str::to_owned),
            t.granted.map(<[String]>::to_vec),
            t.report.cloned(),
        );
        self.write(move |tx| {
            let t = Transition {
                name: &name,
                version,
                to,
                by: &by,
                note: note.as_deref(),
                granted: granted.as_deref(),
                report: report.as_ref(),
            };
            let Some(cur) = one(tx, "WHERE n.name = ?1 AND n.version = ?2", &[&t.name, &t.version])?
            else {
                return Ok(Err(NeuronOpError::NotFound(format!("{} version {}", t.name, t.version))));
            };
            if !cur.status.can_become(t.to) {
                return Ok(Err(NeuronOpError::Refused {
                    name: t.name.into(),
                    version: t.version,
                    from: cur.status,
                    to: t.to,
                }));
            }
            let now = now_rfc3339();
            if t.to == Status::Active {
                let others = query(
                    tx,
                    "WHERE n.name = ?1 AND n.status = 'active' AND n.version <> ?2",
                    &[&t.name, &t.version],
                )?;
                for o in others {
                    let note = format!("superseded by version {}", t.version);
                    tx.exec(
                        "UPDATE neurons SET status = 'retired', decided_by = ?1, note = ?2, updated_at = ?3 WHERE name = ?4 AND version = ?5",
                        params![t.by, note, now, o.name, o.version],
                    )?;
                    log_record(tx, &records::neuron_superseded(&o, t.by, &note), &now)?;
                }
            }
            let granted = t.granted.map(|g| to_json(&g));
            let report = t.report.map(to_json);
            tx.exec(
                "UPDATE neurons SET status = ?1, decided_by = ?2, note = COALESCE(?3, note), granted = COALESCE(?4, granted), report = COALESCE(?5, report), updated_at = ?6 WHERE name = ?7 AND version = ?8",
                params![t.to.as_str(), t.by, t.note, granted, report, now, t.name, t.version],
            )?;
            log_record(tx, &records::neuron_moved(&t, &cur.identity), &now)?;
            let row = one(tx, "WHERE n.name = ?1 AND n.version = ?2", &[&t.name, &t.version])?
                .ok_or_else(|| StoreError::Decode("updated neuron not found".into()))?;
            Ok(Ok(row))
        })
        .await?
    }

    async fn remove_pending_neuron(&self, identity: &str, by: &str) -> Result<Removed, StoreError> {
        let (identity, by) = (identity.to_owned(), by.to_owned());
        self.write(move |tx| {
            let (identity, by) = (identity.as_str(), by.as_str());
            let Some(cur) = one(tx, "WHERE n.identity = ?1", &[&identity])? else {
                return Ok(Removed::Absent);
            };
            if !cur.status.is_pending() {
                return Ok(Removed::Kept(cur.status));
            }
            tx.exec("DELETE FROM neurons WHERE identity = ?1", params![identity])?;
            let now = now_rfc3339();
            log_record(tx, &records::neuron_removed(&cur, identity, by), &now)?;
            Ok(Removed::Removed)
        })
        .await
    }

    async fn neurons(&self, name: Option<&str>) -> Result<Vec<NeuronRow>, StoreError> {
        self.read(|c| {
            query(
                c,
                "WHERE (?1 IS NULL OR n.name = ?1) ORDER BY n.name, n.version",
                &[&name],
            )
        })
    }

    async fn neuron(
        &self,
        name: &str,
        version: Option<u32>,
    ) -> Result<Option<NeuronRow>, StoreError> {
        self.read(|c| {
            one(
                c,
                "WHERE n.name = ?1 AND (?2 IS NULL OR n.version = ?2) ORDER BY n.version DESC LIMIT 1",
                &[&name, &version],
            )
        })
    }

    async fn neuron_by_identity(&self, identity: &str) -> Result<Option<NeuronRow>, StoreError> {
        self.read(|c| one(c, "WHERE n.identity = ?1", &[&identity]))
    }

    async fn calls_of(&self, identity: &str) -> Result<Vec<CallRecord>, StoreError> {
        self.read(|c| {
            let mut st = c.prepare_cached(
                "SELECT status, json_extract(error, '$.kind'),
                        CAST(ROUND((julianday(updated_at) - julianday(created_at)) * 86400000.0) AS INTEGER),
                        created_at
                 FROM saga_steps WHERE tool_hash = ?1 AND status <> 'BEGIN' ORDER BY id",
            )?;
            let rows = st.query_map(params![identity], |r| {
                let status: String = r.get(0)?;
                let kind: Option<String> = r.get(1)?;
                let ms: Option<i64> = r.get(2)?;
                let at: Option<String> = r.get(3)?;
                Ok(CallRecord {
                    ok: status != "FAIL",
                    error_kind: kind,
                    latency_ms: ms.and_then(|m| u64::try_from(m).ok()),
                    at,
                })
            })?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
    }
}
