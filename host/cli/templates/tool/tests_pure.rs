//! Native unit tests: `cargo test` in this crate (no component, no host).

use super::*;
use capsaga_sdk::testing::context;

#[test]
fn meta_is_valid() {
    let meta = capsaga_sdk::describe::<{{type}}>(env!("CARGO_PKG_VERSION"));
    assert_eq!(meta.check(), Ok(()));
    assert_eq!(meta.name, "{{name}}");
}

#[test]
fn counts_lines_words_and_bytes() {
    let args: Args = capsaga_sdk::parse_args(r#"{"text":"a b\nc"}"#).unwrap();
    let out = {{type}}::execute(&context().build(), args).unwrap();
    let counts: Counts = out.data_as().unwrap();
    assert_eq!(counts, Counts { lines: 2, words: 3, bytes: 5 });
}

#[test]
fn unknown_arguments_are_refused() {
    let err = capsaga_sdk::parse_args::<Args>(r#"{"txt":"x"}"#).err().unwrap();
    assert_eq!(err.kind, ErrorKind::InvalidArgs);
}
