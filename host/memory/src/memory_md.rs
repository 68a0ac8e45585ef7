//! MEMORY.md, the human-readable source of semantic memory (seed 004 §5):
//! the part before the first `## ` heading is the core slice; every bullet
//! under a heading is a fact. Approved facts are appended under
//! `## Added by reflection YYYY-MM-DD`, one line each, ending with a comment
//! naming the fact (`<!-- fact:f-… -->`) so that `forget` finds the line.
//! Writes replace the file atomically (a temporary file, synced, renamed).

use crate::error::{MemoryError, Result};
use std::io::Write as _;
use std::path::Path;

/// One bullet of MEMORY.md.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bullet {
    /// The fact's text.
    pub text: String,
    /// The id its comment names, if any.
    pub fact_id: Option<String>,
}

/// A fact's text as one line: control characters and line breaks become
/// spaces, runs of spaces one, no leading `#` or `-` that would make it a
/// heading or a nested bullet, at most `max` characters.
pub fn one_line(text: &str, max: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| {
            if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{85}') {
                ' '
            } else {
                c
            }
        })
        .collect();
    let words: Vec<&str> = flat.split_whitespace().collect();
    let joined = words.join(" ");
    let trimmed = joined.trim_start_matches(['#', '-', '*', '>', ' ']);
    let no_comment = trimmed.replace("<!--", "< !--").replace("-->", "-- >");
    no_comment.chars().take(max).collect()
}

/// The bullets under `## ` headings.
pub fn bullets(text: &str) -> Vec<Bullet> {
    let mut in_section = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with("## ") {
            in_section = true;
            continue;
        }
        let Some(rest) = line.strip_prefix("- ") else {
            continue;
        };
        if !in_section {
            continue;
        }
        let (text, id) = match rest.rfind("<!-- fact:") {
            Some(i) => {
                let id = rest[i + 10..]
                    .trim_end()
                    .trim_end_matches("-->")
                    .trim()
                    .to_string();
                (rest[..i].trim().to_string(), Some(id))
            }
            None => (rest.trim().to_string(), None),
        };
        if !text.is_empty() {
            out.push(Bullet {
                text,
                fact_id: id.filter(|s| !s.is_empty()),
            });
        }
    }
    out
}

fn file_err(path: &Path, e: impl std::fmt::Display) -> MemoryError {
    MemoryError::File {
        path: path.to_path_buf(),
        reason: e.to_string(),
    }
}

/// Read MEMORY.md (empty when absent).
///
/// # Errors
/// [`MemoryError::File`] when it exists and cannot be read.
pub fn read(path: &Path) -> Result<String> {
    match std::fs::read(path) {
        Ok(b) => Ok(String::from_utf8_lossy(&b).into_owned()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(file_err(path, e)),
    }
}

/// Replace the file's content atomically and durably.
fn write_atomic(path: &Path, text: &str) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| file_err(dir, e))?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| file_err(dir, e))?;
    tmp.write_all(text.as_bytes())
        .map_err(|e| file_err(path, e))?;
    tmp.as_file().sync_all().map_err(|e| file_err(path, e))?;
    tmp.persist(path).map_err(|e| file_err(path, e.error))?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Append facts `(id, text)` under `## Added by reflection {date}` (the
/// heading is reused when it is the file's last one).
///
/// # Errors
/// [`MemoryError::File`].
pub fn append(path: &Path, date: &str, facts: &[(String, String)]) -> Result<()> {
    if facts.is_empty() {
        return Ok(());
    }
    let mut text = read(path)?;
    let heading = format!("## Added by reflection {date}");
    let last_heading = text.lines().rev().find(|l| l.starts_with("## "));
    if last_heading != Some(heading.as_str()) {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&heading);
        text.push('\n');
    } else if !text.ends_with('\n') {
        text.push('\n');
    }
    for (id, fact) in facts {
        text.push_str(&format!("- {fact} <!-- fact:{id} -->\n"));
    }
    write_atomic(path, &text)
}

/// Remove the bullet naming `fact_id`, or the bullet whose text is `text`.
/// True when a line was removed.
///
/// # Errors
/// [`MemoryError::File`].
pub fn remove(path: &Path, fact_id: &str, text: &str) -> Result<bool> {
    let old = read(path)?;
    if old.is_empty() {
        return Ok(false);
    }
    let marker = format!("<!-- fact:{fact_id} -->");
    let mut removed = false;
    let kept: Vec<&str> = old
        .split_inclusive('\n')
        .filter(|l| {
            let line = l.trim_end_matches(['\n', '\r']);
            let hit =
                line.starts_with("- ") && (line.contains(&marker) || line[2..].trim() == text);
            removed |= hit;
            !hit
        })
        .collect();
    if removed {
        write_atomic(path, &kept.concat())?;
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_cannot_make_structure() {
        assert_eq!(one_line("## Heading\nnext\r\n- x", 100), "Heading next - x");
        assert_eq!(
            one_line("a <!-- fact:f-1 --> b", 100),
            "a < !-- fact:f-1 -- > b"
        );
        assert_eq!(one_line("abcdef", 3), "abc");
    }

    #[test]
    fn append_parse_remove() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("MEMORY.md");
        std::fs::write(&p, "core text\n## Notes\n- manual fact\n").unwrap();
        append(&p, "2026-01-02", &[("f-1".into(), "likes tea".into())]).unwrap();
        append(&p, "2026-01-02", &[("f-2".into(), "lives in Turin".into())]).unwrap();
        let text = read(&p).unwrap();
        assert_eq!(
            text.matches("## Added by reflection 2026-01-02").count(),
            1,
            "{text}"
        );
        let b = bullets(&text);
        assert_eq!(b.len(), 3);
        assert_eq!(
            b[1],
            Bullet {
                text: "likes tea".into(),
                fact_id: Some("f-1".into())
            }
        );
        assert!(remove(&p, "f-1", "likes tea").unwrap());
        assert!(remove(&p, "f-x", "manual fact").unwrap());
        assert!(!remove(&p, "f-1", "likes tea").unwrap());
        let b = bullets(&read(&p).unwrap());
        assert_eq!(
            b,
            vec![Bullet {
                text: "lives in Turin".into(),
                fact_id: Some("f-2".into())
            }]
        );
    }
}
