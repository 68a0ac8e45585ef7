//! Past conversations in and out (issue 49): `capsaga memory import` reads
//! sessions as JSON Lines ([`format`]) and indexes each exchange as an
//! episode of its sender, with its own date and session; `export` writes
//! the same format back.
//!
//! An import streams: one line at a time (each at most
//! [`format::MAX_LINE_BYTES`]), whole sessions gathered into batches of
//! about [`BATCH_EXCHANGES`] exchanges, each batch embedded (in groups of
//! [`EMBED_GROUP`], on [`crate::MemoryConfig::import_workers`] threads)
//! and inserted in **one
//! transaction**, so memory stays bounded and a crash leaves only whole
//! batches of whole sessions. Every exchange's id is what it is
//! ([`crate::episode_id`]), so importing a file again adds nothing, and
//! running an interrupted import again completes it (the exchanges stored
//! already are not even embedded again). A bad line is reported with its
//! number and skipped; [`check`] reads a whole input first, for an
//! operator who wants a file refused whole when any line is bad.

pub mod format;

use crate::error::{MemoryError, Result};
use crate::types::Episode;
use crate::{Memory, embed, rfc3339, score};
use format::{Exchange, next_line};
use jiff::Timestamp;
use serde::Serialize;
use std::collections::HashMap;
use std::io::{BufRead, Write};

/// Exchanges gathered before a batch is embedded and written.
pub const BATCH_EXCHANGES: usize = 256;

/// Texts embedded in one call of the model.
pub const EMBED_GROUP: usize = 32;

/// Bad lines listed in a report (more are counted).
pub const MAX_LISTED: usize = 1000;

/// A line that could not be imported.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BadLine {
    /// Its number, from 1.
    pub line: u64,
    /// Why.
    pub reason: String,
}

/// What an import did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    /// Lines read (blank ones included).
    pub lines: u64,
    /// Sessions read from good lines.
    pub sessions: u64,
    /// Exchanges in them.
    pub exchanges: u64,
    /// Episodes added.
    pub added: u64,
    /// Exchanges already in memory (imported before).
    pub already: u64,
    /// Bad lines (at most [`MAX_LISTED`]).
    pub bad: Vec<BadLine>,
    /// How many bad lines there were.
    pub bad_lines: u64,
}

/// Where an import is, for a progress bar.
#[derive(Debug, Clone, Copy, Default)]
pub struct Progress {
    /// Bytes of the input read.
    pub bytes: u64,
    /// Exchanges written or found already there.
    pub exchanges: u64,
}

/// Record the current line (`report.lines`) as bad.
fn bad(report: &mut Report, reason: String) {
    report.bad_lines += 1;
    if report.bad.len() < MAX_LISTED {
        report.bad.push(BadLine {
            line: report.lines,
            reason,
        });
    }
}

/// Read `reader` through, as an import would, and list its bad lines
/// (nothing is written): the first pass of an import that refuses a file
/// with any bad line.
///
/// # Errors
/// [`MemoryError::File`] when the input cannot be read.
pub fn check(reader: &mut dyn BufRead) -> Result<Report> {
    let mut r = Report::default();
    let mut bytes = 0;
    while let Some(l) = next_line(reader, format::MAX_LINE_BYTES, &mut bytes).map_err(read_err)? {
        r.lines += 1;
        match l.and_then(|t| {
            if t.trim().is_empty() {
                Ok(None)
            } else {
                format::parse(&t).map(Some)
            }
        }) {
            Ok(Some((_, x))) => {
                r.sessions += 1;
                r.exchanges += x.len() as u64;
            }
            Ok(None) => {}
            Err(why) => bad(&mut r, why),
        }
    }
    Ok(r)
}

fn read_err(e: std::io::Error) -> MemoryError {
    MemoryError::File {
        path: "(import input)".into(),
        reason: e.to_string(),
    }
}

/// One exchange waiting in a batch.
struct Pending {
    episode: Episode,
    text: String,
}

impl Memory {
    /// Import sessions from `reader` into `namespace` (see the module's
    /// documentation); bad lines are skipped and reported. `progress` is
    /// called after each batch.
    ///
    /// # Errors
    /// [`MemoryError::File`] (the input), [`MemoryError::Embed`],
    /// [`MemoryError::Sql`]: the batches written before stay (whole
    /// sessions), and running the import again completes it.
    pub fn import(
        &self,
        reader: &mut dyn BufRead,
        namespace: &str,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Report> {
        let mut r = Report::default();
        let mut p = Progress::default();
        let mut batch: Vec<Pending> = Vec::new();
        while let Some(l) =
            next_line(reader, format::MAX_LINE_BYTES, &mut p.bytes).map_err(read_err)?
        {
            r.lines += 1;
            let (s, xs) = match l.and_then(|t| {
                if t.trim().is_empty() {
                    Ok(None)
                } else {
                    format::parse(&t).map(Some)
                }
            }) {
                Ok(Some(v)) => v,
                Ok(None) => continue,
                Err(why) => {
                    bad(&mut r, why);
                    continue;
                }
            };
            r.sessions += 1;
            r.exchanges += xs.len() as u64;
            batch.extend(episodes(namespace, &s.sender, &s.session_id, xs));
            if batch.len() >= BATCH_EXCHANGES {
                self.write_batch(std::mem::take(&mut batch), &mut r, &mut p)?;
                progress(p);
            }
        }
        self.write_batch(batch, &mut r, &mut p)?;
        progress(p);
        Ok(r)
    }

    /// Embed and insert one batch in one transaction (the exchanges stored
    /// already are skipped before embedding).
    fn write_batch(&self, batch: Vec<Pending>, r: &mut Report, p: &mut Progress) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let n = batch.len() as u64;
        let known = {
            let ids: Vec<&str> = batch
                .iter()
                .map(|x| x.episode.episode_id.as_str())
                .collect();
            self.store.known_episodes(&ids)?
        };
        let mut todo: Vec<Pending> = batch
            .into_iter()
            .filter(|x| !known.contains(&x.episode.episode_id))
            .collect();
        self.importance(&mut todo)?;
        let vectors = self.embed_groups(&todo)?;
        let rows: Vec<_> = todo
            .iter()
            .zip(vectors)
            .map(|(x, v)| (x.episode.clone(), Some(embed::to_blob(&v))))
            .collect();
        let added = self
            .store
            .insert_episodes(&rows, &rfc3339(Timestamp::now()))? as u64;
        r.added += added;
        r.already += n - added;
        p.exchanges += n;
        Ok(())
    }

    /// The vectors of `todo`'s texts, in order: groups of [`EMBED_GROUP`]
    /// embedded by [`crate::MemoryConfig::import_workers`] threads at once (group `g` by
    /// thread `g mod workers`; a text's vector does not depend on its
    /// group, so neither does the result).
    fn embed_groups(&self, todo: &[Pending]) -> Result<Vec<Vec<f32>>> {
        let groups: Vec<&[Pending]> = todo.chunks(EMBED_GROUP).collect();
        let workers = self.cfg.import_workers.clamp(1, groups.len().max(1));
        let run = |w: usize| -> Result<Vec<(usize, Vec<Vec<f32>>)>> {
            let mut out = Vec::new();
            for (g, group) in groups.iter().enumerate().skip(w).step_by(workers) {
                let texts: Vec<&str> = group.iter().map(|x| x.text.as_str()).collect();
                out.push((g, self.embedder.embed(&texts)?));
            }
            Ok(out)
        };
        let mut done: Vec<(usize, Vec<Vec<f32>>)> = if workers == 1 {
            run(0)?
        } else {
            std::thread::scope(|s| {
                let handles: Vec<_> = (0..workers).map(|w| s.spawn(move || run(w))).collect();
                let mut all = Vec::new();
                for h in handles {
                    let part = h
                        .join()
                        .map_err(|_| MemoryError::Embed("an embedding thread panicked".into()))??;
                    all.extend(part);
                }
                Ok::<_, MemoryError>(all)
            })?
        };
        done.sort_by_key(|(g, _)| *g);
        Ok(done.into_iter().flat_map(|(_, vs)| vs).collect())
    }

    /// Importance of imported exchanges (as of a live turn's: novelty
    /// against the sender's stored episodes sharing a word with it and the
    /// batch's earlier ones, engagement, an answered exchange a success).
    fn importance(&self, todo: &mut [Pending]) -> Result<()> {
        let mut earlier: HashMap<(String, String), Vec<String>> = HashMap::new();
        for x in todo.iter_mut() {
            let e = &mut x.episode;
            let key = (e.namespace.clone(), e.sender.clone());
            let mut seen: Vec<String> = match score::fts_query(&e.user_message) {
                Some(q) => self
                    .store
                    .newest_matches(&e.namespace, &e.sender, &q, crate::NOVELTY_POOL)?
                    .into_iter()
                    .map(|o| o.user_message)
                    .collect(),
                None => Vec::new(),
            };
            let mine = earlier.entry(key).or_default();
            seen.extend(mine.iter().rev().take(crate::NOVELTY_POOL).cloned());
            let novelty = score::novelty(&e.user_message, seen.iter().map(String::as_str));
            let words = score::words(&e.user_message).count();
            e.importance = score::importance(
                novelty,
                score::engagement(words, e.seq as usize),
                score::outcome_quality(&e.outcome),
            );
            mine.push(e.user_message.clone());
        }
        Ok(())
    }

    /// Write the episodes of `namespace` (of `sender` when given) to `out`
    /// as sessions in the import format, one line per session. Returns the
    /// number of sessions written.
    ///
    /// # Errors
    /// [`MemoryError::File`] (writing), [`MemoryError::Sql`].
    pub fn export(
        &self,
        namespace: &str,
        sender: Option<&str>,
        out: &mut dyn Write,
    ) -> Result<u64> {
        let mut sessions = 0;
        let mut current: Option<(String, String)> = None;
        let mut xs: Vec<Exchange> = Vec::new();
        let mut flush = |who: &Option<(String, String)>, xs: &mut Vec<Exchange>| -> Result<()> {
            if let (Some((s, id)), false) = (who, xs.is_empty()) {
                let l = serde_json::to_string(&format::line(s, id, xs))
                    .map_err(|e| MemoryError::Invalid(e.to_string()))?;
                writeln!(out, "{l}").map_err(|e| MemoryError::File {
                    path: "(export output)".into(),
                    reason: e.to_string(),
                })?;
                sessions += 1;
            }
            xs.clear();
            Ok(())
        };
        self.store.each_episode(namespace, sender, |e| {
            let who = Some((e.sender.clone(), e.session_id.clone()));
            if who != current {
                flush(&current, &mut xs)?;
                current = who;
            }
            xs.push(Exchange {
                seq: xs.len() as u64 + 1,
                at: e.started_at,
                user: e.user_message,
                answer: e.final_response,
            });
            Ok(())
        })?;
        flush(&current, &mut xs)?;
        Ok(sessions)
    }
}

/// The episodes of one session's exchanges (importance and vector come
/// later), their ids counting repeats within one instant.
fn episodes(namespace: &str, sender: &str, session: &str, xs: Vec<Exchange>) -> Vec<Pending> {
    let mut repeats: HashMap<(String, String, Option<String>), u64> = HashMap::new();
    xs.into_iter()
        .map(|x| {
            let n = repeats
                .entry((x.at.clone(), x.user.clone(), x.answer.clone()))
                .or_default();
            let id = crate::episode_id(
                namespace,
                sender,
                session,
                &x.at,
                &x.user,
                x.answer.as_deref(),
                *n,
            );
            *n += 1;
            Pending {
                text: format!("{}\n{}", x.user, x.answer.as_deref().unwrap_or("")),
                episode: Episode {
                    trace_id: format!("import:{}", &id[2..]),
                    episode_id: id,
                    session_id: session.to_string(),
                    sender: sender.to_string(),
                    namespace: namespace.to_string(),
                    started_at: x.at,
                    seq: x.seq,
                    user_message: x.user,
                    outcome: if x.answer.is_some() {
                        "success"
                    } else {
                        "no_answer"
                    }
                    .into(),
                    final_response: x.answer,
                    summary: None,
                    importance: 0.5,
                    reflected: false,
                    archived: false,
                },
            }
        })
        .collect()
}
