//! The format of past conversations (JSON Lines, one session a line) and
//! its reading: a line checked and cut into exchanges, lines read with a
//! bound on their length, and a session written back. No database.
//!
//! ```json
//! {"sender":"token:alice","session_id":"2025-03-01-a","started_at":"2025-03-01T09:12:00Z",
//!  "turns":[{"role":"user","content":"I moved the dentist to Thursday.","at":"2025-03-01T09:12:00Z"},
//!           {"role":"assistant","content":"Noted: Thursday."}]}
//! ```
//!
//! (one line in a file). `role` is `user` or `assistant` (`system` and
//! `tool` turns are accepted and left out). An **exchange** is a user turn
//! and the assistant turns after it (joined by a blank line); it is dated
//! by the user turn's `at`, else the session's `started_at`. Assistant
//! turns before the first user turn make an exchange with an empty user
//! message, dated by the first of them.

use serde::{Deserialize, Serialize};
use std::io::BufRead;

/// Longest line read, bytes; a longer one is a bad line (read past, never
/// held in memory).
pub const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;

/// Longest sender or session id, characters.
pub const MAX_ID_CHARS: usize = 256;

/// One session as a line.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionLine {
    /// Whose conversation it was: the memory's sender (the principal a turn
    /// runs as, e.g. `token:alice`).
    pub sender: String,
    /// The session's id.
    pub session_id: String,
    /// When the session started, RFC 3339.
    pub started_at: String,
    /// Its turns, in order.
    pub turns: Vec<TurnLine>,
}

/// One turn of a session line.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnLine {
    /// `user`, `assistant`, `system` or `tool`.
    pub role: String,
    /// What was said.
    pub content: String,
    /// When, RFC 3339 (optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
}

/// One exchange of a session, ready to be an episode.
#[derive(Debug, Clone, PartialEq)]
pub struct Exchange {
    /// Its position in the session, from 1.
    pub seq: u64,
    /// Its date ([`crate::canonical_time`]).
    pub at: String,
    /// The user's message (empty for assistant turns before any).
    pub user: String,
    /// The assistant's answer, if any.
    pub answer: Option<String>,
}

fn id_ok(what: &str, v: &str) -> Result<(), String> {
    if v.trim().is_empty() {
        return Err(format!("`{what}` is empty"));
    }
    if v.chars().count() > MAX_ID_CHARS {
        return Err(format!("`{what}` is longer than {MAX_ID_CHARS} characters"));
    }
    if v.chars().any(char::is_control) {
        return Err(format!("`{what}` holds a control character"));
    }
    Ok(())
}

fn time(what: &str, v: &str) -> Result<String, String> {
    crate::canonical_time(v).map_err(|_| format!("`{what}` is not an RFC 3339 date-time: `{v}`"))
}

/// A line read as a session and cut into exchanges; `Err` says why it is
/// a bad line.
pub fn parse(line: &str) -> Result<(SessionLine, Vec<Exchange>), String> {
    let s: SessionLine = serde_json::from_str(line).map_err(|e| format!("not a session: {e}"))?;
    id_ok("sender", &s.sender)?;
    id_ok("session_id", &s.session_id)?;
    let start = time("started_at", &s.started_at)?;
    let mut out: Vec<Exchange> = Vec::new();
    for (i, t) in s.turns.iter().enumerate() {
        let at = match &t.at {
            Some(a) => Some(time(&format!("turns[{i}].at"), a)?),
            None => None,
        };
        match t.role.as_str() {
            "user" => out.push(Exchange {
                seq: out.len() as u64 + 1,
                at: at.unwrap_or_else(|| start.clone()),
                user: t.content.clone(),
                answer: None,
            }),
            "assistant" => match out.last_mut() {
                Some(x) => {
                    x.answer = Some(match x.answer.take() {
                        Some(a) => format!("{a}\n\n{}", t.content),
                        None => t.content.clone(),
                    })
                }
                None => out.push(Exchange {
                    seq: 1,
                    at: at.unwrap_or_else(|| start.clone()),
                    user: String::new(),
                    answer: Some(t.content.clone()),
                }),
            },
            "system" | "tool" => {}
            r => {
                return Err(format!(
                    "turns[{i}].role is `{r}`: user, assistant, system or tool"
                ));
            }
        }
    }
    if out.is_empty() {
        return Err("the session has no user or assistant turn".into());
    }
    Ok((s, out))
}

/// One line of `reader`: `Ok(None)` at the end, else the line without its
/// end of line, or `Err(reason)` for a line over `max` bytes (read past
/// without being held) or not UTF-8. The count of bytes consumed is added
/// to `bytes`.
///
/// # Errors
/// The reader's.
pub fn next_line(
    reader: &mut dyn BufRead,
    max: usize,
    bytes: &mut u64,
) -> std::io::Result<Option<Result<String, String>>> {
    let mut buf = Vec::new();
    let mut over = false;
    let mut any = false;
    loop {
        let chunk = reader.fill_buf()?;
        if chunk.is_empty() {
            break;
        }
        any = true;
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(p) => (p + 1, true),
            None => (chunk.len(), false),
        };
        if !over {
            if buf.len() + take > max + 2 {
                over = true;
                buf = Vec::new();
            } else {
                buf.extend_from_slice(&chunk[..take]);
            }
        }
        reader.consume(take);
        *bytes += take as u64;
        if done {
            break;
        }
    }
    if !any {
        return Ok(None);
    }
    if over {
        return Ok(Some(Err(format!("the line is longer than {max} bytes"))));
    }
    while buf.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        buf.pop();
    }
    Ok(Some(
        String::from_utf8(buf).map_err(|_| "the line is not UTF-8".to_string()),
    ))
}

/// A session line written back from its exchanges (in order): the format
/// [`parse`] reads, each user turn with its `at` (an exchange without a
/// user message is written as an assistant turn with its `at`).
pub fn line(sender: &str, session_id: &str, exchanges: &[Exchange]) -> SessionLine {
    let mut turns = Vec::with_capacity(exchanges.len() * 2);
    for x in exchanges {
        if !x.user.is_empty() || x.answer.is_none() {
            turns.push(TurnLine {
                role: "user".into(),
                content: x.user.clone(),
                at: Some(x.at.clone()),
            });
        }
        if let Some(a) = &x.answer {
            let first = x.user.is_empty();
            turns.push(TurnLine {
                role: "assistant".into(),
                content: a.clone(),
                at: first.then(|| x.at.clone()),
            });
        }
    }
    SessionLine {
        sender: sender.to_string(),
        session_id: session_id.to_string(),
        started_at: exchanges.first().map(|x| x.at.clone()).unwrap_or_default(),
        turns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_becomes_exchanges() {
        let (s, x) = parse(
            r#"{"sender":"a","session_id":"s1","started_at":"2025-03-01T10:00:00+02:00","turns":[
            {"role":"system","content":"be nice"},
            {"role":"assistant","content":"Hello!"},
            {"role":"user","content":"hi","at":"2025-03-01T08:01:00Z"},
            {"role":"assistant","content":"a"},{"role":"assistant","content":"b"},
            {"role":"user","content":"bye"}]}"#,
        )
        .unwrap();
        assert_eq!(s.sender, "a");
        assert_eq!(x.len(), 3);
        assert_eq!((x[0].seq, x[0].user.as_str()), (1, ""));
        assert_eq!(x[0].at, "2025-03-01T08:00:00.000Z");
        assert_eq!(x[1].answer.as_deref(), Some("a\n\nb"));
        assert_eq!(x[1].at, "2025-03-01T08:01:00.000Z");
        assert_eq!((x[2].seq, x[2].answer.as_deref()), (3, None));
        assert_eq!(x[2].at, "2025-03-01T08:00:00.000Z");
    }

    #[test]
    fn bad_lines_say_why() {
        for (line, why) in [
            ("not json", "not a session"),
            (
                r#"{"sender":"a","session_id":"s","started_at":"2025-01-01T00:00:00Z","turns":[],"x":1}"#,
                "unknown field",
            ),
            (
                r#"{"sender":"","session_id":"s","started_at":"2025-01-01T00:00:00Z","turns":[]}"#,
                "`sender` is empty",
            ),
            (
                r#"{"sender":"a","session_id":"s","started_at":"yesterday","turns":[]}"#,
                "started_at",
            ),
            (
                r#"{"sender":"a","session_id":"s","started_at":"2025-01-01T00:00:00Z","turns":[]}"#,
                "no user or assistant",
            ),
            (
                r#"{"sender":"a","session_id":"s","started_at":"2025-01-01T00:00:00Z","turns":[{"role":"bot","content":"x"}]}"#,
                "turns[0].role",
            ),
            (
                r#"{"sender":"a","session_id":"s","started_at":"2025-01-01T00:00:00Z","turns":[{"role":"user","content":"x","at":"3pm"}]}"#,
                "turns[0].at",
            ),
            (
                r#"{"sender":"a\u0007","session_id":"s","started_at":"2025-01-01T00:00:00Z","turns":[]}"#,
                "control",
            ),
        ] {
            let e = parse(line).unwrap_err();
            assert!(e.contains(why), "{line}: {e}");
        }
    }

    #[test]
    fn lines_are_bounded_and_counted() {
        let text = b"short\r\n0123456789abcdef\n\xff\xfe\nlast".to_vec();
        let mut r = std::io::BufReader::with_capacity(4, &text[..]);
        let mut bytes = 0;
        let mut got = Vec::new();
        while let Some(l) = next_line(&mut r, 8, &mut bytes).unwrap() {
            got.push(l);
        }
        assert_eq!(bytes, text.len() as u64);
        assert_eq!(got[0], Ok("short".into()));
        assert!(got[1].as_ref().unwrap_err().contains("longer than 8"));
        assert!(got[2].as_ref().unwrap_err().contains("UTF-8"));
        assert_eq!(got[3], Ok("last".into()));
        assert_eq!(got.len(), 4);
    }

    #[test]
    fn a_written_session_reads_back_the_same() {
        let x = vec![
            Exchange {
                seq: 1,
                at: "2025-03-01T08:00:00.000Z".into(),
                user: String::new(),
                answer: Some("Hello!".into()),
            },
            Exchange {
                seq: 2,
                at: "2025-03-01T08:01:00.000Z".into(),
                user: "hi".into(),
                answer: Some("a\n\nb".into()),
            },
            Exchange {
                seq: 3,
                at: "2025-03-01T08:02:00.000Z".into(),
                user: "bye".into(),
                answer: None,
            },
        ];
        let l = serde_json::to_string(&line("a", "s1", &x)).unwrap();
        assert_eq!(parse(&l).unwrap().1, x);
    }
}
