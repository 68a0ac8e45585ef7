//! Properties of information flow's provenance matching (issue 47), on a
//! user's message, an untrusted page and a value, all arbitrary:
//!
//! - nothing panics (indexing text or JSON, judging a string or a JSON
//!   value, deciding a call);
//! - with only untrusted data in the ledger, no value is ever trusted, and
//!   a call whose argument needs a trusted value is never allowed;
//! - a value found in both the user's message and the page is trusted: the
//!   user's whole message, used as a value, is trusted (when it has at
//!   least three letters or digits, is not a bare number, and holds no
//!   encoding or base64 run the strict reading of a trusted source leaves
//!   alone);
//! - adding untrusted data never takes trust away from a value.
#![no_main]

use capsaga_flow::{
    FlowCall, Integrity, Label, Ledger, OutputLabels, Source, Surface, decide, of_str,
};
use capsaga_core::policy::PolicyFile;
use libfuzzer_sys::fuzz_target;

fn user() -> Label {
    Label::trusted(Source::User {
        principal: "fuzz".into(),
    })
}

fn page() -> Label {
    Label::untrusted(Source::Tool {
        tool: "web_fetch".into(),
        component: "c0ffee".into(),
        saga: "s".into(),
        step: 1,
    })
}

/// Whether the strict reading of a trusted source reads `u` as a value
/// reads it (no decoding layer, no base64 run).
fn plain(u: &str) -> bool {
    let b64 = |c: char| c.is_ascii_alphanumeric() || "+/-_=".contains(c);
    let mut run = 0;
    for c in u.chars() {
        run = if b64(c) { run + 1 } else { 0 };
        if run >= 16 {
            return false;
        }
    }
    !u.contains(['%', '&', '\\'])
        && u.chars().filter(|c| c.is_alphanumeric()).count() >= 3
        && !u
            .trim()
            .chars()
            .all(|c| c.is_ascii_digit() || ",. '".contains(c))
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut parts = text.splitn(3, '\u{0}');
    let (u, p, v) = (
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
    );
    let ctx = vec!["file".to_string(), "id".to_string()];
    let rules = PolicyFile::parse("[tools.t]\nsinks = { v = \"trusted\" }\n")
        .and_then(|f| f.check("/h"))
        .expect("policy")
        .flow;

    // Only untrusted data: nothing trusted, nothing allowed.
    let mut l = Ledger::new();
    l.add_text(page(), p);
    l.add_text(page(), u);
    if let Ok(j) = serde_json::from_str::<serde_json::Value>(v) {
        l.add_json(page(), &j, &OutputLabels::whole(Integrity::Untrusted));
    }
    for value in [u, p, v] {
        assert!(!of_str(&l, value, &ctx).origin.is_trusted(), "{value:?}");
        let args = serde_json::json!({ "v": value });
        let call = FlowCall {
            tool: "t",
            neuron: false,
            has_side_effects: true,
            args: &args,
            surface: Surface::Turn,
        };
        assert!(
            !matches!(decide(&call, &l, &rules), capsaga_flow::FlowDecision::Allow),
            "{value:?}"
        );
    }

    // The user's message and the page.
    let mut l = Ledger::new();
    l.add_text(user(), u);
    let before = of_str(&l, v, &ctx).origin.is_trusted();
    l.add_text(page(), p);
    l.add_text(page(), u);
    let after = of_str(&l, v, &ctx).origin.is_trusted();
    assert!(!before || after, "{v:?} lost its trust");
    if plain(u) {
        let got = of_str(&l, u, &ctx);
        assert!(got.origin.is_trusted(), "{u:?}: {got:?}");
    }
});
