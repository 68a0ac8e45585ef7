//! The later value wins (issue 49): when two statements of one sender are
//! about the same subject and give different values, the later one holds.
//! Pure: texts, vectors and dates in, decisions out. Used by reflection
//! (a superseded value is never distilled into a proposal) and by the
//! operator's approval (an older fact on the subject is marked superseded).
//! Retrieval applies the same rule by ranking ([`crate::rank`]).
//!
//! "The same subject" is the cosine of the two embeddings, at least a
//! threshold. "Different values" is read from the words that carry values
//! in such statements: numbers and words with digits ("3rd", "88213"),
//! month and weekday names, and capitalised words that do not open a
//! sentence (names, places): two statements disagree when neither's set of
//! value words holds the other's. A change stated without any such word
//! ("I cancelled it") is not seen as a new value.

use crate::score::dot;
use std::collections::BTreeSet;

/// Cosine from which two episodes are about one subject, for reflection
/// (the grouping threshold of seed 004 §6 is 0.75; a change is often
/// stated in fewer words, so it is compared lower).
pub const EPISODE_SAME_SUBJECT: f32 = 0.6;

/// Cosine from which two facts are about one subject.
pub const FACT_SAME_SUBJECT: f32 = 0.7;

/// Abbreviations whose full stop does not end a sentence.
const TITLES: &[&str] = &["dr", "mr", "mrs", "ms", "st", "prof", "jr", "sr", "mt"];

/// The words of `text` that carry a value (see the module's
/// documentation), lower-cased.
pub fn values(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    // Whether the next word opens a sentence.
    let mut opening = true;
    let mut word = String::new();
    let mut flush = |w: &mut String, opening: bool| {
        if w.is_empty() {
            return;
        }
        let lower = w.to_lowercase();
        let digits = w.chars().any(|c| c.is_ascii_digit());
        let capital = w.chars().next().is_some_and(char::is_uppercase) && !opening;
        if digits || capital || crate::when::is_calendar_word(&lower) {
            out.insert(lower);
        }
        w.clear();
    };
    // The word just ended, lower-cased (a title's full stop, "Dr.", does
    // not end a sentence).
    let mut last = String::new();
    for c in text.chars() {
        if c.is_alphanumeric() {
            word.push(c);
            continue;
        }
        if !word.is_empty() {
            last = word.to_lowercase();
            flush(&mut word, opening);
            opening = false;
        }
        let title = c == '.' && TITLES.contains(&last.as_str());
        if matches!(c, '.' | '!' | '?' | '\n' | ':' | ';') && !title {
            opening = true;
        }
    }
    flush(&mut word, opening);
    out
}

/// Whether two statements give different values: neither's value words
/// hold the other's (and both have some).
pub fn disagree(a: &str, b: &str) -> bool {
    values_disagree(&values(a), &values(b))
}

/// [`disagree`] over the value words of two statements.
pub fn values_disagree(a: &BTreeSet<String>, b: &BTreeSet<String>) -> bool {
    !a.is_empty() && !b.is_empty() && !a.is_subset(b) && !b.is_subset(a)
}

/// Words by which people say that something they told before has changed
/// ("I *moved* the dentist", "*switched* to", "*instead*", "it's Thursday
/// *now*", "*correction*:", "*scratch* that"), lower-cased: verbs of
/// change in their usual forms, and the adverbs and markers of a
/// correction. General English, not the wordings of any retrieval set.
const CHANGE_WORDS: &[&str] = &[
    // Verbs of change.
    "change",
    "changed",
    "changes",
    "changing",
    "move",
    "moved",
    "moving",
    "switch",
    "switched",
    "switching",
    "swap",
    "swapped",
    "replace",
    "replaced",
    "update",
    "updated",
    "reschedule",
    "rescheduled",
    "postpone",
    "postponed",
    "pushed",
    "shifted",
    "cancel",
    "cancelled",
    "canceled",
    "dropped",
    "quit",
    "resigned",
    "joined",
    "became",
    "renamed",
    "relocated",
    "transferred",
    "upgraded",
    "downgraded",
    "raised",
    "lowered",
    "increased",
    "decreased",
    "reduced",
    "renegotiated",
    "revised",
    "amended",
    "traded",
    "sold",
    "stopped",
    // Markers of a new value or a correction.
    "now",
    "instead",
    "anymore",
    "correction",
    "actually",
    "scratch",
    "rather",
    "nowadays",
    "latest",
    "different",
];

/// Pairs of words that say the same ("no longer", "took over").
const CHANGE_PAIRS: &[(&str, &str)] = &[
    ("no", "longer"),
    ("no", "more"),
    ("any", "more"),
    ("took", "over"),
    ("taken", "over"),
    ("taking", "over"),
    ("these", "days"),
    ("from", "now"),
    ("turns", "out"),
    ("turned", "out"),
];

/// Words that open a question when it has no question mark ("how do I
/// change my password"), lower-cased.
const QUESTION_OPENERS: &[&str] = &[
    "how", "what", "why", "which", "who", "when", "where", "should", "can", "could", "is", "are",
    "do", "does", "would", "will", "any",
];

/// The clauses of `text` that state something: its clauses (split at
/// `.`, `!`, `?`, `;`, `,` and line ends) without the questions (those
/// ending with `?` or opening with a word of [`QUESTION_OPENERS`]), so
/// that "I moved the dentist to Thursday, can you remind me?" still
/// states a change.
fn statements(text: &str) -> impl Iterator<Item = &str> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, c) in text.char_indices() {
        if matches!(c, '.' | '!' | '?' | ';' | ',' | '\n') {
            out.push((&text[start..i], c == '?'));
            start = i + c.len_utf8();
        }
    }
    out.push((&text[start..], false));
    out.into_iter().filter_map(|(s, asked)| {
        let first = crate::score::words(s).next()?.to_lowercase();
        (!asked && !QUESTION_OPENERS.contains(&first.as_str())).then_some(s)
    })
}

/// Whether `text` says that something changed (see [`CHANGE_WORDS`]) in
/// a sentence that states it: a hint that a later statement replaces an
/// earlier one even when the two share few words, so that retrieval links
/// them at a lower cosine ([`crate::rank::Params::change_subject`]). A
/// question is not a change ("How do I change my address with the
/// bank?" asks about the subject of "My address is Via Po 27" without
/// giving it a new value): linking such questions to the statement they
/// are near was the rule's commonest false link.
pub fn states_change(text: &str) -> bool {
    statements(text).any(|s| {
        let words: Vec<String> = crate::score::words(s).map(str::to_lowercase).collect();
        words.iter().any(|w| CHANGE_WORDS.contains(&w.as_str()))
            || words
                .windows(2)
                .any(|p| CHANGE_PAIRS.contains(&(p[0].as_str(), p[1].as_str())))
    })
}

/// The words of `text` that name things, lower-cased: its words past
/// the stop words ([`crate::score::query_terms`]), less the words of
/// change ([`CHANGE_WORDS`]) and those shorter than three letters. Two
/// statements that share one are about a thing in common ("the dentist").
pub fn subject_words(text: &str) -> BTreeSet<String> {
    crate::score::query_terms(text)
        .into_iter()
        .filter(|w| w.chars().count() >= 3 && !CHANGE_WORDS.contains(&w.as_str()))
        .collect()
}

/// A statement for [`superseded`].
#[derive(Debug, Clone)]
pub struct Statement<'a> {
    /// Who said it (statements of two senders never supersede each other).
    pub sender: &'a str,
    /// When, as text that sorts in time order ([`crate::canonical_time`]).
    pub at: &'a str,
    /// What was said.
    pub text: &'a str,
    /// Its unit vector.
    pub vector: &'a [f32],
}

/// For each statement, the index of a later one of the same sender that
/// supersedes it (same subject at cosine `threshold`, different values),
/// the latest such; `None` when it still holds.
pub fn superseded(statements: &[Statement<'_>], threshold: f32) -> Vec<Option<usize>> {
    statements
        .iter()
        .map(|s| {
            statements
                .iter()
                .enumerate()
                .filter(|(_, t)| {
                    t.sender == s.sender
                        && t.at > s.at
                        && dot(t.vector, s.vector) >= threshold
                        && disagree(s.text, t.text)
                })
                .max_by(|(i, a), (j, b)| a.at.cmp(b.at).then(j.cmp(i)))
                .map(|(i, _)| i)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_words() {
        let v = values("I have a dentist appointment with Dr. Rossi on March 3rd.");
        assert_eq!(
            v.into_iter().collect::<Vec<_>>(),
            ["3rd", "dr", "march", "rossi"]
        );
        // A capital that opens a sentence is not a value; a weekday is.
        let v = values("Moved it. Now it is on thursday");
        assert_eq!(v.into_iter().collect::<Vec<_>>(), ["thursday"]);
        assert!(values("i like tea").is_empty());
    }

    #[test]
    fn a_changed_value_disagrees_a_repeated_one_does_not() {
        assert!(disagree(
            "I have a dentist appointment with Dr. Rossi on March 3rd.",
            "I moved the dentist to June 2nd."
        ));
        assert!(!disagree(
            "Please book my usual flight from Turin to Berlin for the conference.",
            "Book the Turin to Berlin flight again, same as usual."
        ));
        // More detail is not a change.
        assert!(!disagree(
            "The dentist is on March 3rd.",
            "The dentist is on March 3rd at 9 with Dr. Rossi."
        ));
        // No value words on one side: nothing to compare.
        assert!(!disagree(
            "I cancelled the dentist.",
            "Dentist on March 3rd."
        ));
    }

    #[test]
    fn a_change_is_read_from_how_people_say_it() {
        for t in [
            "I moved the dentist to Thursday.",
            "Reorg at work, I now report to Irene.",
            "Correction: my gym is FitLab.",
            "Scratch that date, it's May 7th.",
            "We go to Lidl for groceries these days.",
            "Irene took over my team.",
            "I no longer work at Acme.",
            "Going to Lima instead.",
            // A change stated beside a question.
            "I moved the dentist to Thursday. Can you remind me?",
            "I moved the dentist to Thursday, can you remind me?",
        ] {
            assert!(states_change(t), "{t}");
        }
        for t in [
            "I have a dentist appointment with Dr. Rossi on March 3rd.",
            "My address is Via Po 27, third floor.",
            "How do I take better photos with my phone?",
            // A word containing a cue is not the cue.
            "Nowhere is better than Snowdon.",
            // "new" is too often not a change.
            "I need suggestions for a new year's resolution.",
            // A question about changing is not a change.
            "How do I change my address with the bank?",
            "Is it hard to move abroad at twenty?",
            "how do i cancel a subscription",
            "Any tips to change a bike inner tube?",
        ] {
            assert!(!states_change(t), "{t}");
        }
    }

    #[test]
    fn the_latest_disagreeing_statement_of_the_same_sender_supersedes() {
        let a = crate::embed::normalise(vec![1.0, 0.1]);
        let b = crate::embed::normalise(vec![1.0, 0.2]);
        let far = crate::embed::normalise(vec![0.0, 1.0]);
        let st = |sender, at, text, vector| Statement {
            sender,
            at,
            text,
            vector,
        };
        let s = [
            st("u", "2025-01-01", "Dentist on March 3rd.", &a),
            st("u", "2025-02-01", "Moved the dentist to June 2nd.", &b),
            st(
                "u",
                "2025-03-01",
                "Moved the dentist again, to July 9th.",
                &b,
            ),
            st("v", "2025-04-01", "Dentist on August 1st.", &a),
            st("u", "2025-05-01", "Lunch on May 5th.", &far),
        ];
        assert_eq!(superseded(&s, 0.6), [Some(2), Some(2), None, None, None]);
    }
}
