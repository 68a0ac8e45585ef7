//! The output's size as the host measures it, checked before anything is
//! changed.
//!
//! The host refuses an output over its cap (`quota-exceeded`) *after* the
//! call returned: for `execute` that would be after the files were changed.
//! So [`fit`] measures the output the call is about to return, JSON-escaped
//! as it travels (a control character becomes six bytes, `\u0001`), before
//! [`crate::commit::apply`] runs: stdout and stderr are cut further to fit
//! (the cut counted in `*_truncated_bytes`), and when the rest alone (the
//! pre-images of the changes) does not fit, the call fails with
//! `quota-exceeded` and nothing is changed.
//!
//! The guest is not told the host's cap: [`OUTPUT_CAP`] is the host's
//! documented default (`[tools.<name>.limits] output_bytes`, 4 MiB). An
//! operator's smaller cap is still enforced by the host.

use capsaga_sdk::prelude::*;

use crate::RunData;
use crate::commit::Change;

/// The host's default cap on a tool's output, bytes (4 MiB): its data as
/// JSON text plus effects and summary.
pub const OUTPUT_CAP: u64 = 4 * 1024 * 1024;

/// Bytes kept free for what may still change after [`fit`] ran: an
/// `apply_error` message (at most 1 KiB, twice), the summary, the effects' verbs (64 KiB).
pub const MARGIN: u64 = 64 * 1024;

/// The length of `s` as a JSON string body (serde_json's escaping).
pub fn escaped_len(s: &str) -> u64 {
    s.chars().map(escaped_char_len).sum()
}

fn escaped_char_len(c: char) -> u64 {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if (c as u32) < 0x20 => 6,
        c => c.len_utf8() as u64,
    }
}

/// Cuts `s` to its longest prefix whose escaped length is at most `budget`;
/// returns the bytes cut.
fn cut_to(s: &mut String, budget: u64) -> u64 {
    let mut used = 0u64;
    let mut end = s.len();
    for (i, c) in s.char_indices() {
        used += escaped_char_len(c);
        if used > budget {
            end = i;
            break;
        }
    }
    let cut = (s.len() - end) as u64;
    s.truncate(end);
    cut
}

/// The size the host will count for `data` with `effects` (summary within
/// [`MARGIN`]).
///
/// # Errors
/// `unknown` when `data` does not serialise.
pub fn measure(data: &RunData, effects: &[String]) -> Result<u64, ToolError> {
    let json = capsaga_sdk::serde_json::to_string(data)
        .map_err(|e| ToolError::unknown(format!("shell_run output: {e}")))?;
    Ok(json.len() as u64 + effects.iter().map(|e| e.len() as u64).sum::<u64>())
}

/// Makes `data` (with `changes` as they will be returned) fit under `cap`:
/// cuts stderr, then stdout, as needed.
///
/// # Errors
/// `quota-exceeded` when the output would not fit even with empty stdout
/// and stderr (the changes' pre-images alone are too large); nothing has
/// been changed then.
pub fn fit(
    data: &mut RunData,
    changes: &[Change],
    dry_run: bool,
    cap: u64,
) -> Result<(), ToolError> {
    let effects: Vec<String> = changes.iter().map(|c| c.effect(!dry_run)).collect();
    let stdout = std::mem::take(&mut data.stdout);
    let stderr = std::mem::take(&mut data.stderr);
    data.changes = changes.to_vec();
    let base = measure(data, &effects)?;
    data.changes = Vec::new();
    let room = cap.saturating_sub(MARGIN);
    if base > room {
        return Err(ToolError::new(
            ErrorKind::QuotaExceeded,
            format!(
                "the script ran but its output would be {base} bytes once JSON-escaped (the \
                 previous content of the {} paths it changes travels in it), over the host's \
                 output cap of {cap} bytes; nothing was changed",
                changes.len()
            ),
        )
        .hint("nothing was changed; change fewer or smaller existing files per call"));
    }
    let free = room - base;
    data.stdout = stdout;
    data.stderr = stderr;
    let (out_len, err_len) = (escaped_len(&data.stdout), escaped_len(&data.stderr));
    if out_len + err_len <= free {
        return Ok(());
    }
    // stderr keeps up to a quarter of the room, stdout the rest.
    let err_budget = err_len.min(free / 4);
    data.stderr_truncated_bytes += cut_to(&mut data.stderr, err_budget);
    let out_budget = free - escaped_len(&data.stderr);
    data.stdout_truncated_bytes += cut_to(&mut data.stdout, out_budget);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaped_len_matches_serde_json() {
        for s in [
            "plain",
            "\u{1}\u{2}\u{1f}",
            "q\"b\\n\n\t\r\u{8}\u{c}",
            "é€😀\u{7f}",
            "</script>\u{2028}",
        ] {
            let json = capsaga_sdk::serde_json::to_string(s).unwrap_or_default();
            assert_eq!(escaped_len(s) + 2, json.len() as u64, "{s:?}");
        }
    }

    #[test]
    fn cut_keeps_whole_characters() {
        let mut s = "a\u{1}é😀".to_string();
        let cut = cut_to(&mut s, 7);
        assert_eq!(s, "a\u{1}");
        assert_eq!(cut, 6);
        let mut s = "abc".to_string();
        assert_eq!(cut_to(&mut s, 10), 0);
        assert_eq!(s, "abc");
    }
}
