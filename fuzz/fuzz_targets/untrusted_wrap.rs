//! Properties: wrapping never panics; a wrapped text has exactly one opening
//! and one closing marker; its body holds nothing a model could read as a
//! marker (decoded, folded); text without marker-like sequences is kept.
#![no_main]

use capsaga_untrusted::{
    contains_marker_like, count_markers, inner, neutralize_counted, wrap,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let w = wrap("tool:fuzz", "2026-01-01T00:00:00Z", text);
    assert_eq!(count_markers(&w), (1, 1), "{text:?}");
    let body = inner(&w).expect("wrapped shape");
    assert!(!contains_marker_like(body), "{text:?} -> {body:?}");
    let (out, n) = neutralize_counted(text);
    if n == 0 {
        assert_eq!(out, text);
    }
});
