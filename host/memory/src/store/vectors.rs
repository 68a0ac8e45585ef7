//! The vectors a search scans, held in memory between searches (issue 49):
//! a sender's episode vectors, newest first, as rows of 8-bit integers
//! with one scale each, read from SQLite once and again only when the
//! scope's version (`episode_versions`, kept by triggers: schema 4) has
//! moved, whichever connection wrote. 100k episodes of 384 dimensions take
//! about 39 MB; [`VECTOR_CACHE_BYTES`] bounds the whole.
//!
//! The 8-bit rows only choose which episodes become candidates (the
//! nearest to the query, and their neighbours); the ranking itself uses
//! the stored f32 vectors of the candidates.

use super::Store;
use crate::error::{MemoryError, Result};
use rusqlite::params;
use std::collections::HashMap;
use std::sync::Arc;

/// Most bytes of vectors held in memory across scopes; past it the scopes
/// not used longest are dropped (read again from SQLite when searched).
pub const VECTOR_CACHE_BYTES: usize = 96 << 20;

/// The vectors of one scope (a namespace, or a namespace and sender),
/// newest first: row `r` is `codes[r*dim..(r+1)*dim]` times `scales[r]`.
#[derive(Debug, Default)]
pub struct ScopeVectors {
    /// Dimension of a row.
    pub dim: usize,
    /// Each row's episode id.
    pub ids: Vec<String>,
    /// The rows' 8-bit codes, one row after the other.
    pub codes: Vec<i8>,
    /// Each row's scale (its largest absolute component over 127).
    pub scales: Vec<f32>,
}

impl ScopeVectors {
    /// How many rows.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Row `r`'s codes.
    pub fn row(&self, r: usize) -> &[i8] {
        &self.codes[r * self.dim..(r + 1) * self.dim]
    }

    /// The dot product of `q` (f32, `dim` long) with each row, in row
    /// order: the cosine when both are unit vectors, to about 1 %.
    pub fn dots(&self, q: &[f32]) -> Vec<f32> {
        self.codes
            .chunks_exact(self.dim.max(1))
            .zip(&self.scales)
            .map(|(row, s)| {
                // Eight lanes of partial sums: a loop the compiler
                // vectorises.
                let mut acc = [0f32; 8];
                for (c, x) in row.chunks_exact(8).zip(q.chunks_exact(8)) {
                    for ((a, c), x) in acc.iter_mut().zip(c).zip(x) {
                        *a += f32::from(*c) * x;
                    }
                }
                let tail = row.len() / 8 * 8;
                let rest: f32 = row[tail..]
                    .iter()
                    .zip(&q[tail..])
                    .map(|(c, x)| f32::from(*c) * x)
                    .sum();
                (acc.iter().sum::<f32>() + rest) * s
            })
            .collect()
    }

    /// The dot product of rows `a` and `b`.
    pub fn dot_rows(&self, a: usize, b: usize) -> f32 {
        let (x, y) = (self.row(a), self.row(b));
        let mut acc = [0i32; 8];
        for (u, v) in x.chunks_exact(8).zip(y.chunks_exact(8)) {
            for ((a, u), v) in acc.iter_mut().zip(u).zip(v) {
                *a += i32::from(*u) * i32::from(*v);
            }
        }
        let tail = x.len() / 8 * 8;
        let rest: i32 = x[tail..]
            .iter()
            .zip(&y[tail..])
            .map(|(u, v)| i32::from(*u) * i32::from(*v))
            .sum();
        (acc.iter().sum::<i32>() + rest) as f32 * self.scales[a] * self.scales[b]
    }

    fn bytes(&self) -> usize {
        self.codes.len()
            + self.scales.len() * 4
            + self.ids.iter().map(|i| i.len() + 24).sum::<usize>()
    }

    fn push(&mut self, id: &str, v: &[f32]) {
        let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
        let scale = if max > 0.0 { max / 127.0 } else { 1.0 };
        self.codes.extend(
            v.iter()
                .map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8),
        );
        self.scales.push(scale);
        self.ids.push(id.to_string());
    }
}

/// A cached scope: (namespace, sender, limit).
type ScopeKey = (String, Option<String>, usize);

/// A cached scope's entry: the scope's version when read, when it was
/// last used, its vectors.
type ScopeEntry = (i64, u64, Arc<ScopeVectors>);

/// The cached scopes.
#[derive(Default)]
pub(super) struct VectorCache {
    scopes: HashMap<ScopeKey, ScopeEntry>,
    clock: u64,
}

impl Store {
    /// The vectors of the unarchived episodes of `namespace` (of `sender`
    /// when given), newest first, at most `limit`, normalised to unit
    /// length and coded in 8 bits ([`ScopeVectors`]): from memory when
    /// the scope has not changed since they were read, else read again.
    ///
    /// # Errors
    /// [`MemoryError::Dimension`] for a stored vector of another size,
    /// [`MemoryError::Sql`].
    pub fn scan_vectors(
        &self,
        namespace: &str,
        sender: Option<&str>,
        limit: usize,
    ) -> Result<Arc<ScopeVectors>> {
        let version = self.with(|c| {
            let v: i64 = match sender {
                Some(s) => c
                    .prepare_cached(
                        "SELECT coalesce(max(v), 0) FROM episode_versions WHERE namespace = ?1 AND sender = ?2",
                    )?
                    .query_row(params![namespace, s], |r| r.get(0))?,
                None => c
                    .prepare_cached(
                        "SELECT coalesce(sum(v), 0) FROM episode_versions WHERE namespace = ?1",
                    )?
                    .query_row(params![namespace], |r| r.get(0))?,
            };
            Ok(v)
        })?;
        let key = (namespace.to_string(), sender.map(str::to_string), limit);
        {
            let mut cache = self.lock_vectors()?;
            cache.clock += 1;
            let now = cache.clock;
            if let Some((v, used, vs)) = cache.scopes.get_mut(&key)
                && *v == version
            {
                *used = now;
                return Ok(vs.clone());
            }
        }
        // Read after the version: what is read is at least that new (a
        // write in between only makes the next search read again).
        let dim = self.dim;
        let mut vs = ScopeVectors {
            dim,
            ..ScopeVectors::default()
        };
        let mut row = Vec::with_capacity(dim);
        self.each_episode_vector(namespace, sender, limit, |id, blob| {
            if blob.len() != dim * 4 {
                return Err(MemoryError::Dimension {
                    what: format!("episode {id}"),
                    expected: dim,
                    found: blob.len() / 4,
                });
            }
            row.clear();
            row.extend(
                blob.chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            );
            let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
            if norm > 0.0 {
                row.iter_mut().for_each(|x| *x /= norm);
            }
            vs.push(id, &row);
            Ok(())
        })?;
        let vs = Arc::new(vs);
        let mut cache = self.lock_vectors()?;
        let now = cache.clock;
        cache.scopes.insert(key, (version, now, vs.clone()));
        // Within the budget: the scopes used longest ago leave first.
        let mut total: usize = cache.scopes.values().map(|(_, _, v)| v.bytes()).sum();
        while total > VECTOR_CACHE_BYTES && cache.scopes.len() > 1 {
            let Some(oldest) = cache
                .scopes
                .iter()
                .min_by_key(|(_, (_, used, _))| *used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some((_, _, v)) = cache.scopes.remove(&oldest) {
                total -= v.bytes();
            }
        }
        Ok(vs)
    }

    /// Drop every scope held in memory (the next search of each reads its
    /// vectors from SQLite again): for a benchmark's baseline, or to give
    /// the memory back.
    ///
    /// # Errors
    /// [`MemoryError::Sql`] when the cache's lock is poisoned.
    pub fn drop_vector_cache(&self) -> Result<()> {
        self.lock_vectors()?.scopes.clear();
        Ok(())
    }

    fn lock_vectors(&self) -> Result<std::sync::MutexGuard<'_, VectorCache>> {
        self.vectors
            .lock()
            .map_err(|_| MemoryError::Sql("the vector cache lock is poisoned".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eight_bit_rows_keep_the_cosine_to_about_one_percent() {
        let a = crate::embed::normalise(
            (0..384)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
                .collect(),
        );
        let b = crate::embed::normalise(
            (0..384)
                .map(|i| ((i * 53 % 89) as f32 - 44.0) / 3.0)
                .collect(),
        );
        let mut vs = ScopeVectors {
            dim: 384,
            ..ScopeVectors::default()
        };
        vs.push("a", &a);
        vs.push("b", &b);
        let exact = crate::score::dot(&a, &b);
        assert!((vs.dots(&a)[1] - exact).abs() < 0.01);
        assert!((vs.dots(&a)[0] - 1.0).abs() < 0.01);
        assert!((vs.dot_rows(0, 1) - exact).abs() < 0.01);
    }
}
