//! The examples of a submission, run in fresh runner instances with no
//! grants: a scratch directory (granted read-write, nothing else) when an
//! example has files or names `$SCRATCH`, removed afterwards.

use crate::sandbox::neuron::{Runner, definition};
use crate::sandbox::{Bindings, Sandbox};
use capsaga_core::capability::Capability;
use capsaga_core::json::canonical;
use capsaga_core::meta::RawToolMeta;
use capsaga_core::neuron::proposal::{Example, SCRATCH_VAR, judge, substitute};
use capsaga_core::policy::Limits;
use capsaga_core::validate::ArgsValidator;
use serde::Serialize;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// Most bytes of an example's output or captured text kept in a report.
const REPORT_CLIP: usize = 2048;

/// What one example did.
#[derive(Debug, Clone, Serialize)]
pub struct ExampleResult {
    /// Its position.
    pub index: usize,
    /// Whether it did what it expected.
    pub passed: bool,
    /// What it expected (`{"data": ...}` or `{"error": kind}`; `{}`: any
    /// success).
    pub expected: Value,
    /// What came out: `{"data": ...}` or `{"error": {kind, message, llm_hint}}`.
    pub got: Value,
    /// Wall time, milliseconds.
    pub wall_ms: u64,
    /// What the instance printed, when it failed (clipped).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub stdio: String,
}

fn clip(s: &str) -> String {
    if s.len() <= REPORT_CLIP {
        return s.to_string();
    }
    let mut cut = REPORT_CLIP;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}… ({} bytes)", &s[..cut], s.len())
}

fn clip_value(v: &Value) -> Value {
    let text = canonical(v);
    if text.len() <= REPORT_CLIP {
        v.clone()
    } else {
        Value::String(clip(&text))
    }
}

/// A fresh scratch directory under `root` (mode 0700), canonical.
fn scratch_dir(root: &Path) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(root)?;
    let dir = root.join(uuid::Uuid::new_v4().to_string());
    let mut b = std::fs::DirBuilder::new();
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
    b.create(&dir)?;
    dir.canonicalize()
}

fn needs_scratch(ex: &Example) -> bool {
    !ex.files.is_empty() || canonical(&ex.args).contains(SCRATCH_VAR)
}

/// Everything one run of a submission's examples shares.
pub struct Trial<'a> {
    /// The engine.
    pub sandbox: &'a Sandbox,
    /// The runner.
    pub runner: &'a Runner,
    /// The candidate's meta.
    pub meta: &'a RawToolMeta,
    /// Its source.
    pub source: &'a str,
    /// Its args validator.
    pub validator: &'a ArgsValidator,
    /// Limits of each example.
    pub limits: Limits,
    /// Where scratch directories are made.
    pub scratch_root: &'a Path,
}

impl Trial<'_> {
    /// Run every example, in order.
    pub async fn run(&self, examples: &[Example]) -> Vec<ExampleResult> {
        let prepared =
            self.runner
                .neuron(definition(self.meta, self.source, self.limits.output_bytes));
        let mut out = Vec::with_capacity(examples.len());
        for (index, ex) in examples.iter().enumerate() {
            out.push(self.one(index, ex, &prepared).await);
        }
        out
    }

    async fn one(
        &self,
        index: usize,
        ex: &Example,
        prepared: &crate::sandbox::Prepared,
    ) -> ExampleResult {
        let expected = match (&ex.expect, &ex.expect_error) {
            (_, Some(k)) => json!({"error": k}),
            (Some(d), None) => json!({"data": d}),
            (None, None) => json!({}),
        };
        let fail = |got: Value| ExampleResult {
            index,
            passed: false,
            expected: expected.clone(),
            got,
            wall_ms: 0,
            stdio: String::new(),
        };
        let scratch = if needs_scratch(ex) {
            match self.prepare_scratch(ex) {
                Ok(d) => Some(d),
                Err(e) => {
                    return fail(json!({"error": {"kind": "unknown",
                    "message": format!("the host could not prepare the example's scratch directory: {e}"),
                    "llm_hint": "Retry later."}}));
                }
            }
        } else {
            None
        };
        let dir = scratch.as_ref().map(|d| d.to_string_lossy().into_owned());
        let args = substitute(&ex.args, dir.as_deref().unwrap_or("/scratch"));
        let result = if let Err(e) = self.validator.check_value(&args) {
            let got = json!({"error": {"kind": "invalid-args", "message": e.to_string(),
                "llm_hint": "The door refuses arguments that do not match args_schema."}});
            let passed = ex
                .expect_error
                .as_deref()
                .and_then(capsaga_core::neuron::proposal::parse_kind)
                == Some(capsaga_core::error::ErrorKind::InvalidArgs);
            ExampleResult {
                passed,
                ..fail(got)
            }
        } else {
            self.call(index, ex, prepared, &args, dir.as_deref(), &expected)
                .await
        };
        if let Some(d) = scratch {
            let _ = std::fs::remove_dir_all(d);
        }
        result
    }

    async fn call(
        &self,
        index: usize,
        ex: &Example,
        prepared: &crate::sandbox::Prepared,
        args: &Value,
        scratch: Option<&str>,
        expected: &Value,
    ) -> ExampleResult {
        let bindings = match scratch {
            Some(d) => Capability::parse(&format!("fs:write:{d}/**"))
                .map(|c| self.sandbox.factors().configure(&[c]))
                .unwrap_or_default(),
            None => Bindings::default(),
        };
        let canonical_args = canonical(args);
        let run = self.sandbox.trial(
            &self.meta.name,
            prepared,
            &bindings,
            &self.limits,
            &canonical_args,
        );
        let (res, diag) = match scratch {
            Some(d) => match super::scratch::bounded(Path::new(d), run).await {
                Ok(r) => r,
                Err(e) => (Err(e), Default::default()),
            },
            None => run.await,
        };
        let (passed, got) = match &res {
            Ok(Some(out)) => (
                judge(ex, Ok(&out.data)),
                json!({"data": clip_value(&out.data)}),
            ),
            Ok(None) => (false, json!({"data": null})),
            Err(e) => (
                judge(ex, Err(e.kind)),
                json!({"error": {"kind": e.kind.as_str(), "message": clip(&e.message), "llm_hint": clip(&e.llm_hint)}}),
            ),
        };
        ExampleResult {
            index,
            passed,
            expected: expected.clone(),
            got,
            wall_ms: diag.wall_ms,
            stdio: if passed {
                String::new()
            } else {
                clip(&diag.stdio)
            },
        }
    }

    fn prepare_scratch(&self, ex: &Example) -> std::io::Result<PathBuf> {
        let dir = scratch_dir(self.scratch_root)?;
        for (name, content) in &ex.files {
            if !capsaga_core::neuron::proposal::is_plain_file_name(name) {
                continue;
            }
            std::fs::write(dir.join(name), content)?;
        }
        Ok(dir)
    }
}
