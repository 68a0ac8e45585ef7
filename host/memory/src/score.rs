//! Pure scoring functions of the memory (seed 004 §4, §7): importance of an
//! episode, recency, the fact retrieval score, cosine similarity, and the
//! FTS5 query built from a user message. No I/O: unit-tested here, used by
//! the store and the facade.

/// Weights of the fact score (seed 004 §7, after Generative Agents, Park et
/// al. 2023, and ACT-R's base-level activation): relevance, recency,
/// importance, usage.
pub const W_RELEVANCE: f32 = 0.50;
/// Weight of recency.
pub const W_RECENCY: f32 = 0.20;
/// Weight of importance.
pub const W_IMPORTANCE: f32 = 0.20;
/// Weight of usage reinforcement.
pub const W_USAGE: f32 = 0.10;

/// Recency decay per day: Generative Agents decays recency by 0.995 per
/// game hour, 0.995^24 ≈ e^-0.12 per day.
pub const DECAY_PER_DAY: f64 = 0.12;

/// The access count at which the usage term reaches 1: `ln(1+n)` is divided
/// by `ln(1+USAGE_SATURATION)` so that every term of the score lies in
/// [0, 1] (the seed's `log(1 + access_count)` is unbounded).
pub const USAGE_SATURATION: f64 = 100.0;

/// Importance of an episode (seed 004 §4.3):
/// `0.3·novelty + 0.3·user_engagement + 0.4·outcome_quality`, each input
/// clamped to [0, 1] (NaN counts as 0).
pub fn importance(novelty: f64, engagement: f64, outcome_quality: f64) -> f64 {
    let c = |x: f64| if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) };
    0.3 * c(novelty) + 0.3 * c(engagement) + 0.4 * c(outcome_quality)
}

/// Outcome quality of a trace outcome (the ExecutionTrace's outcome names):
/// a success is worth remembering most, a hallucinated tool least.
pub fn outcome_quality(outcome: &str) -> f64 {
    match outcome {
        "success" => 1.0,
        "policy_denied" | "budget_hit" => 0.3,
        "user_aborted" | "timeout_steps" => 0.2,
        "tool_hallucination" => 0.1,
        _ => 0.0,
    }
}

/// User engagement of a turn: half from the length of what the user wrote
/// (saturating at 40 words), half from how far into the session the turn is
/// (saturating at the 5th turn: a user who keeps talking is engaged).
pub fn engagement(user_words: usize, turn_in_session: usize) -> f64 {
    0.5 * (user_words as f64 / 40.0).min(1.0) + 0.5 * (turn_in_session as f64 / 5.0).min(1.0)
}

/// Novelty of a text against earlier texts of the same sender: one minus
/// the largest Jaccard similarity of their word sets (1 when there is
/// nothing earlier).
pub fn novelty<'a>(text: &str, earlier: impl IntoIterator<Item = &'a str>) -> f64 {
    let a = word_set(text);
    let best = earlier
        .into_iter()
        .map(|e| jaccard(&a, &word_set(e)))
        .fold(0.0_f64, f64::max);
    1.0 - best
}

fn word_set(text: &str) -> std::collections::BTreeSet<String> {
    words(text).map(|w| w.to_lowercase()).collect()
}

fn jaccard(a: &std::collections::BTreeSet<String>, b: &std::collections::BTreeSet<String>) -> f64 {
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    let inter = a.intersection(b).count() as f64;
    let union = a.union(b).count() as f64;
    inter / union
}

/// Recency after `days` (negative counts as 0): `exp(-DECAY_PER_DAY·days)`.
pub fn recency(days: f64) -> f64 {
    if days.is_nan() {
        return 0.0;
    }
    (-DECAY_PER_DAY * days.max(0.0)).exp()
}

/// The usage term: `ln(1+n) / ln(1+USAGE_SATURATION)`, at most 1.
pub fn usage(access_count: u64) -> f64 {
    ((1.0 + access_count as f64).ln() / (1.0 + USAGE_SATURATION).ln()).min(1.0)
}

/// The retrieval score of a fact (seed 004 §7): `0.5·cosine + 0.2·recency +
/// 0.2·importance + 0.1·usage`, with `days_since_access` counted from the
/// last access (or the creation when never accessed).
pub fn fact_score(cosine: f32, days_since_access: f64, importance: f64, access_count: u64) -> f32 {
    W_RELEVANCE * cosine
        + W_RECENCY * recency(days_since_access) as f32
        + W_IMPORTANCE * importance.clamp(0.0, 1.0) as f32
        + W_USAGE * usage(access_count) as f32
}

/// Cosine similarity of two vectors (0 when either is zero or their lengths
/// differ). Embeddings of the memory are L2-normalised, so this is their
/// dot product, but the norm is not assumed.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() || a.is_empty() {
        return 0.0;
    }
    let (dot, na, nb) = (dot(a, b), dot(a, a), dot(b, b));
    if na == 0.0 || nb == 0.0 {
        return 0.0;
    }
    dot / (na.sqrt() * nb.sqrt())
}

/// The dot product `Σ aᵢbᵢ` over the common length (the cosine of two unit
/// vectors). Eight independent partial sums, so that the compiler keeps
/// them in vector registers (one running sum is a chain of dependent
/// additions it may not reorder: scoring 10k facts took 3.8 ms that way).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    const LANES: usize = 8;
    let mut acc = [0.0_f32; LANES];
    let (ac, bc) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail: f32 = ac
        .remainder()
        .iter()
        .zip(bc.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ac.zip(bc) {
        for i in 0..LANES {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// The words of a text: maximal runs of letters and digits (any script).
pub fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
}

/// A document for [`bm25`]: each word's count (lower-cased) and its
/// length in words.
pub type Bag = (std::collections::HashMap<String, u32>, u32);

/// The bag of words of `texts` (lower-cased [`words`]).
pub fn bag<'a>(texts: impl IntoIterator<Item = &'a str>) -> Bag {
    let mut bag = std::collections::HashMap::new();
    let mut len = 0;
    for t in texts {
        for w in words(t) {
            *bag.entry(w.to_lowercase()).or_insert(0) += 1;
            len += 1;
        }
    }
    (bag, len)
}

/// The BM25 score (k1 = 1.2, b = 0.75, as FTS5's `bm25()`) of each of
/// `docs` for `terms`, in a collection of `n` documents (at least
/// `docs.len()`) of which `docs` are every one holding a term: a term's
/// document count is read from `docs`, the average length too.
pub fn bm25(docs: &[Bag], n: usize, terms: &[String]) -> Vec<f64> {
    let (k1, b) = (1.2_f64, 0.75_f64);
    let n = n.max(docs.len()) as f64;
    let avg = docs.iter().map(|d| f64::from(d.1)).sum::<f64>() / (docs.len().max(1) as f64);
    let idf: Vec<f64> = terms
        .iter()
        .map(|t| {
            let df = docs.iter().filter(|d| d.0.contains_key(t)).count() as f64;
            ((n - df + 0.5) / (df + 0.5) + 1.0).ln()
        })
        .collect();
    docs.iter()
        .map(|(bag, len)| {
            let norm = k1 * (1.0 - b + b * f64::from(*len) / avg.max(1e-9));
            terms
                .iter()
                .zip(&idf)
                .map(|(t, idf)| {
                    let tf = f64::from(*bag.get(t).unwrap_or(&0));
                    idf * tf * (k1 + 1.0) / (tf + norm)
                })
                .sum()
        })
        .collect()
}

/// Most terms put in one FTS5 query.
pub const MAX_QUERY_TERMS: usize = 32;

/// Words too common to select anything (English; a query of only these
/// matches nothing).
const STOPWORDS: &[&str] = &[
    "a", "about", "an", "and", "are", "as", "at", "be", "but", "by", "can", "did", "do", "does",
    "for", "from", "had", "has", "have", "he", "her", "his", "how", "i", "if", "in", "is", "it",
    "its", "me", "my", "of", "on", "or", "our", "she", "so", "that", "the", "their", "them",
    "there", "they", "this", "to", "was", "we", "were", "what", "when", "where", "which", "who",
    "why", "will", "with", "you", "your",
];

/// The searchable words of a message: lower-cased, stop words and
/// duplicates dropped, in order.
pub fn query_terms(message: &str) -> Vec<String> {
    let mut seen = std::collections::BTreeSet::new();
    words(message)
        .map(str::to_lowercase)
        .filter(|w| !STOPWORDS.contains(&w.as_str()))
        .filter(|w| seen.insert(w.clone()))
        .collect()
}

/// An FTS5 MATCH expression for a user message: every word of the message
/// (lower-cased, stop words and duplicates dropped, at most
/// [`MAX_QUERY_TERMS`]) as a double-quoted string, joined by `OR`. A user
/// message is never FTS5 syntax: quotes, `*`, `^`, `-`, `:`, `NEAR`, `AND`,
/// `OR`, `NOT` and column filters in it are plain words or separators,
/// never operators (FTS5 query syntax, sqlite.org/fts5.html §3). `None`
/// when nothing searchable is left.
pub fn fts_query(message: &str) -> Option<String> {
    let terms: Vec<String> = query_terms(message)
        .into_iter()
        .take(MAX_QUERY_TERMS)
        // A word holds only letters and digits, so it holds no quote; the
        // doubling is the FTS5 string rule, kept in case `words` changes.
        .map(|w| format!("\"{}\"", w.replace('"', "\"\"")))
        .collect();
    (!terms.is_empty()).then(|| terms.join(" OR "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bm25_reads_rarity_in_the_collection_it_is_given() {
        let docs = [bag(["my dentist is Dr Rossi"]), bag(["the dentist moved"])];
        let terms = ["dentist".to_string(), "rossi".to_string()];
        // Two documents of a sender's thousand hold "dentist": rare there.
        let many = bm25(&docs, 1000, &terms);
        // The same two as the whole collection: "dentist" is in every one.
        let alone = bm25(&docs, 2, &terms);
        assert!(many[1] > alone[1] * 5.0, "{many:?} {alone:?}");
        // The rarer word counts more; a document without a term scores 0.
        assert!(many[0] > many[1]);
        assert_eq!(bm25(&[bag(["nothing here"])], 10, &terms), [0.0]);
    }

    #[test]
    fn importance_is_the_seed_formula_and_bounded() {
        assert!((importance(1.0, 1.0, 1.0) - 1.0).abs() < 1e-12);
        assert!((importance(0.5, 0.0, 1.0) - 0.55).abs() < 1e-12);
        assert_eq!(importance(-3.0, f64::NAN, 9.0), 0.4);
    }

    #[test]
    fn recency_decays_and_clamps() {
        assert_eq!(recency(0.0), 1.0);
        assert_eq!(recency(-5.0), 1.0);
        assert!((recency(1.0) - (-0.12f64).exp()).abs() < 1e-12);
        assert!(recency(60.0) < 0.001);
        assert_eq!(recency(f64::NAN), 0.0);
    }

    #[test]
    fn fact_score_weights() {
        // Identical vector, fresh, top importance, saturated usage: 1.0.
        assert!((fact_score(1.0, 0.0, 1.0, 100) - 1.0).abs() < 1e-6);
        // Relevance dominates.
        assert!(fact_score(0.9, 30.0, 0.5, 0) > fact_score(0.2, 0.0, 0.5, 0));
        assert!(usage(1_000_000) <= 1.0);
    }

    #[test]
    fn cosine_edge_cases() {
        assert_eq!(cosine(&[1.0, 0.0], &[1.0]), 0.0);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), 0.0);
        assert!((cosine(&[1.0, 1.0], &[2.0, 2.0]) - 1.0).abs() < 1e-6);
    }

    #[test]
    fn cosine_matches_a_plain_f64_reference_for_every_remainder() {
        // Lengths below, at and past the eight lanes, with a remainder of
        // every size, and the model's 384.
        for len in [1usize, 3, 7, 8, 9, 15, 16, 17, 383, 384, 385] {
            let a: Vec<f32> = (0..len).map(|i| ((i * 37 % 11) as f32) - 5.0).collect();
            let b: Vec<f32> = (0..len).map(|i| ((i * 13 % 7) as f32) - 2.5).collect();
            let (mut d, mut x, mut y) = (0.0_f64, 0.0_f64, 0.0_f64);
            for (p, q) in a.iter().zip(&b) {
                d += f64::from(*p) * f64::from(*q);
                x += f64::from(*p) * f64::from(*p);
                y += f64::from(*q) * f64::from(*q);
            }
            let want = if x == 0.0 || y == 0.0 {
                0.0
            } else {
                d / (x.sqrt() * y.sqrt())
            };
            let got = f64::from(cosine(&a, &b));
            assert!((got - want).abs() < 1e-5, "len {len}: {got} vs {want}");
        }
    }

    #[test]
    fn novelty_against_earlier() {
        assert_eq!(novelty("the cat sat", []), 1.0);
        assert_eq!(novelty("the cat sat", ["The cat SAT"]), 0.0);
        assert!(novelty("the cat sat", ["a dog ran"]) == 1.0);
    }

    #[test]
    fn fts_query_quotes_every_syntax_character() {
        let q = fts_query("report\" OR * NEAR(a b) -x ^col: user_message:secret AND NOT").unwrap();
        // Only quoted words joined by OR: no operator survives.
        for part in q.split(" OR ") {
            assert!(part.starts_with('"') && part.ends_with('"'), "{q}");
            let inner = &part[1..part.len() - 1];
            assert!(inner.chars().all(char::is_alphanumeric), "{q}");
        }
        assert!(q.contains("\"near\""), "{q}");
        assert!(q.contains("\"user\"") && q.contains("\"message\""), "{q}");
        assert_eq!(fts_query("*** \" ^ - :"), None);
        assert_eq!(fts_query("the and of"), None);
        let many = (0..100)
            .map(|i| format!("w{i}"))
            .collect::<Vec<_>>()
            .join(" ");
        assert_eq!(
            fts_query(&many).unwrap().matches(" OR ").count(),
            MAX_QUERY_TERMS - 1
        );
    }
}
