//! Native unit tests: `cargo test` in this crate (no component, no host).
//! `round_trip` checks the compensation contract on a temporary granted
//! directory.

use super::*;
use capsaga_sdk::testing::{GrantedDir, context, round_trip};

#[test]
fn meta_is_valid() {
    let meta = capsaga_sdk::describe::<{{type}}>(env!("CARGO_PKG_VERSION"));
    assert_eq!(meta.check(), Ok(()));
    assert_eq!(meta.name, "{{name}}");
}

#[test]
fn appends_a_line() {
    let dir = GrantedDir::new().unwrap();
    dir.write("notes.txt", "first").unwrap();
    let args = Args { path: dir.path_str("notes.txt"), line: "second".into() };
    let out = dir.run(|| {{type}}::execute(&context().build(), args)).unwrap();
    assert_eq!(dir.read("notes.txt").unwrap(), b"first\nsecond\n");
    assert!(out.data_as::<Appended>().unwrap().existed);
}

#[test]
fn round_trip_on_an_existing_and_a_new_file() {
    let dir = GrantedDir::new().unwrap();
    dir.write("notes.txt", "first\n").unwrap();
    for file in ["notes.txt", "new.txt"] {
        let args = json!({"path": dir.path_str(file), "line": "added"});
        let r = round_trip::<{{type}}>(&dir, &args).unwrap();
        assert!(r.third_party_checked);
    }
}

#[test]
fn paths_outside_the_grant_are_refused() {
    let dir = GrantedDir::new().unwrap();
    let args = Args { path: "/etc/passwd".into(), line: "x".into() };
    let err = dir.run(|| {{type}}::execute(&context().build(), args)).err().unwrap();
    assert_eq!(err.kind, ErrorKind::PermissionDenied);
}
