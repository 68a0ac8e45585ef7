//! Syntax highlighting of a neuron's Python source on the neurons page, by
//! syntect (Sublime Text grammars) into `<span class="hl-…">` elements
//! styled by `console.css` (no inline style: the CSP forbids it).
//!
//! The source is attacker-controlled (the model wrote it). syntect escapes
//! every character of it; on top of that, output holding any markup other
//! than those spans is discarded and the source shown as plain escaped
//! text, as is a source over [`MAX_HIGHLIGHT`] bytes or one the grammar's
//! regexes give up on (fancy-regex's backtracking limit).

use std::sync::OnceLock;
use syntect::html::{ClassStyle, ClassedHTMLGenerator};
use syntect::parsing::SyntaxSet;
use syntect::util::LinesWithEndings;

/// Most bytes of source highlighted; a longer one is shown plain.
pub const MAX_HIGHLIGHT: usize = 64 << 10;

const CLASSES: ClassStyle = ClassStyle::SpacedPrefixed { prefix: "hl-" };

fn syntaxes() -> &'static SyntaxSet {
    static SET: OnceLock<SyntaxSet> = OnceLock::new();
    SET.get_or_init(SyntaxSet::load_defaults_newlines)
}

/// `source` highlighted as Python: HTML whose only elements are `<span
/// class="hl-…">`, every character of the source escaped. `None` when it
/// is longer than [`MAX_HIGHLIGHT`] bytes, when the grammar fails on it,
/// or when the output holds any other markup.
pub fn python(source: &str) -> Option<String> {
    if source.len() > MAX_HIGHLIGHT {
        return None;
    }
    let set = syntaxes();
    let syntax = set.find_syntax_by_extension("py")?;
    let mut html = ClassedHTMLGenerator::new_with_class_style(syntax, set, CLASSES);
    for line in LinesWithEndings::from(source) {
        html.parse_html_for_line_which_includes_newline(line).ok()?;
    }
    let html = html.finalize();
    only_spans(&html).then_some(html)
}

/// True when every `<` of `html` opens `<span class="hl-…">` (class
/// names of letters, digits, `-`, `_`, `.`, `+` and spaces) or is
/// `</span>`, and no `>` or `"` stands outside those tags.
fn only_spans(html: &str) -> bool {
    let mut rest = html;
    loop {
        let Some(at) = rest.find(['<', '>', '"']) else {
            return true;
        };
        if !rest[at..].starts_with('<') {
            return false;
        }
        rest = &rest[at..];
        if let Some(after) = rest.strip_prefix("</span>") {
            rest = after;
            continue;
        }
        let Some(after) = rest.strip_prefix("<span class=\"hl-") else {
            return false;
        };
        let Some((classes, after)) = after.split_once("\">") else {
            return false;
        };
        let names_ok = classes
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '+' | ' '));
        if !names_ok {
            return false;
        }
        rest = after;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_is_highlighted_in_classed_spans() {
        let html = python("def f(x):\n    # a comment\n    return \"s\" + 1\n").unwrap();
        assert!(
            html.contains("hl-keyword") || html.contains("hl-storage"),
            "{html}"
        );
        assert!(html.contains("hl-comment"), "{html}");
        assert!(html.contains("hl-string"), "{html}");
        assert!(!html.contains("style="), "{html}");
    }

    #[test]
    fn hostile_source_stays_text() {
        for src in [
            "x = '</pre><script>alert(1)</script>'\n",
            "# </span><img src=x onerror=alert(1)>\n",
            "\"\"\"<svg onload=alert(1)>\n",
            "s = \"\\\"><b>\" & '&lt;'\n",
            "x = 1 </span></pre><script>\n",
        ] {
            let html = python(src).unwrap();
            assert!(only_spans(&html), "{html}");
            for bad in ["<script", "<img", "<svg", "<b>", "</pre", "&lt;'"] {
                assert!(!html.contains(bad), "{bad} in {html}");
            }
            assert!(html.contains("&lt;"), "{html}");
        }
    }

    #[test]
    fn only_spans_refuses_other_markup() {
        assert!(only_spans(
            "a <span class=\"hl-source hl-python\">b</span> &amp;"
        ));
        for bad in [
            "<b>x</b>",
            "<span class=\"hl-x\" onclick=\"y\">",
            "<span class=\"x\">",
            "<span class=\"hl-a\">b\"</span>",
            "a > b",
            "<span class=\"hl-a<b\">",
        ] {
            assert!(!only_spans(bad), "{bad}");
        }
    }

    #[test]
    fn too_long_a_source_is_not_highlighted() {
        assert!(python(&"x = 1\n".repeat(MAX_HIGHLIGHT / 6 + 1)).is_none());
    }
}
