//! `code_run` (seed 003's `code.run`), the pure part: its arguments, the
//! rules for its inputs and outputs, and the effect a human approves.
//!
//! `code_run` runs agent-written Python once, in a fresh neuron-runner
//! instance with no network: named input files (read from the tool's
//! `fs:` grants and copied, so the code reads the bytes that were hashed)
//! and a scratch directory for outputs. At commit the host copies the
//! outputs whose extension the operator allows into a granted directory;
//! compensation removes them. Every run needs a human (risk high), and the
//! approval is bound to the code's SHA-256 and each input's SHA-256 (they
//! are the dry run's data: a change makes the approval stale, see
//! `crate::approval::Effect`).

use crate::idempotency::sha256_hex;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Extensions of the output files copied out of the scratch directory when
/// the policy names none (`[neurons] code_run_extensions`).
pub const DEFAULT_EXTENSIONS: [&str; 7] = ["csv", "json", "txt", "md", "svg", "png", "html"];
/// Most input files of one run.
pub const MAX_INPUTS: usize = 16;
/// Largest input file, bytes.
pub const MAX_INPUT_BYTES: u64 = 16 * 1024 * 1024;
/// Most output files copied out of one run.
pub const MAX_OUTPUTS: usize = 32;
/// Largest output file copied, bytes.
pub const MAX_OUTPUT_FILE_BYTES: u64 = 16 * 1024 * 1024;
/// Most bytes a run may keep in its scratch directory at once (all files
/// together); the host checks every [`SCRATCH_POLL_MS`] and stops the run
/// when it is over.
pub const MAX_SCRATCH_BYTES: u64 = 128 * 1024 * 1024;
/// Most files and directories in a run's scratch directory.
pub const MAX_SCRATCH_ENTRIES: usize = 1024;
/// How often the host measures the scratch directory during a run, ms.
pub const SCRATCH_POLL_MS: u64 = 25;
/// Largest source, bytes.
pub const MAX_CODE_BYTES: usize = 64 * 1024;
/// Longest purpose, characters.
pub const MAX_PURPOSE_CHARS: usize = 500;

/// The JSON Schema of `code_run`'s arguments (draft 2020-12).
pub const ARGS_SCHEMA: &str = r#"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "additionalProperties": false,
  "required": ["code", "purpose"],
  "properties": {
    "code": {"type": "string", "minLength": 1, "maxLength": 65536,
      "description": "Python 3 source, run once at top level. Inputs are read with open(capsaga.inputs[name]) (import capsaga) and outputs written under capsaga.scratch_dir; set the global `result` to return a JSON value."},
    "purpose": {"type": "string", "minLength": 1, "maxLength": 500,
      "description": "Why this code runs, in one sentence: shown to the human who approves it."},
    "inputs": {"type": "object", "maxProperties": 16,
      "propertyNames": {"pattern": "^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$"},
      "additionalProperties": {"type": "string", "minLength": 1, "maxLength": 4096},
      "description": "Input files: name -> absolute path inside a directory granted to code_run."},
    "output_dir": {"type": "string", "minLength": 1, "maxLength": 4096,
      "description": "Absolute path of a granted directory the output files are copied into at commit (omit: outputs are discarded)."}
  }
}"#;

/// `code_run`'s arguments (already validated against [`ARGS_SCHEMA`]).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CodeRunArgs {
    /// The Python source.
    pub code: String,
    /// Why it runs, for the approver.
    pub purpose: String,
    /// Input name → absolute path.
    #[serde(default)]
    pub inputs: BTreeMap<String, String>,
    /// Where outputs are copied at commit.
    #[serde(default)]
    pub output_dir: Option<String>,
}

/// One input as hashed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputDigest {
    /// The name the code uses.
    pub name: String,
    /// The path it was read from.
    pub path: String,
    /// SHA-256 of its bytes, lowercase hex.
    pub sha256: String,
    /// Its size, bytes.
    pub bytes: u64,
}

/// One output file copied into the output directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputFile {
    /// Its file name.
    pub name: String,
    /// Where it was copied (absolute).
    pub path: String,
    /// SHA-256 of its bytes, lowercase hex (compensation removes the file
    /// only while it still has them).
    pub sha256: String,
    /// Its size, bytes.
    pub bytes: u64,
}

/// Whether `name` is an input name the code can use: a plain file name
/// (letters, digits, `.`, `_`, `-`; not starting with `.`; 1-128 bytes).
pub fn is_input_name(name: &str) -> bool {
    super::proposal::is_plain_file_name(name)
}

/// Why an output file of the scratch directory is not copied, or `None`
/// when it is: its name must be a plain file name whose extension
/// (case-insensitive) is in `allowed`.
pub fn output_refusal(name: &str, allowed: &[String]) -> Option<String> {
    if !super::proposal::is_plain_file_name(name) {
        return Some("not a plain file name".into());
    }
    let Some((_, ext)) = name.rsplit_once('.') else {
        return Some("no extension".into());
    };
    let ext = ext.to_ascii_lowercase();
    if allowed.iter().any(|a| a.eq_ignore_ascii_case(&ext)) {
        None
    } else {
        Some(format!(
            "extension .{ext} is not allowed (allowed: {})",
            allowed.join(", ")
        ))
    }
}

/// What a human approves for one run: the dry run's output of `code_run`.
/// Its data carries the code's and every input's SHA-256, so an approval
/// is bound to them (`crate::approval::Effect` compares the data's hash at
/// claim time).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// SHA-256 of the code, lowercase hex.
    pub code_sha256: String,
    /// The purpose as given.
    pub purpose: String,
    /// The inputs, by name.
    pub inputs: Vec<InputDigest>,
    /// Where outputs go, if anywhere.
    pub output_dir: Option<String>,
    /// The extensions copied.
    pub output_extensions: Vec<String>,
}

impl Plan {
    /// The plan of `args` with its hashed `inputs`.
    pub fn new(args: &CodeRunArgs, inputs: Vec<InputDigest>, extensions: &[String]) -> Plan {
        Plan {
            code_sha256: sha256_hex(args.code.as_bytes()),
            purpose: args.purpose.clone(),
            inputs,
            output_dir: args.output_dir.clone(),
            output_extensions: extensions.to_vec(),
        }
    }

    /// The lines the approver reads: the code's hash and purpose, each
    /// input with its hash, and where outputs go.
    pub fn effects(&self) -> Vec<String> {
        let mut out = vec![format!(
            "run Python code sha256:{} once, without network (purpose: {})",
            self.code_sha256, self.purpose
        )];
        for i in &self.inputs {
            out.push(format!(
                "read {} as input `{}` ({} bytes, sha256:{})",
                i.path, i.name, i.bytes, i.sha256
            ));
        }
        out.push(match &self.output_dir {
            Some(d) => format!(
                "copy the output files it writes (.{}) into {d}",
                self.output_extensions.join(", .")
            ),
            None => "keep no output file (no output_dir)".into(),
        });
        out
    }

    /// One line for the approver.
    pub fn summary(&self) -> String {
        format!(
            "would run Python code {} with {} input(s): {}",
            &self.code_sha256[..12.min(self.code_sha256.len())],
            self.inputs.len(),
            self.purpose
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exts() -> Vec<String> {
        DEFAULT_EXTENSIONS.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn outputs_need_an_allowed_extension_and_a_plain_name() {
        assert_eq!(output_refusal("stats.csv", &exts()), None);
        assert_eq!(output_refusal("Stats.CSV", &exts()), None);
        for bad in [
            "run.sh",
            "x.py",
            "noext",
            ".hidden.csv",
            "../up.csv",
            "a/b.csv",
            "a b.csv",
            "x.csv\u{0}",
            "",
        ] {
            assert!(output_refusal(bad, &exts()).is_some(), "{bad:?}");
        }
    }

    #[test]
    fn input_names_are_plain() {
        assert!(is_input_name("sales.csv"));
        for bad in ["", ".env", "../x", "a/b", "x\u{202e}y"] {
            assert!(!is_input_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn the_plan_names_the_code_and_every_input_hash() {
        let args = CodeRunArgs {
            code: "result = 1".into(),
            purpose: "count".into(),
            inputs: BTreeMap::new(),
            output_dir: Some("/w/out".into()),
        };
        let input = InputDigest {
            name: "a.csv".into(),
            path: "/w/a.csv".into(),
            sha256: "ab".repeat(32),
            bytes: 3,
        };
        let plan = Plan::new(&args, vec![input], &exts());
        assert_eq!(plan.code_sha256, sha256_hex(b"result = 1"));
        let e = plan.effects().join("\n");
        assert!(e.contains(&plan.code_sha256), "{e}");
        assert!(e.contains(&"ab".repeat(32)), "{e}");
        assert!(e.contains("/w/out"), "{e}");
        let other = Plan::new(
            &CodeRunArgs {
                code: "result = 2".into(),
                ..args
            },
            Vec::new(),
            &exts(),
        );
        assert_ne!(plan, other);
    }

    #[test]
    fn the_schema_compiles_and_refuses_unknown_fields() {
        let schema: serde_json::Value =
            serde_json::from_str(ARGS_SCHEMA).unwrap_or_else(|e| panic!("{e}"));
        let v = crate::validate::ArgsValidator::new("code_run", &schema)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            v.check_value(&serde_json::json!({"code": "x=1", "purpose": "p"}))
                .is_ok()
        );
        assert!(
            v.check_value(&serde_json::json!({"code": "x=1", "purpose": "p", "net": true}))
                .is_err()
        );
        assert!(
            v.check_value(
                &serde_json::json!({"code": "x=1", "purpose": "p", "inputs": {"../x": "/a"}})
            )
            .is_err()
        );
    }
}
