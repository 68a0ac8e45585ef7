//! Idempotency keys of saga steps (DESIGN §5): saga id + step sequence + tool
//! id + SHA-256 of the canonical arguments. The same logical step gets the same
//! key on every retry, whatever the key order or whitespace of its arguments.

use crate::json::canonical;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// SHA-256 of the canonical form of `args`, lowercase hex (64 characters).
pub fn args_hash(args: &Value) -> String {
    hex::encode(Sha256::digest(canonical(args).as_bytes()))
}

/// The idempotency key of a step: `<saga_id>:<step_seq>:<tool_id>:<args_hash>`.
pub fn step_key(saga_id: &str, step_seq: u64, tool_id: &str, args: &Value) -> String {
    format!("{saga_id}:{step_seq}:{tool_id}:{}", args_hash(args))
}

/// SHA-256 of arbitrary bytes, lowercase hex: used for component content
/// hashes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_ignores_key_order_but_not_values() {
        let a = json!({"path": "/a", "content": "x"});
        let b: Value = serde_json::from_str(r#"{ "content":"x",  "path":"/a" }"#).unwrap();
        assert_eq!(
            step_key("s", 1, "fs_write", &a),
            step_key("s", 1, "fs_write", &b)
        );
        assert_ne!(
            step_key("s", 1, "fs_write", &a),
            step_key("s", 2, "fs_write", &a)
        );
        assert_ne!(
            step_key("s", 1, "fs_write", &a),
            step_key("s", 1, "fs_write", &json!({"path": "/a", "content": "y"}))
        );
    }
}
