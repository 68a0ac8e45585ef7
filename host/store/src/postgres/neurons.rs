//! `neurons`: every version of every agent-written tool, shared by every
//! host (a version proposed on one host is seen, approved and activated on
//! all). Each write appends a `NEURON` record to the one log.

use super::super::{
    NeuronOpError, NeuronRow, NeuronStore, NewNeuron, Removed, StoreError, Transition,
};
use super::log::log_record;
use super::{Conn, PgStore, execute, get, i64_of, query, query_opt, to_json};
use crate::clock::now_rfc3339;
use crate::records;
use async_trait::async_trait;
use capsaga_core::neuron::Status;
use capsaga_core::neuron::fitness::CallRecord;
use tokio_postgres::types::ToSql;

/// The columns read, with the provenance found through the turn's trace.
const SELECT: &str = "SELECT n.name, n.version, n.identity, n.runner_hash, n.status, n.meta, n.source, n.examples, n.report, n.granted, n.saga_id, n.step_seq, n.decided_by, n.note, n.created_at, n.updated_at,
    (SELECT t.trace_id FROM traces t WHERE t.saga_id = n.saga_id ORDER BY t.started_at LIMIT 1),
    (SELECT s.value ->> 'model' FROM traces t,
        jsonb_array_elements(CASE WHEN jsonb_typeof(t.trace::jsonb -> 'steps') = 'array' THEN t.trace::jsonb -> 'steps' ELSE '[]'::jsonb END) AS s(value)
       WHERE t.saga_id = n.saga_id AND s.value ->> 'type' = 'thought' LIMIT 1)
    FROM neurons n";

async fn many(
    c: &Conn,
    filter: &str,
    p: &[&(dyn ToSql + Sync)],
) -> Result<Vec<NeuronRow>, StoreError> {
    let rows = query(c, &format!("{SELECT} {filter}"), p).await?;
    rows.iter().map(crate::decode::neuron).collect()
}

async fn one(
    c: &Conn,
    filter: &str,
    p: &[&(dyn ToSql + Sync)],
) -> Result<Option<NeuronRow>, StoreError> {
    Ok(many(c, filter, p).await?.into_iter().next())
}

#[async_trait]
impl NeuronStore for PgStore {
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
        self.write(move |c| {
            Box::pin(async move {
                if let Some(row) = one(c, "WHERE n.identity = $1", &[&identity]).await? {
                    return Ok((row, false));
                }
                // Versions of one name are numbered under a lock on the name
                // (two hosts proposing at once get 1 and 2, not 1 and 1).
                c.execute(
                    "SELECT pg_advisory_xact_lock(hashtext('capsaga-neuron:' || $1))",
                    &[&name],
                )
                .await?;
                let v = query_opt(
                    c,
                    "SELECT COALESCE(MAX(version), 0) + 1 FROM neurons WHERE name = $1",
                    &[&name],
                )
                .await?
                .ok_or_else(|| StoreError::Decode("no version".into()))?;
                let version: i64 = get(&v, 0)?;
                let version = u32::try_from(version)
                    .map_err(|_| StoreError::Decode(format!("neuron version {version}")))?;
                let mut meta = meta.clone();
                meta.version = version.to_string();
                let now = now_rfc3339();
                execute(
                    c,
                    "INSERT INTO neurons (name, version, identity, runner_hash, status, meta, source, examples, report, granted, saga_id, step_seq, created_at, updated_at)
                     VALUES ($1, $2, $3, $4, 'proposed', $5, $6, $7, $11, '[]', $8, $9, $10, $10)",
                    &[
                        &name,
                        &i64::from(version),
                        &identity,
                        &runner_hash,
                        &to_json(&meta),
                        &source,
                        &to_json(&examples),
                        &saga_id,
                        &step_seq.map(i64_of),
                        &now,
                        &report.as_ref().map(to_json),
                    ],
                )
                .await?;
                let proposed = records::neuron_proposed(
                    &name,
                    i64::from(version),
                    &identity,
                    saga_id.as_deref(),
                    step_seq,
                );
                log_record(c, &proposed, &now).await?;
                let row = one(c, "WHERE n.identity = $1", &[&identity])
                    .await?
                    .ok_or_else(|| StoreError::Decode("inserted neuron not found".into()))?;
                Ok((row, true))
            })
        })
        .await
    }

    async fn transition_neuron(&self, t: &Transition<'_>) -> Result<NeuronRow, NeuronOpError> {
        let version32 = t.version;
        let (name, version, to, by, note, granted, report) = (
            t.name.to_owned(),
            i64::from(t.version),
            t.to,
            t.by.to_owned(),
            t.note.map(str::to_owned),
            t.granted.map(<[String]>::to_vec),
            t.report.cloned(),
        );
        self.write(move |c| {
            Box::pin(async move {
                // The name's rows locked: one host's activation retires the
                // other active version before another host reads it.
                c.execute(
                    "SELECT pg_advisory_xact_lock(hashtext('capsaga-neuron:' || $1))",
                    &[&name],
                )
                .await?;
                let Some(cur) = one(c, "WHERE n.name = $1 AND n.version = $2", &[&name, &version]).await?
                else {
                    return Ok(Err(NeuronOpError::NotFound(format!("{name} version {version}"))));
                };
                if !cur.status.can_become(to) {
                    return Ok(Err(NeuronOpError::Refused {
                        name: name.clone(),
                        version: cur.version,
                        from: cur.status,
                        to,
                    }));
                }
                let now = now_rfc3339();
                if to == Status::Active {
                    let others = many(
                        c,
                        "WHERE n.name = $1 AND n.status = 'active' AND n.version <> $2",
                        &[&name, &version],
                    )
                    .await?;
                    for o in others {
                        let note = format!("superseded by version {version}");
                        execute(
                            c,
                            "UPDATE neurons SET status = 'retired', decided_by = $1, note = $2, updated_at = $3 WHERE name = $4 AND version = $5",
                            &[&by, &note, &now, &o.name, &i64::from(o.version)],
                        )
                        .await?;
                        log_record(c, &records::neuron_superseded(&o, &by, &note), &now).await?;
                    }
                }
                let granted_json = granted.as_ref().map(to_json);
                let report_json = report.as_ref().map(to_json);
                execute(
                    c,
                    "UPDATE neurons SET status = $1, decided_by = $2, note = COALESCE($3, note), granted = COALESCE($4, granted), report = COALESCE($5, report), updated_at = $6 WHERE name = $7 AND version = $8",
                    &[&to.as_str(), &by, &note, &granted_json, &report_json, &now, &name, &version],
                )
                .await?;
                let moved = Transition {
                    name: &name,
                    version: version32,
                    to,
                    by: &by,
                    note: note.as_deref(),
                    granted: granted.as_deref(),
                    report: None,
                };
                let moved = records::neuron_moved(&moved, &cur.identity);
                log_record(c, &moved, &now).await?;
                let row = one(c, "WHERE n.name = $1 AND n.version = $2", &[&name, &version])
                    .await?
                    .ok_or_else(|| StoreError::Decode("updated neuron not found".into()))?;
                Ok(Ok(row))
            })
        })
        .await?
    }

    async fn remove_pending_neuron(&self, identity: &str, by: &str) -> Result<Removed, StoreError> {
        let (identity, by) = (identity.to_owned(), by.to_owned());
        self.write(move |c| {
            Box::pin(async move {
                let Some(cur) = one(c, "WHERE n.identity = $1", &[&identity]).await? else {
                    return Ok(Removed::Absent);
                };
                if !cur.status.is_pending() {
                    return Ok(Removed::Kept(cur.status));
                }
                execute(c, "DELETE FROM neurons WHERE identity = $1", &[&identity]).await?;
                let now = now_rfc3339();
                log_record(c, &records::neuron_removed(&cur, &identity, &by), &now).await?;
                Ok(Removed::Removed)
            })
        })
        .await
    }

    async fn neurons(&self, name: Option<&str>) -> Result<Vec<NeuronRow>, StoreError> {
        let c = self.conn().await?;
        many(
            &c,
            "WHERE ($1::text IS NULL OR n.name = $1) ORDER BY n.name, n.version",
            &[&name],
        )
        .await
    }

    async fn neuron(
        &self,
        name: &str,
        version: Option<u32>,
    ) -> Result<Option<NeuronRow>, StoreError> {
        let c = self.conn().await?;
        let version = version.map(i64::from);
        one(
            &c,
            "WHERE n.name = $1 AND ($2::bigint IS NULL OR n.version = $2) ORDER BY n.version DESC LIMIT 1",
            &[&name, &version],
        )
        .await
    }

    async fn neuron_by_identity(&self, identity: &str) -> Result<Option<NeuronRow>, StoreError> {
        let c = self.conn().await?;
        one(&c, "WHERE n.identity = $1", &[&identity]).await
    }

    async fn calls_of(&self, identity: &str) -> Result<Vec<CallRecord>, StoreError> {
        let c = self.conn().await?;
        let rows = query(
            &c,
            "SELECT status, error::jsonb ->> 'kind',
                    round(extract(epoch FROM (updated_at::timestamptz - created_at::timestamptz)) * 1000)::bigint,
                    created_at
             FROM saga_steps WHERE tool_hash = $1 AND status <> 'BEGIN' ORDER BY id",
            &[&identity],
        )
        .await?;
        rows.iter()
            .map(|r| {
                let status: String = get(r, 0)?;
                let kind: Option<String> = get(r, 1)?;
                let ms: Option<i64> = get(r, 2)?;
                let at: Option<String> = get(r, 3)?;
                Ok(CallRecord {
                    ok: status != "FAIL",
                    error_kind: kind,
                    latency_ms: ms.and_then(|m| u64::try_from(m).ok()),
                    at,
                })
            })
            .collect()
    }
}
