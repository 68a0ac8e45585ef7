//! `code_run` (seed 003's `code.run`, DESIGN §8): agent-written Python run
//! once on the neuron runner, as a built-in tool through the door.
//!
//! - **dry-run** (what the human approves, and the step's pre-image): the
//!   code's SHA-256, the purpose, every input read from the tool's grants
//!   and hashed, where outputs would go. The tool is high risk, so every
//!   call needs a human; the approval is bound to that output, whose data
//!   holds the hashes: a changed input or code makes it stale (issue 13).
//! - **execute**: the inputs are read again and copied into a private
//!   directory the instance sees read-only (the code reads exactly the
//!   bytes whose hashes the output records); the code runs in a fresh runner
//!   instance (`source-kind::script`) with that directory and an empty
//!   scratch directory as its only preopens, no network, no environment,
//!   under the tool's limits; the scratch files whose names and extensions
//!   are allowed are then copied, never replacing anything, into
//!   `output_dir`, which must lie under an `fs:write` grant of `code_run`.
//! - **compensate**: each copied file is removed while it still has the
//!   bytes recorded; one changed since is reported `unrevertible` and left.
//!
//! Enabled by a `[tools.code_run]` section in the policy (default deny,
//! like every tool), with the neuron runner built.

pub mod journal;

/// The tool's name (its policy section is `[tools.code_run]`).
pub const NAME: &str = "code_run";

use super::Neurons;
use crate::registry::BuiltinTool;
use crate::sandbox::factors::fs::host_files as files;
use crate::sandbox::factors::fs::journal::CallJournal;
use crate::sandbox::neuron::{NamedFile, SourceKind, definition};
use crate::sandbox::{Bindings, Op, Sandbox};
use async_trait::async_trait;
use capsaga_core::capability::Capability;
use capsaga_core::error::{ErrorKind, ToolError};
use capsaga_core::idempotency::sha256_hex;
use capsaga_core::meta::{RawToolMeta, Risk};
use capsaga_core::neuron::code_run::{
    ARGS_SCHEMA, CodeRunArgs, InputDigest, MAX_INPUT_BYTES, MAX_OUTPUT_FILE_BYTES, MAX_OUTPUTS,
    OutputFile, Plan, is_input_name, output_refusal,
};
use capsaga_core::policy::Limits;
use capsaga_core::tool::{CallContext, ToolOutput};
use capsaga_guest_fs::{Change, JournalError};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The built-in tool.
pub struct CodeRun {
    pub(super) sandbox: Arc<Sandbox>,
    pub(super) neurons: Arc<Neurons>,
    /// Extensions of the output files copied out (lowercase, no dot).
    pub(super) extensions: Vec<String>,
    /// Limits of the run inside (the tool's section).
    pub(super) limits: Limits,
}

fn bad_args(e: impl std::fmt::Display) -> ToolError {
    ToolError::with_hint(
        ErrorKind::InvalidArgs,
        format!("code_run arguments: {e}"),
        "Follow code_run's argument schema.",
    )
}

/// A private directory under `root` (mode 0700), canonical.
fn private_dir(root: &Path) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(root)?;
    let dir = root.join(format!("code-run-{}", uuid::Uuid::new_v4()));
    let mut b = std::fs::DirBuilder::new();
    std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
    b.create(&dir)?;
    dir.canonicalize()
}

/// Record the output `name` of `dir` in the host's file journal of the
/// step before it is created.
fn journal_output(
    journal: Option<&CallJournal>,
    dir: &std::fs::File,
    name: &str,
    shown: &str,
) -> Result<(), ToolError> {
    let Some(j) = journal else {
        return Ok(());
    };
    j.with(|g| {
        let loc = capsaga_guest_fs::locate(g.roots(), dir, name, false)
            .map_err(|e| JournalError::Io(format!("{shown}: {e}")))?;
        g.before(&loc, Change::Create)
    })
    .map_err(|e| match e {
        JournalError::Quota(m) => ToolError::with_hint(
            ErrorKind::QuotaExceeded,
            m,
            "Write fewer or smaller outputs, or ask the operator.",
        ),
        other => host_error("journal an output before copying it", other),
    })
}

fn host_error(what: &str, e: impl std::fmt::Display) -> ToolError {
    ToolError::with_hint(
        ErrorKind::Unknown,
        format!("the host could not {what}: {e}"),
        "Retry later.",
    )
}

/// Removes the directory when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Each input of a run: its name, path and SHA-256, and its bytes as read.
type ReadInputs = Vec<(InputDigest, Vec<u8>)>;

impl CodeRun {
    /// The arguments and each input as read now, with its bytes.
    fn read_inputs(
        &self,
        args: &Value,
        bindings: &Bindings,
    ) -> Result<(CodeRunArgs, ReadInputs), ToolError> {
        let a: CodeRunArgs = serde_json::from_value(args.clone()).map_err(bad_args)?;
        let mut inputs = Vec::with_capacity(a.inputs.len());
        for (name, path) in &a.inputs {
            if !is_input_name(name) {
                return Err(bad_args(format!(
                    "input name {name:?} is not a plain file name"
                )));
            }
            let at = files::locate(&bindings.fs.preopens, path, "input")?;
            let bytes = files::read(&at, path, MAX_INPUT_BYTES)?;
            inputs.push((
                InputDigest {
                    name: name.clone(),
                    path: path.clone(),
                    sha256: sha256_hex(&bytes),
                    bytes: bytes.len() as u64,
                },
                bytes,
            ));
        }
        Ok((a, inputs))
    }

    /// `output_dir` opened beneath its preopen, which must be writable
    /// when `write` (execute); a dry run sees every grant read-only.
    fn output_dir(
        a: &CodeRunArgs,
        bindings: &Bindings,
        write: bool,
    ) -> Result<Option<std::fs::File>, ToolError> {
        let Some(dir) = &a.output_dir else {
            return Ok(None);
        };
        let at = files::locate(&bindings.fs.preopens, dir, "output_dir")?;
        if write && !at.writable {
            return Err(ToolError::with_hint(
                ErrorKind::PermissionDenied,
                format!("output_dir {dir} is not under an fs:write grant of code_run"),
                "Give an output_dir the operator granted for writing, or omit it.",
            ));
        }
        files::open_dir(&at, dir).map(Some)
    }

    fn plan_output(plan: &Plan) -> ToolOutput {
        ToolOutput {
            data: serde_json::to_value(plan).unwrap_or(Value::Null),
            effects: plan.effects(),
            next_hint: None,
            summary: plan.summary(),
        }
    }

    async fn execute(
        &self,
        ctx: &CallContext,
        args: &Value,
        bindings: &Bindings,
    ) -> Result<ToolOutput, ToolError> {
        let (a, inputs) = self.read_inputs(args, bindings)?;
        let out_dir = Self::output_dir(&a, bindings, true)?;
        let plan = Plan::new(
            &a,
            inputs.iter().map(|(d, _)| d.clone()).collect(),
            &self.extensions,
        );
        let scratch = Scratch(
            private_dir(&self.neurons.scratch_root)
                .map_err(|e| host_error("make a scratch directory", e))?,
        );
        let in_dir = scratch.0.join("inputs");
        let out = scratch.0.join("outputs");
        let mut named = Vec::with_capacity(inputs.len());
        std::fs::create_dir(&in_dir)
            .and_then(|()| std::fs::create_dir(&out))
            .map_err(|e| host_error("make a scratch directory", e))?;
        for (d, bytes) in &inputs {
            let p = in_dir.join(&d.name);
            std::fs::write(&p, bytes).map_err(|e| host_error("copy an input", e))?;
            named.push(NamedFile {
                name: d.name.clone(),
                path: p.to_string_lossy().into_owned(),
            });
        }
        let (result, stdio) = self.run(&a, &plan, &in_dir, &out, named, ctx).await;
        let data = result?;
        let copied = match &out_dir {
            Some(dir) => self.copy_out(
                &out,
                dir,
                a.output_dir.as_deref().unwrap_or(""),
                &ctx.idempotency_key,
                bindings.fs.journal.as_ref(),
            )?,
            None => (Vec::new(), Vec::new()),
        };
        let (outputs, skipped) = copied;
        let mut effects: Vec<String> = outputs
            .iter()
            .map(|o| format!("created {} ({} bytes)", o.path, o.bytes))
            .collect();
        effects.insert(0, format!("ran Python code sha256:{}", plan.code_sha256));
        Ok(ToolOutput {
            data: json!({
                "result": data.get("result").cloned().unwrap_or(Value::Null),
                "stdout": data.get("stdout").cloned().unwrap_or(Value::Null),
                "stdout_truncated": data.get("stdout_truncated").cloned().unwrap_or(Value::Bool(false)),
                "code_sha256": plan.code_sha256,
                "inputs": plan.inputs,
                "outputs": outputs,
                "skipped_outputs": skipped,
                "stdio": stdio,
            }),
            effects,
            next_hint: None,
            summary: format!(
                "ran code {} ({}), {} output file(s)",
                &plan.code_sha256[..12],
                a.purpose,
                outputs.len()
            ),
        })
    }

    /// Run the code in a fresh runner instance: the inputs' copies
    /// read-only, `out` read-write, nothing else.
    async fn run(
        &self,
        a: &CodeRunArgs,
        plan: &Plan,
        in_dir: &Path,
        out: &Path,
        inputs: Vec<NamedFile>,
        ctx: &CallContext,
    ) -> (Result<Value, ToolError>, String) {
        let caps = [
            format!("fs:read:{}/**", in_dir.display()),
            format!("fs:write:{}/**", out.display()),
        ];
        let caps: Result<Vec<Capability>, _> = caps.iter().map(|c| Capability::parse(c)).collect();
        let caps = match caps {
            Ok(c) => c,
            Err(e) => {
                return (
                    Err(host_error("grant the scratch directory", e)),
                    String::new(),
                );
            }
        };
        let bindings = self.sandbox.factors().configure(&caps);
        let meta = RawToolMeta {
            name: NAME.into(),
            version: plan.code_sha256[..12].to_string(),
            output_fields: Vec::new(),
            ..self.meta()
        };
        let mut def = definition(&meta, &a.code, self.limits.output_bytes);
        def.kind = SourceKind::Script;
        def.inputs = inputs;
        def.scratch_dir = Some(out.to_string_lossy().into_owned());
        let prepared = self.neurons.runner.neuron(def);
        let run = self
            .sandbox
            .run_script(&prepared, &bindings, &self.limits, ctx);
        let (res, diag) = match super::scratch::bounded(out, run).await {
            Ok(r) => r,
            Err(e) => return (Err(e), String::new()),
        };
        let res = res.and_then(|o| {
            o.map(|o| o.data)
                .ok_or_else(|| host_error("read the run's output", "the runner returned none"))
        });
        (res, diag.stdio)
    }

    /// Copy the allowed files of `out` into `dir`, after recording them in
    /// the journal ([`journal`]) under the step's `key` and, each before it
    /// is created, in the host's file journal of the step when the call has
    /// one (`host_journal`, issue 28); a failure part-way removes what was
    /// copied.
    fn copy_out(
        &self,
        out: &Path,
        dir: &std::fs::File,
        shown_dir: &str,
        key: &str,
        host_journal: Option<&CallJournal>,
    ) -> Result<(Vec<OutputFile>, Vec<Value>), ToolError> {
        let mut keep = Vec::new();
        let mut skipped = Vec::new();
        let mut entries: Vec<_> = std::fs::read_dir(out)
            .map_err(|e| host_error("list the outputs", e))?
            .filter_map(Result::ok)
            .collect();
        entries.sort_by_key(std::fs::DirEntry::file_name);
        for e in entries {
            let name = e.file_name().to_string_lossy().into_owned();
            let ft = e
                .file_type()
                .map_err(|e| host_error("list the outputs", e))?;
            let why = if !ft.is_file() {
                Some("not a regular file".to_string())
            } else if keep.len() >= MAX_OUTPUTS {
                Some(format!("more than {MAX_OUTPUTS} output files"))
            } else {
                output_refusal(&name, &self.extensions)
            };
            if let Some(why) = why {
                skipped.push(json!({"name": name, "reason": why}));
                continue;
            }
            let len = e.metadata().map(|m| m.len()).unwrap_or(u64::MAX);
            if len > MAX_OUTPUT_FILE_BYTES {
                skipped.push(json!({"name": name,
                    "reason": format!("{len} bytes, over {MAX_OUTPUT_FILE_BYTES}")}));
                continue;
            }
            let bytes = std::fs::read(e.path()).map_err(|e| host_error("read an output", e))?;
            keep.push((name, bytes));
        }
        let planned: Vec<OutputFile> = keep
            .iter()
            .map(|(name, bytes)| OutputFile {
                name: name.clone(),
                path: format!("{}/{name}", shown_dir.trim_end_matches('/')),
                sha256: sha256_hex(bytes),
                bytes: bytes.len() as u64,
            })
            .collect();
        if planned.is_empty() {
            return Ok((planned, skipped));
        }
        self.journal()
            .write(key, &planned)
            .map_err(|e| host_error("record the outputs before copying them", e))?;
        for (i, (o, (_, bytes))) in planned.iter().zip(&keep).enumerate() {
            let created = journal_output(host_journal, dir, &o.name, &o.path)
                .and_then(|()| files::create(dir, &o.name, &o.path, bytes));
            if let Err(e) = created {
                for m in &planned[..i] {
                    let _ =
                        files::remove_if_unchanged(dir, &m.name, &m.sha256, MAX_OUTPUT_FILE_BYTES);
                }
                self.journal().remove(key);
                return Err(e.hint(
                    "nothing was kept: choose an output_dir where the output names are free",
                ));
            }
        }
        Ok((planned, skipped))
    }

    fn journal(&self) -> journal::Journal {
        journal::Journal::new(&self.neurons.state_dir)
    }

    /// Remove the outputs `out` names or, when `out` is the dry-run
    /// pre-image (a step in doubt after a crash: it names no outputs), the
    /// ones the journal recorded for the step before copying.
    fn compensate(
        &self,
        out: &ToolOutput,
        ctx: &CallContext,
        bindings: &Bindings,
    ) -> Result<(), ToolError> {
        let outputs: Vec<OutputFile> = match out.data.get("outputs") {
            Some(o) => serde_json::from_value(o.clone()).unwrap_or_default(),
            None => self
                .journal()
                .read(&ctx.idempotency_key)
                .unwrap_or_default(),
        };
        let mut changed = Vec::new();
        for o in outputs.iter().rev() {
            let Some((dir, name)) = o.path.rsplit_once('/') else {
                continue;
            };
            let dir = if dir.is_empty() { "/" } else { dir };
            let at = files::locate(&bindings.fs.preopens, dir, "output_dir")?;
            let d = files::open_dir(&at, dir)?;
            match files::remove_if_unchanged(&d, name, &o.sha256, MAX_OUTPUT_FILE_BYTES) {
                Ok(files::Removal::Removed | files::Removal::Absent) => {}
                Ok(files::Removal::Changed(now)) => changed.push(format!("{} ({now})", o.path)),
                Err(e) => changed.push(format!("{} ({e})", o.path)),
            }
        }
        if changed.is_empty() {
            self.journal().remove(&ctx.idempotency_key);
            Ok(())
        } else {
            Err(ToolError::with_hint(
                ErrorKind::Unrevertible,
                format!(
                    "code_run outputs changed since they were written, left in place: {}",
                    changed.join(", ")
                ),
                "A human must decide about these files.",
            ))
        }
    }
}

#[async_trait]
impl BuiltinTool for CodeRun {
    fn meta(&self) -> RawToolMeta {
        RawToolMeta {
            name: NAME.into(),
            description: "Run Python code once (no network) over named input files from granted directories, for a computation no tool does; output files it writes under capsaga.scratch_dir (allowed extensions only) are copied into output_dir. A human approves every run, seeing the code, its purpose and each input's SHA-256.".into(),
            args_schema: ARGS_SCHEMA.into(),
            has_side_effects: true,
            risk: Risk::High,
            returns_untrusted: true,
            idempotent: false,
            supports_dry_run: true,
            capabilities: vec!["fs:read:*".into(), "fs:write:*".into()],
            version: "0.1.0".into(),
            output_fields: Vec::new(),
        }
    }

    async fn call(
        &self,
        op: &Op,
        ctx: &CallContext,
        args: &Value,
        bindings: &Bindings,
    ) -> Result<Option<ToolOutput>, ToolError> {
        if let Some(out) = op.undone_output() {
            return self.compensate(out, ctx, bindings).map(|()| None);
        }
        match op.name() {
            "dry-run" => {
                let (a, inputs) = self.read_inputs(args, bindings)?;
                Self::output_dir(&a, bindings, false)?;
                let plan = Plan::new(
                    &a,
                    inputs.into_iter().map(|(d, _)| d).collect(),
                    &self.extensions,
                );
                Ok(Some(Self::plan_output(&plan)))
            }
            _ => self.execute(ctx, args, bindings).await.map(Some),
        }
    }
}
