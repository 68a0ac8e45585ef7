//! `capsaga test-tool X.wasm [--grant CAP]... [--args JSON] [--dry-run |
//! --roundtrip]`: run a built component through the real sandbox and the
//! one dispatch door, without a policy file (the grants on the command line
//! are the policy, see `cli::adhoc`). State lives in a temporary directory
//! that is removed afterwards.
//!
//! Without a flag the tool's call runs as a one-step saga (like `capsaga
//! call`); `--dry-run` previews it in the read-only sandbox; `--roundtrip`
//! checks the compensation contract (`roundtrip.rs`).

mod roundtrip;

use super::render::Out;
use super::{Failure, adhoc, exit};
use capsaga_door::dispatch::Dispatcher;
use capsaga_door::host::Host;
use capsaga_door::registry::LoadedTool;
use clap::Args;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `capsaga test-tool ...`
#[derive(Debug, Args)]
pub struct TestToolArgs {
    /// The component file (`*.wasm`).
    pub wasm: PathBuf,
    /// A capability granted to the tool (repeatable), e.g.
    /// `fs:write:/tmp/t/**`; `~` is the current directory.
    #[arg(long = "grant", value_name = "CAPABILITY")]
    pub grants: Vec<String>,
    /// The call's arguments as JSON text.
    #[arg(long, default_value = "{}")]
    pub args: String,
    /// Only the dry-run, in the read-only sandbox.
    #[arg(long, conflicts_with = "roundtrip")]
    pub dry_run: bool,
    /// Check the compensation contract: dry-run changes nothing; execute,
    /// then `undo`, leaves the granted directories byte-identical; undo after
    /// a third party's change fails `unrevertible` and keeps that change.
    /// The granted directories are restored afterwards.
    #[arg(long)]
    pub roundtrip: bool,
}

fn config_failure(message: impl Into<String>) -> Failure {
    Failure {
        code: exit::CONFIG,
        message: message.into(),
    }
}

/// The tool's name as scripts/build-components names the file.
fn name_from_file(wasm: &Path) -> String {
    wasm.file_stem()
        .map(|s| s.to_string_lossy().replace('-', "_"))
        .unwrap_or_default()
}

/// A host over a temporary tools directory holding only `wasm`, with the
/// tool listed under its real name (found from its meta when the file name
/// differs).
async fn open(
    args: &TestToolArgs,
    tmp: &Path,
) -> Result<(Arc<Host>, Arc<LoadedTool>, adhoc::Adhoc), Failure> {
    let tools = tmp.join("tools");
    let state = tmp.join("state");
    std::fs::create_dir_all(&tools).map_err(|e| config_failure(e.to_string()))?;
    let file = args
        .wasm
        .file_name()
        .ok_or_else(|| config_failure("the component path has no file name"))?;
    std::fs::copy(&args.wasm, tools.join(file))
        .map_err(|e| config_failure(format!("{}: {e}", args.wasm.display())))?;
    let mut name = name_from_file(&args.wasm);
    for _ in 0..2 {
        let policy = adhoc::policy(&tools, &state, Some(&name), &args.grants)?;
        let host = Host::open(&policy.path).await?;
        if let Some(tool) = host.registry.get(&name) {
            return Ok((host, tool, policy));
        }
        match host.registry.tools().first() {
            // The meta names another tool: list that one instead (the
            // component is compiled once; the second start uses the cache).
            Some(t) => name = t.meta.name.clone(),
            None => {
                let why: Vec<String> = host
                    .registry
                    .issues
                    .iter()
                    .map(|i| i.error.clone())
                    .collect();
                return Err(config_failure(format!(
                    "{} did not load: {}",
                    args.wasm.display(),
                    why.join("; ")
                )));
            }
        }
    }
    Err(config_failure(format!(
        "{} did not load",
        args.wasm.display()
    )))
}

fn describe(out: &Out, tool: &LoadedTool) {
    if out.json {
        return;
    }
    let m = &tool.meta;
    errln!(
        "tool {} {} (sha256 {}): side effects {}, dry-run {}, idempotent {}, risk {}, returns untrusted {}",
        m.name,
        m.version,
        tool.hash.get(..12).unwrap_or_default(),
        m.has_side_effects,
        m.supports_dry_run,
        m.idempotent,
        m.risk.as_str(),
        m.returns_untrusted
    );
    let declared: Vec<String> = m.capabilities.iter().map(ToString::to_string).collect();
    errln!("  declares: {}", declared.join(", "));
    if let Ok(g) = &tool.grants {
        let g: Vec<String> = g.iter().map(ToString::to_string).collect();
        errln!("  granted:  {}", g.join(", "));
    }
}

/// Run `capsaga test-tool`.
pub(crate) async fn run(out: &Out, args: &TestToolArgs) -> Result<u8, Failure> {
    let tmp = tempfile::Builder::new()
        .prefix("capsaga-test-tool-")
        .tempdir()
        .map_err(|e| config_failure(format!("a temporary directory: {e}")))?;
    let (host, tool, _policy) = open(args, tmp.path()).await?;
    describe(out, &tool);
    if let Err(e) = &tool.grants {
        return Err(config_failure(
            e.for_operator(&tool.meta.capabilities)
                .replace("in the policy", "with --grant"),
        ));
    }
    let door = Dispatcher::new(host);
    let name = tool.meta.name.clone();
    if args.roundtrip {
        return roundtrip::run(&door, out, &tool, &args.args).await;
    }
    super::run::call(&door, out, &name, &args.args, args.dry_run).await
}
