//! The ranking of episodes for a query (issue 49): one order, in relevance,
//! the same every time, whose first k cover k different sessions when the
//! candidates hold that many. Pure: scored candidates in, an order out.
//!
//! 1. **Relevance** of an exchange: the cosine of its vector to the
//!    query's, plus [`Params::w_bm25`] times its BM25 score over the best
//!    BM25 score of the candidates (the hybrid of dense and keyword
//!    retrieval; an exchange not embedded yet counts by words only), plus
//!    [`Params::w_window`] when the question names a time and the exchange
//!    happened then.
//! 2. **The later value wins**: of two candidates of one sender where the
//!    later gives a new value of the earlier's subject (the cosine of
//!    their vectors at least [`Params::same_subject`] and their value
//!    words differ, or at least [`Params::change_subject`] when the later
//!    says that something changed), the
//!    later one (by the exchanges' own dates) is placed just above the
//!    earlier one when it ranked below it. Dates are walked in order, so a
//!    value changed twice ends with the last change first. When the
//!    question names a time, an exchange outside it is never placed above
//!    one inside it (the value then is asked for, not the latest).
//! 3. **Sessions**: each session counts once, by its best exchange; the
//!    sessions are taken by maximal marginal relevance (Carbonell and
//!    Goldstein 1998): each next one maximises
//!    `λ·relevance − (1−λ)·(greatest cosine to a session already taken)`,
//!    so that near-copies of one piece of evidence do not fill the top.
//!    After every session's best exchange come the other exchanges, by
//!    relevance.
//!
//! Ties are broken by the later date, then the smaller key (an episode id,
//! derived from the exchange itself), so two ingestions of the same
//! conversations rank them the same way. The order of the first `n` does
//! not depend on how many are asked for: a longer limit extends it.

use crate::score::dot;
use std::cmp::Ordering;
use std::collections::BTreeSet;

/// One candidate exchange.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// Its session (its sender's: two senders never share one).
    pub session: String,
    /// When it happened, seconds since the epoch.
    pub at: i64,
    /// The tie-breaker (the episode id).
    pub key: String,
    /// Its cosine to the query, when it has a vector.
    pub cosine: Option<f32>,
    /// Its BM25 score (larger is better), when its words matched.
    pub bm25: Option<f64>,
    /// Its unit vector, when it has one.
    pub vector: Option<Vec<f32>>,
    /// Whether it happened in the time the question names.
    pub in_window: bool,
    /// Whether its user's words say that something changed
    /// ([`crate::supersede::states_change`]).
    pub states_change: bool,
    /// Who said it: the later-value rule links exchanges of one sender
    /// only (a search over a namespace mixes senders).
    pub sender: String,
    /// The words of its user message that carry a value
    /// ([`crate::supersede::values`]).
    pub values: BTreeSet<String>,
    /// The words of its user message that name things
    /// ([`crate::supersede::subject_words`]).
    pub subject: BTreeSet<String>,
}

/// The ranking's weights (see the module's documentation).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// Weight of the normalised BM25 score beside the cosine.
    pub w_bm25: f64,
    /// Bonus of an exchange in the time the question names.
    pub w_window: f64,
    /// Cosine between two exchanges from which they are about one subject.
    pub same_subject: f32,
    /// The same, when the later exchange says that something changed
    /// ("I moved the dentist to Thursday" shares few words with "the
    /// dentist is on Tuesday").
    pub change_subject: f32,
    /// The same, when the later exchange says that something changed and
    /// names a thing the earlier one names (a word of both
    /// [`Candidate::subject`]s: "the *dentist* moved me to June" after
    /// "my *dentist* appointment is on March 3rd").
    pub change_shared_word: f32,
    /// How many of the most relevant candidates the later-value rule
    /// compares pairwise.
    pub later_pool: usize,
    /// MMR's λ: 1 is relevance alone.
    pub mmr_lambda: f64,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            w_bm25: 0.1,
            w_window: 0.35,
            same_subject: 0.6,
            change_subject: 0.5,
            change_shared_word: 0.25,
            later_pool: 40,
            mmr_lambda: 0.85,
        }
    }
}

/// How far above the earlier one a later value is placed.
const LATER_MARGIN: f64 = 1e-6;

/// The relevance of each candidate (step 1).
pub fn relevance(cands: &[Candidate], p: &Params) -> Vec<f64> {
    let best = cands.iter().filter_map(|c| c.bm25).fold(0.0_f64, f64::max);
    cands
        .iter()
        .map(|c| {
            let words = match c.bm25 {
                Some(b) if best > 0.0 => p.w_bm25 * (b / best).max(0.0),
                _ => 0.0,
            };
            let window = if c.in_window { p.w_window } else { 0.0 };
            f64::from(c.cosine.unwrap_or(0.0)) + words + window
        })
        .collect()
}

fn cos(a: &Candidate, b: &Candidate) -> Option<f32> {
    match (&a.vector, &b.vector) {
        (Some(x), Some(y)) => Some(dot(x, y)),
        _ => None,
    }
}

/// Higher score first, then the later date, then the smaller key.
fn better(cands: &[Candidate], score: &[f64], a: usize, b: usize) -> Ordering {
    score[b]
        .total_cmp(&score[a])
        .then_with(|| cands[b].at.cmp(&cands[a].at))
        .then_with(|| cands[a].key.cmp(&cands[b].key))
}

/// Whether the later candidate `i` gives a new value of the subject of
/// the earlier `j`: both of one sender, and either `i` says that
/// something changed and their cosine is at least
/// [`Params::change_subject`] (or [`Params::change_shared_word`] when
/// the two name a thing in common), or their cosine is at least
/// [`Params::same_subject`] and their values differ
/// ([`crate::supersede::values_disagree`]). The cosine alone is not
/// enough: two exchanges on one topic that neither state a change nor
/// give different values (a question asked again, an answer in other
/// words) are not a change, and linking them lifted later exchanges
/// above the evidence of paraphrased questions.
fn same_subject(cands: &[Candidate], i: usize, j: usize, p: &Params) -> bool {
    let (a, b) = (&cands[i], &cands[j]);
    if a.sender != b.sender {
        return false;
    }
    let Some(c) = cos(a, b) else {
        return false;
    };
    (a.states_change
        && (c >= p.change_subject
            || (c >= p.change_shared_word && !a.subject.is_disjoint(&b.subject))))
        || (c >= p.same_subject && crate::supersede::values_disagree(&b.values, &a.values))
}

/// Step 2: each candidate's score after the later-value rule. An earlier
/// candidate `j` takes part when it is among the [`Params::later_pool`]
/// most relevant, or has been lifted to their level by a still earlier
/// one (so a value changed twice ends with the last change first even
/// when the changes share few words with the question); the later one
/// may be any candidate.
pub fn later_wins(cands: &[Candidate], rel: &[f64], p: &Params) -> Vec<f64> {
    let mut score = rel.to_vec();
    if p.later_pool == 0 {
        return score;
    }
    let mut by_rel: Vec<usize> = (0..cands.len()).collect();
    by_rel.sort_by(|&a, &b| better(cands, rel, a, b));
    let Some(&last) = by_rel.get(p.later_pool.min(by_rel.len()).saturating_sub(1)) else {
        return score;
    };
    let floor = rel[last];
    // Oldest first, so that a later value lifted above an earlier one can
    // lift a still later one above itself.
    let mut order: Vec<usize> = (0..cands.len()).collect();
    order.sort_by(|&a, &b| {
        cands[a]
            .at
            .cmp(&cands[b].at)
            .then_with(|| cands[a].key.cmp(&cands[b].key))
    });
    for (k, &i) in order.iter().enumerate() {
        for &j in &order[..k] {
            // A time the question names wins over "later": an exchange
            // outside it never passes one inside it.
            if cands[j].at < cands[i].at
                && score[j] >= floor
                && score[i] <= score[j]
                && (cands[i].in_window || !cands[j].in_window)
                && same_subject(cands, i, j, p)
            {
                score[i] = score[j] + LATER_MARGIN;
            }
        }
    }
    score
}

/// The order of `cands` (indices), at most `limit` (see the module's
/// documentation).
pub fn rank(cands: &[Candidate], p: &Params, limit: usize) -> Vec<usize> {
    let rel = relevance(cands, p);
    let score = later_wins(cands, &rel, p);
    let mut order: Vec<usize> = (0..cands.len()).collect();
    order.sort_by(|&a, &b| better(cands, &score, a, b));
    // Each session's best exchange (the first of it in `order`).
    let mut seen = std::collections::HashSet::new();
    let (mut heads, mut rest) = (Vec::new(), Vec::new());
    for i in order {
        if seen.insert(cands[i].session.as_str()) {
            heads.push(i);
        } else {
            rest.push(i);
        }
    }
    let mut out = mmr(cands, &score, heads, p.mmr_lambda, limit);
    out.extend(rest);
    out.truncate(limit);
    out
}

/// Maximal marginal relevance over `heads` (sorted best first): the
/// first `limit` picks, then the others in their order.
fn mmr(
    cands: &[Candidate],
    score: &[f64],
    heads: Vec<usize>,
    lambda: f64,
    limit: usize,
) -> Vec<usize> {
    if lambda >= 1.0 {
        return heads;
    }
    let mut left = heads;
    let mut picked: Vec<usize> = Vec::new();
    // The greatest cosine of each remaining head to the picked ones.
    let mut near = vec![f64::NEG_INFINITY; left.len()];
    while !left.is_empty() && picked.len() < limit {
        let value = |k: usize| {
            let redundancy = if picked.is_empty() {
                0.0
            } else {
                near[k].max(0.0)
            };
            lambda * score[left[k]] - (1.0 - lambda) * redundancy
        };
        // `left` stays in the relevance order, so the first of equal values
        // is the better one by the tie rule.
        let mut best = 0;
        for k in 1..left.len() {
            if value(k) > value(best) {
                best = k;
            }
        }
        let chosen = left.remove(best);
        near.remove(best);
        for (k, &i) in left.iter().enumerate() {
            if let Some(c) = cos(&cands[i], &cands[chosen]) {
                near[k] = near[k].max(f64::from(c));
            }
        }
        picked.push(chosen);
    }
    picked.extend(left);
    picked
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(v: &[f32]) -> Vec<f32> {
        crate::embed::normalise(v.to_vec())
    }

    fn cand(session: &str, at: i64, cosine: f32, vector: &[f32]) -> Candidate {
        Candidate {
            session: session.into(),
            at,
            key: format!("e-{session}-{at}"),
            cosine: Some(cosine),
            bm25: None,
            vector: Some(unit(vector)),
            in_window: false,
            states_change: false,
            sender: "u".into(),
            // Each statement its own value (so that two of one subject
            // disagree), unless a test says otherwise.
            values: BTreeSet::from([format!("v-{session}")]),
            subject: BTreeSet::new(),
        }
    }

    fn sessions(cands: &[Candidate], order: &[usize]) -> Vec<String> {
        order.iter().map(|&i| cands[i].session.clone()).collect()
    }

    #[test]
    fn one_exchange_per_session_first_then_the_rest() {
        let c = vec![
            cand("a", 1, 0.9, &[1.0, 0.0, 0.0]),
            cand("a", 2, 0.8, &[0.0, 1.0, 0.0]),
            cand("a", 3, 0.7, &[0.0, 0.0, 1.0]),
            cand("b", 4, 0.5, &[0.0, 1.0, 1.0]),
            cand("c", 5, 0.4, &[1.0, 1.0, 1.0]),
        ];
        let p = Params {
            mmr_lambda: 1.0,
            same_subject: 2.0,
            ..Params::default()
        };
        assert_eq!(sessions(&c, &rank(&c, &p, 3)), ["a", "b", "c"]);
        assert_eq!(sessions(&c, &rank(&c, &p, 10)), ["a", "b", "c", "a", "a"]);
    }

    #[test]
    fn a_longer_limit_extends_the_same_order() {
        let c: Vec<Candidate> = (0..30)
            .map(|i| {
                let x = (i * 7 % 11) as f32;
                cand(
                    &format!("s{}", i % 9),
                    i,
                    0.3 + x / 40.0,
                    &[x, 1.0, (i % 3) as f32],
                )
            })
            .collect();
        let p = Params::default();
        let long = rank(&c, &p, 30);
        for n in 1..30 {
            assert_eq!(rank(&c, &p, n), long[..n], "limit {n}");
        }
    }

    #[test]
    fn equal_scores_are_ordered_by_date_then_key_whatever_the_input_order() {
        let mut c = vec![
            cand("a", 10, 0.5, &[1.0, 0.0]),
            cand("b", 20, 0.5, &[0.0, 1.0]),
            cand("c", 20, 0.5, &[1.0, 1.0]),
        ];
        let p = Params {
            mmr_lambda: 1.0,
            same_subject: 2.0,
            ..Params::default()
        };
        let first = sessions(&c, &rank(&c, &p, 3));
        assert_eq!(first, ["b", "c", "a"]);
        c.reverse();
        assert_eq!(sessions(&c, &rank(&c, &p, 3)), first);
    }

    #[test]
    fn the_later_value_of_one_subject_ranks_first() {
        // The first statement matches the question better; the change,
        // later and about the same subject, is placed above it; an
        // unrelated later exchange is not.
        let c = vec![
            cand("jan", 100, 0.70, &[1.0, 0.1, 0.0]),
            cand("mar", 300, 0.45, &[0.9, 0.3, 0.0]),
            cand("feb", 200, 0.60, &[0.0, 0.0, 1.0]),
        ];
        let p = Params {
            mmr_lambda: 1.0,
            ..Params::default()
        };
        assert_eq!(sessions(&c, &rank(&c, &p, 3)), ["mar", "jan", "feb"]);
        // Changed twice: the last change first.
        let mut c2 = c.clone();
        c2.push(cand("may", 500, 0.30, &[1.0, 0.2, 0.05]));
        assert_eq!(sessions(&c2, &rank(&c2, &p, 4))[0], "may");
        // Without the rule (a threshold no pair reaches): relevance order.
        let off = Params {
            same_subject: 2.0,
            ..p
        };
        assert_eq!(sessions(&c, &rank(&c, &off, 3)), ["jan", "feb", "mar"]);
    }

    #[test]
    fn a_stated_change_is_linked_at_a_lower_cosine() {
        // The change shares less with the first statement than the
        // subject threshold, more than the change threshold.
        let mut c = vec![
            cand("jan", 100, 0.70, &[1.0, 0.0, 0.0]),
            cand("mar", 300, 0.30, &[0.55, 0.835, 0.0]),
            cand("feb", 200, 0.50, &[0.0, 0.0, 1.0]),
        ];
        let p = Params {
            mmr_lambda: 1.0,
            same_subject: 0.6,
            change_subject: 0.5,
            ..Params::default()
        };
        assert_eq!(sessions(&c, &rank(&c, &p, 3)), ["jan", "feb", "mar"]);
        c[1].states_change = true;
        assert_eq!(sessions(&c, &rank(&c, &p, 3)), ["mar", "jan", "feb"]);
    }

    #[test]
    fn a_stated_change_naming_the_same_thing_is_linked_at_a_lower_cosine_still() {
        // Cosine 0.35: under the change threshold, over the shared-word one.
        let mut c = vec![
            cand("jan", 100, 0.70, &[1.0, 0.0, 0.0]),
            cand("mar", 300, 0.30, &[0.35, 0.937, 0.0]),
            cand("feb", 200, 0.50, &[0.0, 0.0, 1.0]),
        ];
        c[1].states_change = true;
        let p = Params {
            mmr_lambda: 1.0,
            ..Params::default()
        };
        assert_eq!(sessions(&c, &rank(&c, &p, 3)), ["jan", "feb", "mar"]);
        c[0].subject = BTreeSet::from(["dentist".to_string(), "rossi".to_string()]);
        c[1].subject = BTreeSet::from(["dentist".to_string()]);
        assert_eq!(sessions(&c, &rank(&c, &p, 3)), ["mar", "jan", "feb"]);
        // Naming the same thing without saying that it changed: no link.
        c[1].states_change = false;
        assert_eq!(sessions(&c, &rank(&c, &p, 3)), ["jan", "feb", "mar"]);
    }

    #[test]
    fn a_change_outside_the_pool_is_compared_and_a_chain_of_changes_ends_last() {
        // "jan" is the relevant statement; "may" changed it, "jun" changed
        // "may" (about it, not about "jan"), both far down by relevance.
        let mut c = vec![
            cand("jan", 100, 0.80, &[1.0, 0.0, 0.0]),
            cand("may", 500, 0.10, &[0.8, 0.6, 0.0]),
            cand("jun", 600, 0.05, &[0.3, 0.95, 0.0]),
        ];
        for i in 0..6 {
            c.push(cand(&format!("x{i}"), 10 + i, 0.4, &[0.0, 0.0, 1.0]));
        }
        let p = Params {
            mmr_lambda: 1.0,
            later_pool: 3,
            ..Params::default()
        };
        assert_eq!(&sessions(&c, &rank(&c, &p, 3))[..3], ["jun", "may", "jan"]);
    }

    #[test]
    fn a_later_exchange_on_the_subject_without_a_new_value_or_a_change_stays_below() {
        // Near in meaning (cosine 0.99), later, less relevant: a question
        // asked again, an answer in other words. Without a value that
        // differs or words of change it is not a later value.
        let mut c = vec![
            cand("jan", 100, 0.70, &[1.0, 0.1, 0.0]),
            cand("mar", 300, 0.45, &[1.0, 0.2, 0.0]),
        ];
        let p = Params {
            mmr_lambda: 1.0,
            ..Params::default()
        };
        assert_eq!(sessions(&c, &rank(&c, &p, 2)), ["mar", "jan"]);
        // The same value, or no value on one side: no change.
        c[1].values = c[0].values.clone();
        assert_eq!(sessions(&c, &rank(&c, &p, 2)), ["jan", "mar"]);
        c[1].values.clear();
        assert_eq!(sessions(&c, &rank(&c, &p, 2)), ["jan", "mar"]);
        // Saying that something changed links it again.
        c[1].states_change = true;
        assert_eq!(sessions(&c, &rank(&c, &p, 2)), ["mar", "jan"]);
    }

    #[test]
    fn another_senders_later_value_does_not_win() {
        let mut c = vec![
            cand("jan", 100, 0.70, &[1.0, 0.1, 0.0]),
            cand("mar", 300, 0.45, &[1.0, 0.2, 0.0]),
        ];
        c[1].states_change = true;
        c[1].sender = "v".into();
        let p = Params {
            mmr_lambda: 1.0,
            ..Params::default()
        };
        assert_eq!(sessions(&c, &rank(&c, &p, 2)), ["jan", "mar"]);
    }

    #[test]
    fn a_named_time_beats_the_later_value() {
        let mut c = vec![
            cand("march", 100, 0.6, &[1.0, 0.1]),
            cand("may", 300, 0.6, &[1.0, 0.2]),
        ];
        c[0].in_window = true;
        let p = Params {
            mmr_lambda: 1.0,
            ..Params::default()
        };
        assert_eq!(sessions(&c, &rank(&c, &p, 2)), ["march", "may"]);
        c[0].in_window = false;
        assert_eq!(sessions(&c, &rank(&c, &p, 2)), ["may", "march"]);
    }

    #[test]
    fn mmr_lets_a_different_session_past_a_near_copy() {
        let c = vec![
            cand("a", 1, 0.80, &[1.0, 0.0]),
            cand("b", 2, 0.79, &[1.0, 0.01]),
            cand("c", 3, 0.70, &[0.0, 1.0]),
        ];
        let p = Params {
            same_subject: 2.0,
            mmr_lambda: 0.5,
            ..Params::default()
        };
        assert_eq!(sessions(&c, &rank(&c, &p, 3)), ["a", "c", "b"]);
    }

    #[test]
    fn words_and_the_named_time_add_to_the_cosine() {
        let mut c = vec![cand("a", 1, 0.5, &[1.0]), cand("b", 2, 0.5, &[1.0])];
        c[0].bm25 = Some(4.0);
        c[1].bm25 = Some(2.0);
        let p = Params::default();
        let r = relevance(&c, &p);
        assert!((r[0] - (0.5 + p.w_bm25)).abs() < 1e-9);
        assert!((r[1] - (0.5 + p.w_bm25 / 2.0)).abs() < 1e-9);
        c[1].in_window = true;
        let r = relevance(&c, &p);
        assert!((r[1] - (0.5 + p.w_bm25 / 2.0 + p.w_window)).abs() < 1e-9);
    }
}
