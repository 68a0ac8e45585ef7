//! When a question is about: the time phrase of a user's message ("in
//! March", "two weeks ago", "on April 3rd", "last Tuesday") read as a window
//! of calendar days, so that retrieval can prefer the episodes of that time
//! (temporal questions, issue 49). Pure: text and "now" in, dates out.
//!
//! Days are UTC calendar days. Weeks start on Monday. A month named without
//! a year is its latest occurrence not after now ("in November" asked in
//! March is last November). Month names that are also English words
//! ("may", "march") count only beside a time word ("in", "early", "mid",
//! "late", "of", "on", "since", "during", "last", "this") or a day number.

use capsaga_core::calendar::MONTH_NAMES as MONTHS;
use jiff::Timestamp;
use jiff::civil::{Date, Weekday};
use jiff::tz::TimeZone;

/// A window of calendar days, both ends included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// The first day.
    pub from: Date,
    /// The last day.
    pub to: Date,
}

impl Window {
    fn day(d: Date) -> Window {
        Window { from: d, to: d }
    }

    /// Whether instant `t` falls on one of the window's days (UTC).
    pub fn contains(&self, t: Timestamp) -> bool {
        let d = t.to_zoned(TimeZone::UTC).date();
        self.from <= d && d <= self.to
    }
}

const WEEKDAYS: [(&str, Weekday); 7] = [
    ("monday", Weekday::Monday),
    ("tuesday", Weekday::Tuesday),
    ("wednesday", Weekday::Wednesday),
    ("thursday", Weekday::Thursday),
    ("friday", Weekday::Friday),
    ("saturday", Weekday::Saturday),
    ("sunday", Weekday::Sunday),
];

/// Whether `lower` (lower case) names a month or a weekday.
pub(crate) fn is_calendar_word(lower: &str) -> bool {
    MONTHS.contains(&lower) || WEEKDAYS.iter().any(|(w, _)| *w == lower)
}

/// Words that make the next word a month name ("in may", "mid-march").
const MONTH_CUES: &[&str] = &[
    "in",
    "early",
    "mid",
    "late",
    "of",
    "on",
    "since",
    "during",
    "last",
    "this",
    "beginning",
    "start",
    "end",
];

fn month(word: &str) -> Option<i8> {
    MONTHS
        .iter()
        .position(|m| *m == word || (word.len() >= 3 && m.starts_with(word)))
        .map(|i| i as i8 + 1)
}

fn number(word: &str) -> Option<i64> {
    const WORDS: [&str; 13] = [
        "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
        "eleven", "twelve",
    ];
    if let Some(i) = WORDS.iter().position(|w| *w == word) {
        return Some(i as i64);
    }
    if word == "a" || word == "an" {
        return Some(1);
    }
    word.parse().ok().filter(|n| (0..1000).contains(n))
}

/// A day of the month: `3`, `3rd`, `21st` (1 to 31).
fn day_of_month(word: &str) -> Option<i8> {
    let digits = word.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let suffix = &word[digits.len()..];
    if !matches!(suffix, "" | "st" | "nd" | "rd" | "th") {
        return None;
    }
    digits.parse().ok().filter(|d| (1..=31).contains(d))
}

fn month_window(today: Date, m: i8, year: Option<i16>) -> Option<Window> {
    let year = year.unwrap_or_else(|| {
        if m > today.month() {
            today.year() - 1
        } else {
            today.year()
        }
    });
    let from = Date::new(year, m, 1).ok()?;
    Some(Window {
        from,
        to: from.last_of_month(),
    })
}

fn week_window(today: Date, weeks_back: i64) -> Option<Window> {
    let monday = today
        .checked_sub(jiff::Span::new().days(i64::from(today.weekday().to_monday_zero_offset())))
        .ok()?;
    let from = monday
        .checked_sub(jiff::Span::new().weeks(weeks_back))
        .ok()?;
    Some(Window {
        from,
        to: from.checked_add(jiff::Span::new().days(6)).ok()?,
    })
}

fn days_back(today: Date, n: i64) -> Option<Date> {
    today.checked_sub(jiff::Span::new().days(n)).ok()
}

fn months_back(today: Date, n: i64) -> Option<Window> {
    let first = today.first_of_month();
    let from = first.checked_sub(jiff::Span::new().months(n)).ok()?;
    Some(Window {
        from,
        to: from.last_of_month(),
    })
}

/// The window a time phrase at `w[i..]` names, with `prev` the word before.
fn at(w: &[String], i: usize, today: Date) -> Option<Window> {
    let word = w[i].as_str();
    let next = w.get(i + 1).map(String::as_str);
    let next2 = w.get(i + 2).map(String::as_str);
    let prev = i.checked_sub(1).map(|p| w[p].as_str());
    match word {
        "today" | "tonight" => return Some(Window::day(today)),
        "yesterday" => return days_back(today, 1).map(Window::day),
        "ago" => {
            // "<n> days|weeks|months ago"
            let unit = prev?;
            let n = number(w.get(i.checked_sub(2)?)?).unwrap_or(1);
            return match unit.trim_end_matches('s') {
                "day" => days_back(today, n).map(Window::day),
                "week" => week_window(today, n),
                "month" => months_back(today, n),
                _ => None,
            };
        }
        "last" | "this" => {
            let back = i64::from(word == "last");
            return match next? {
                "week" => week_window(today, back),
                "month" => months_back(today, back),
                "year" => {
                    let y = today.year() - back as i16;
                    Some(Window {
                        from: Date::new(y, 1, 1).ok()?,
                        to: Date::new(y, 12, 31).ok()?,
                    })
                }
                d => {
                    let (_, wd) = WEEKDAYS.iter().find(|(n, _)| *n == d)?;
                    // The latest such day before today.
                    let mut day = days_back(today, 1)?;
                    while day.weekday() != *wd {
                        day = days_back(day, 1)?;
                    }
                    Some(Window::day(day))
                }
            };
        }
        "before" if prev == Some("week") && next == Some("last") => {
            // "the week before last"
            return week_window(today, 2);
        }
        _ => {}
    }
    let m = month(word)?;
    let cue = prev.is_some_and(|p| MONTH_CUES.contains(&p));
    let day_after = next.and_then(day_of_month);
    let day_before = prev.and_then(day_of_month).or_else(|| {
        // "the 3rd of March"
        (prev == Some("of")).then(|| w.get(i.checked_sub(2)?).and_then(|x| day_of_month(x)))?
    });
    if !cue && day_after.is_none() && day_before.is_none() {
        return None;
    }
    let year = next
        .filter(|_| day_after.is_none())
        .or(next2.filter(|_| day_after.is_some()))
        .and_then(|y| y.parse::<i16>().ok())
        .filter(|y| (1900..=2999).contains(y));
    let whole = month_window(today, m, year)?;
    if let Some(d) = day_after.or(day_before) {
        let day = Date::new(whole.from.year(), m, d).ok()?;
        return Some(Window::day(day));
    }
    let part = |lo: i8, hi: i8| {
        Some(Window {
            from: Date::new(whole.from.year(), m, lo).ok()?,
            to: Date::new(whole.from.year(), m, hi.min(whole.to.day())).ok()?,
        })
    };
    let before = i.checked_sub(2).map(|p| w[p].as_str());
    match (prev, before) {
        (Some("early"), _)
        | (Some("beginning" | "start"), _)
        | (Some("of"), Some("beginning" | "start")) => part(1, 10),
        (Some("mid"), _) | (Some("of"), Some("middle")) => part(11, 20),
        (Some("late"), _) | (Some("end"), _) | (Some("of"), Some("end")) => part(21, 31),
        _ => Some(whole),
    }
}

/// The window of days the first time phrase of `text` names, as seen at
/// `now`; `None` when it names none.
pub fn window(text: &str, now: Timestamp) -> Option<Window> {
    let today = now.to_zoned(TimeZone::UTC).date();
    let words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    (0..words.len()).find_map(|i| at(&words, i, today))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        // A Wednesday.
        "2025-07-02T20:00:00Z".parse().unwrap()
    }

    fn win(text: &str) -> Option<(String, String)> {
        window(text, now()).map(|w| (w.from.to_string(), w.to.to_string()))
    }

    fn pair(a: &str, b: &str) -> Option<(String, String)> {
        Some((a.into(), b.into()))
    }

    #[test]
    fn days_weeks_months_relative_to_now() {
        assert_eq!(
            win("what did I do yesterday?"),
            pair("2025-07-01", "2025-07-01")
        );
        assert_eq!(win("three days ago"), pair("2025-06-29", "2025-06-29"));
        assert_eq!(
            win("what did I cook last week"),
            pair("2025-06-23", "2025-06-29")
        );
        assert_eq!(win("two weeks ago"), pair("2025-06-16", "2025-06-22"));
        assert_eq!(
            win("the week before last"),
            pair("2025-06-16", "2025-06-22")
        );
        assert_eq!(win("a month ago"), pair("2025-06-01", "2025-06-30"));
        assert_eq!(win("last month"), pair("2025-06-01", "2025-06-30"));
        assert_eq!(win("this week"), pair("2025-06-30", "2025-07-06"));
        assert_eq!(win("last Tuesday"), pair("2025-07-01", "2025-07-01"));
        assert_eq!(win("last Wednesday"), pair("2025-06-25", "2025-06-25"));
    }

    #[test]
    fn months_and_their_parts() {
        assert_eq!(
            win("How far did I run in March?"),
            pair("2025-03-01", "2025-03-31")
        );
        assert_eq!(win("in early March"), pair("2025-03-01", "2025-03-10"));
        assert_eq!(win("in mid-April"), pair("2025-04-11", "2025-04-20"));
        assert_eq!(win("late February"), pair("2025-02-21", "2025-02-28"));
        assert_eq!(win("at the end of May"), pair("2025-05-21", "2025-05-31"));
        assert_eq!(win("on April 3rd"), pair("2025-04-03", "2025-04-03"));
        assert_eq!(win("on the 14th of June"), pair("2025-06-14", "2025-06-14"));
        assert_eq!(win("May 4"), pair("2025-05-04", "2025-05-04"));
        // A month after now's is last year's.
        assert_eq!(win("in November"), pair("2024-11-01", "2024-11-30"));
        assert_eq!(win("in March 2023"), pair("2023-03-01", "2023-03-31"));
        assert_eq!(win("in Sept"), pair("2024-09-01", "2024-09-30"));
    }

    #[test]
    fn words_that_are_only_words() {
        assert_eq!(win("May I ask what my badge number is?"), None);
        assert_eq!(win("we will march on"), None);
        assert_eq!(win("what is my dentist appointment"), None);
        assert_eq!(win("I ran 5 km"), None);
        assert_eq!(win("on 99th of May"), pair("2025-05-01", "2025-05-31"));
        assert_eq!(win("February 30"), None);
    }

    #[test]
    fn contains_by_utc_day() {
        let w = window("on April 3rd", now()).unwrap();
        assert!(w.contains("2025-04-03T00:00:00Z".parse().unwrap()));
        assert!(w.contains("2025-04-03T23:59:59Z".parse().unwrap()));
        assert!(!w.contains("2025-04-04T00:00:00Z".parse().unwrap()));
    }
}
