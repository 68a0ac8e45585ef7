//! Reflection's selection (seed 004 §6.1) with the later value winning
//! (issue 49), and retention (§4.4).

use crate::error::Result;
use crate::types::Episode;
use crate::{Cluster, Memory, SEMANTIC_SCAN, embed, reflect, rfc3339, supersede};
use jiff::Timestamp;
use std::collections::HashMap;

impl Memory {
    /// Reflection's selection (seed 004 §6.1): unreflected episodes of
    /// `namespace` with importance over 0.5, embedded (once, stored),
    /// grouped at cosine 0.75; groups of at least `min_size`. The later
    /// value wins: an episode superseded by a later one of its sender
    /// ([`supersede::superseded`] at [`supersede::EPISODE_SAME_SUBJECT`],
    /// among the candidates and the sender's other episodes) is never
    /// distilled: it moves to the group's `superseded`, and a group left
    /// with no current episode is dropped.
    ///
    /// # Errors
    /// [`crate::MemoryError::Embed`], [`crate::MemoryError::Dimension`],
    /// [`crate::MemoryError::Sql`].
    pub fn reflection_clusters(&self, namespace: &str, min_size: usize) -> Result<Vec<Cluster>> {
        let cands = self.store.reflection_candidates(namespace, 0.5, 500)?;
        let mut eps = Vec::with_capacity(cands.len());
        let mut vecs = Vec::with_capacity(cands.len());
        for (e, blob) in cands {
            let v = match blob {
                Some(b) => embed::from_blob(
                    &format!("episode {}", e.episode_id),
                    &b,
                    self.embedder.dim(),
                )?,
                None => {
                    let text = format!(
                        "{}\n{}",
                        e.user_message,
                        e.final_response.as_deref().unwrap_or("")
                    );
                    let v = self.embedder.embed_one(&text)?;
                    self.store
                        .set_episode_embedding(&e.episode_id, &embed::to_blob(&v))?;
                    v
                }
            };
            eps.push(e);
            vecs.push(v);
        }
        let stale = self.stale(namespace, &eps, &vecs)?;
        Ok(
            reflect::cluster(&vecs, reflect::CLUSTER_THRESHOLD, min_size)
                .into_iter()
                .filter_map(|g| {
                    let (old, new): (Vec<usize>, Vec<usize>) =
                        g.into_iter().partition(|i| stale[*i]);
                    (!new.is_empty()).then(|| Cluster {
                        namespace: namespace.to_string(),
                        episodes: new.into_iter().map(|i| eps[i].clone()).collect(),
                        superseded: old.into_iter().map(|i| eps[i].episode_id.clone()).collect(),
                    })
                })
                .collect(),
        )
    }

    /// Which of the candidate episodes `eps` (with their vectors) a later
    /// episode of the same sender supersedes: compared with each other
    /// and with the sender's stored episodes about the same subject.
    fn stale(&self, namespace: &str, eps: &[Episode], vecs: &[Vec<f32>]) -> Result<Vec<bool>> {
        let dim = self.embedder.dim();
        let mut others: Vec<(Episode, Vec<f32>)> = Vec::new();
        let mut senders: Vec<&str> = eps.iter().map(|e| e.sender.as_str()).collect();
        senders.sort_unstable();
        senders.dedup();
        for sender in senders {
            let mine: Vec<usize> = (0..eps.len())
                .filter(|&i| eps[i].sender == sender)
                .collect();
            let mut near = Vec::new();
            for (id, blob) in self
                .store
                .episode_vectors(namespace, Some(sender), SEMANTIC_SCAN)?
            {
                if mine.iter().any(|&i| eps[i].episode_id == id) {
                    continue;
                }
                let v = embed::from_blob(&format!("episode {id}"), &blob, dim)?;
                if mine
                    .iter()
                    .any(|&i| crate::score::dot(&v, &vecs[i]) >= supersede::EPISODE_SAME_SUBJECT)
                {
                    near.push((id, v));
                }
            }
            let ids: Vec<&str> = near.iter().map(|(id, _)| id.as_str()).collect();
            let mut by_id: HashMap<String, Vec<f32>> = near.iter().cloned().collect();
            for e in self.store.episodes_by_id(&ids)? {
                if let Some(v) = by_id.remove(&e.episode_id) {
                    others.push((e, v));
                }
            }
        }
        let statements: Vec<supersede::Statement<'_>> = eps
            .iter()
            .zip(vecs)
            .chain(others.iter().map(|(e, v)| (e, v)))
            .map(|(e, v)| supersede::Statement {
                sender: &e.sender,
                at: &e.started_at,
                text: &e.user_message,
                vector: v,
            })
            .collect();
        let by = supersede::superseded(&statements, supersede::EPISODE_SAME_SUBJECT);
        Ok(by[..eps.len()].iter().map(Option::is_some).collect())
    }

    /// Retention (seed 004 §4.4): archive out of the index the episodes
    /// under the importance floor older than the age limit, as of `now`;
    /// logged. Returns their ids.
    ///
    /// # Errors
    /// [`MemoryError::Sql`].
    pub fn retention(&self, now: Timestamp) -> Result<Vec<String>> {
        let before = now
            .checked_sub(jiff::SignedDuration::from_hours(
                24 * self.cfg.archive_after_days,
            ))
            .unwrap_or(now);
        let ids = self
            .store
            .archive_old(self.cfg.archive_below, &rfc3339(before))?;
        if !ids.is_empty() {
            self.store.log(
                &rfc3339(now),
                "archive",
                &format!("{} episode(s)", ids.len()),
                &ids.join(" "),
            )?;
        }
        Ok(ids)
    }
}
