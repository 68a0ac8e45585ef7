//! Properties: the parser never panics; a parsed capability prints to a string
//! that parses back to the same value.
#![no_main]

use capsaga_core::capability::Capability;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(cap) = Capability::parse(text) {
        let printed = cap.to_string();
        let again = Capability::parse(&printed).unwrap_or_else(|e| panic!("{printed:?} does not reparse: {e}"));
        assert_eq!(cap, again, "round trip changed {text:?}");
    }
});
