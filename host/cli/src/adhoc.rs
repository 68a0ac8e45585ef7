//! A policy written for one command, without a `capsaga.toml`: `capsaga
//! call NAME ARGS --tools-dir DIR --grant CAP`, `capsaga undo --tools-dir`
//! and `capsaga test-tool`. The operator's command line is the policy: the
//! one tool named is listed with exactly the grants given (every other
//! component of the directory stays unlisted, so not callable), `~` is the
//! current directory, autonomy is `autonomous` (the operator asked for this
//! call; a high-risk tool still needs a human). The file is generated with
//! the `toml` crate into a temporary directory and loaded by the ordinary
//! `Config::load`, so every check of a real policy applies.

use super::{Failure, exit};
use std::path::{Path, PathBuf};

/// The generated policy; its temporary directory lives as long as this.
#[derive(Debug)]
pub(crate) struct Adhoc {
    /// The policy file.
    pub path: PathBuf,
    _dir: tempfile::TempDir,
}

fn config_failure(message: impl Into<String>) -> Failure {
    Failure {
        code: exit::CONFIG,
        message: message.into(),
    }
}

/// Absolute, canonical `p`.
pub(crate) fn canonical(p: &Path, what: &str) -> Result<PathBuf, Failure> {
    p.canonicalize()
        .map_err(|e| config_failure(format!("{what} `{}`: {e}", p.display())))
}

/// Write a policy listing `tool` (when given) with `grants`, loading the
/// components of `tools_dir`, keeping state in `state_dir`.
///
/// # Errors
/// [`Failure`] (exit 3) when a directory does not exist or the file cannot
/// be written.
pub(crate) fn policy(
    tools_dir: &Path,
    state_dir: &Path,
    tool: Option<&str>,
    grants: &[String],
) -> Result<Adhoc, Failure> {
    let home = canonical(Path::new("."), "the current directory")?;
    let tools_dir = canonical(tools_dir, "--tools-dir")?;
    std::fs::create_dir_all(state_dir)
        .map_err(|e| config_failure(format!("{}: {e}", state_dir.display())))?;
    let state_dir = canonical(state_dir, "the state directory")?;
    let mut doc = toml::Table::new();
    let text = |p: &Path| toml::Value::String(p.to_string_lossy().into_owned());
    doc.insert("home".into(), text(&home));
    doc.insert("tools_dir".into(), text(&tools_dir));
    doc.insert("state_dir".into(), text(&state_dir));
    let mut agent = toml::Table::new();
    agent.insert("autonomy".into(), "autonomous".into());
    doc.insert("agent".into(), toml::Value::Table(agent));
    if let Some(name) = tool {
        let mut section = toml::Table::new();
        section.insert(
            "grants".into(),
            toml::Value::Array(grants.iter().map(|g| g.as_str().into()).collect()),
        );
        let mut tools = toml::Table::new();
        tools.insert(name.to_string(), toml::Value::Table(section));
        doc.insert("tools".into(), toml::Value::Table(tools));
    }
    let dir = tempfile::Builder::new()
        .prefix("capsaga-adhoc-")
        .tempdir()
        .map_err(|e| config_failure(format!("a temporary directory: {e}")))?;
    let path = dir.path().join("capsaga.toml");
    let body = toml::to_string(&doc).map_err(|e| config_failure(e.to_string()))?;
    std::fs::write(&path, body).map_err(|e| config_failure(format!("{}: {e}", path.display())))?;
    Ok(Adhoc { path, _dir: dir })
}
