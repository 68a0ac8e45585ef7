//! `capsaga new tool NAME [--side-effects] [--path DIR]`: scaffold a tool
//! crate, in the repository's `tools/` workspace or out of tree (its own
//! workspace, depending on the SDK by path, or by git when no checkout is
//! found). The files come from `host/cli/templates/tool/`, embedded at
//! build time; `{{name}}`-style placeholders are filled here.

use super::render::Out;
use super::{Failure, exit};
use capsaga_core::meta::is_valid_tool_name;
use clap::{Args, Subcommand};
use std::path::{Path, PathBuf};

const CARGO_IN_TREE: &str = include_str!("../templates/tool/Cargo.in-tree.toml");
const CARGO_OUT_OF_TREE: &str = include_str!("../templates/tool/Cargo.out-of-tree.toml");
const LIB_PURE: &str = include_str!("../templates/tool/lib_pure.rs");
const LIB_SIDE: &str = include_str!("../templates/tool/lib_side.rs");
const TESTS_PURE: &str = include_str!("../templates/tool/tests_pure.rs");
const TESTS_SIDE: &str = include_str!("../templates/tool/tests_side.rs");
const POLICY: &str = include_str!("../templates/tool/policy.toml");
const README: &str = include_str!("../templates/tool/README.md");

/// `capsaga new ...`
#[derive(Debug, Subcommand)]
pub enum NewCmd {
    /// Scaffold a tool crate: Cargo.toml (size-tuned release profile),
    /// src/lib.rs with the SDK idioms, native unit tests, a policy snippet
    /// and a README with the commands to test, build and call it.
    Tool(NewToolArgs),
}

/// `capsaga new tool ...`
#[derive(Debug, Args)]
pub struct NewToolArgs {
    /// The tool's name (lower-case letters, digits and `_`, starting with a
    /// letter): the crate, the component file and the name the model calls.
    pub name: String,
    /// A tool with side effects: a dry-run and a compensate that restores
    /// exactly (the example appends a line to a file).
    #[arg(long)]
    pub side_effects: bool,
    /// Create the crate in DIR, out of tree (its own workspace), instead of
    /// `tools/NAME` of the capsaga repository.
    #[arg(long, value_name = "DIR")]
    pub path: Option<PathBuf>,
    /// The capsaga checkout (its `sdk/`, `tools/`): default, the first of
    /// the current directory, the `capsaga` binary's location and their
    /// parents that has `sdk/Cargo.toml` and `wit/tool.wit`.
    #[arg(long, value_name = "DIR")]
    pub repo: Option<PathBuf>,
}

/// What was generated.
#[derive(Debug, serde::Serialize)]
pub struct Scaffold {
    /// The crate's directory.
    pub dir: PathBuf,
    /// Files written, relative to it.
    pub files: Vec<String>,
    /// Whether it is a member of the repository's `tools/` workspace.
    pub in_tree: bool,
    /// Commands to test, build and call it.
    pub next: Vec<String>,
}

fn config_failure(message: impl Into<String>) -> Failure {
    Failure {
        code: exit::CONFIG,
        message: message.into(),
    }
}

fn is_repo(dir: &Path) -> bool {
    dir.join("sdk/Cargo.toml").is_file() && dir.join("wit/tool.wit").is_file()
}

/// The capsaga checkout: `explicit`, else searched from the current
/// directory and from the running binary.
pub fn find_repo(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(d) = explicit {
        return is_repo(d).then(|| d.canonicalize().ok()).flatten();
    }
    let mut starts = Vec::new();
    if let Ok(cwd) = std::env::current_dir() {
        starts.push(cwd);
    }
    if let Ok(exe) = std::env::current_exe() {
        starts.push(exe);
    }
    starts
        .iter()
        .flat_map(|s| s.ancestors())
        .find(|d| is_repo(d))
        .and_then(|d| d.canonicalize().ok())
}

/// `word_count` → `WordCount`.
fn type_name(name: &str) -> String {
    name.split('_')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut c = p.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

fn fill(template: &str, vars: &[(&str, &str)]) -> String {
    vars.iter().fold(template.to_string(), |t, (k, v)| {
        t.replace(&format!("{{{{{k}}}}}"), v)
    })
}

/// Add `name` to `members` of the tools workspace manifest `text`.
///
/// # Errors
/// A message when `members = [...]` is not found.
pub fn add_member(text: &str, name: &str) -> Result<String, String> {
    let start = text
        .find("members = [")
        .ok_or("no `members = [` in tools/Cargo.toml")?;
    let open = start + "members = [".len();
    let close = text[open..]
        .find(']')
        .map(|i| open + i)
        .ok_or("`members = [` is not closed in tools/Cargo.toml")?;
    let inside = text[open..close].trim_end();
    let sep = if inside.trim().is_empty() || inside.ends_with(',') {
        ""
    } else {
        ", "
    };
    let insert_at = open + inside.len();
    Ok(format!(
        "{}{sep}\"{name}\"{}",
        &text[..insert_at],
        &text[insert_at..]
    ))
}

fn write(dir: &Path, rel: &str, text: &str, files: &mut Vec<String>) -> Result<(), Failure> {
    let p = dir.join(rel);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| config_failure(format!("{}: {e}", parent.display())))?;
    }
    std::fs::write(&p, text).map_err(|e| config_failure(format!("{}: {e}", p.display())))?;
    files.push(rel.to_string());
    Ok(())
}

/// Where the crate goes and how it gets the SDK.
struct Place {
    dir: PathBuf,
    in_tree: bool,
    repo: Option<PathBuf>,
}

fn place(args: &NewToolArgs) -> Result<Place, Failure> {
    let repo = find_repo(args.repo.as_deref());
    if args.repo.is_some() && repo.is_none() {
        return Err(config_failure(
            "--repo: not a capsaga checkout (needs sdk/Cargo.toml and wit/tool.wit)",
        ));
    }
    let (dir, in_tree) = match &args.path {
        Some(p) => (p.clone(), false),
        None => {
            let r = repo.as_ref().ok_or_else(|| {
                config_failure(
                    "not inside a capsaga checkout: run this in the repository (or pass --repo DIR), or create the crate out of tree with --path DIR",
                )
            })?;
            (r.join("tools").join(&args.name), true)
        }
    };
    if dir.exists()
        && std::fs::read_dir(&dir)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        return Err(config_failure(format!(
            "{} exists and is not empty; choose another name or --path",
            dir.display()
        )));
    }
    Ok(Place { dir, in_tree, repo })
}

/// Generate the crate; the files written and the next commands.
///
/// # Errors
/// [`Failure`] with exit code 3 (bad name, existing directory, no checkout
/// for an in-tree crate, an unwritable file).
pub(crate) fn scaffold(args: &NewToolArgs) -> Result<Scaffold, Failure> {
    let name = args.name.as_str();
    if !is_valid_tool_name(name) {
        return Err(config_failure(format!(
            "`{}` is not a tool name: lower-case letters, digits and `_`, starting with a letter, at most 64 bytes",
            super::render::clip(name, 80)
        )));
    }
    let place = place(args)?;
    let dir = &place.dir;
    let side = args.side_effects;
    let ty = type_name(name);
    let (cargo, extra) = if place.in_tree {
        (
            CARGO_IN_TREE,
            if side { "sha2.workspace = true" } else { "" },
        )
    } else {
        (CARGO_OUT_OF_TREE, if side { "sha2 = \"0.10\"" } else { "" })
    };
    let sdk_dep = match &place.repo {
        Some(r) => format!("capsaga-sdk = {{ path = \"{}\" }}", r.join("sdk").display()),
        None => "capsaga-sdk = { git = \"https://example.invalid/capsaga\" }".to_string(),
    };
    let (declared, grants) = if side {
        ("fs:write:*", "\"fs:write:/absolute/dir/**\"")
    } else {
        ("no capability", "")
    };
    let next = next_commands(name, side, place.in_tree);
    let roundtrip = if side {
        format!(
            "\nCheck dry-run, execute and compensate through the real sandbox (a temporary copy of DIR):\n\n```sh\ncapsaga test-tool {} --grant 'fs:write:DIR/**' --args '{{\"path\":\"DIR/notes.txt\",\"line\":\"hello\"}}' --roundtrip\n```\n",
            wasm_path(name, place.in_tree)
        )
    } else {
        String::new()
    };
    let flag = if side { " --side-effects" } else { "" };
    let vars: [(&str, &str); 12] = [
        ("name", name),
        ("type", &ty),
        ("extra_deps", extra),
        ("sdk_dep", &sdk_dep),
        ("declared", declared),
        ("grants", grants),
        ("flag", flag),
        ("test_cmd", &next[0]),
        ("build_cmd", &next[1]),
        ("call_cmd", &next[2]),
        ("roundtrip", &roundtrip),
        ("unused", ""),
    ];
    let mut files = Vec::new();
    write(dir, "Cargo.toml", &fill(cargo, &vars), &mut files)?;
    let (lib, tests) = if side {
        (LIB_SIDE, TESTS_SIDE)
    } else {
        (LIB_PURE, TESTS_PURE)
    };
    write(dir, "src/lib.rs", &fill(lib, &vars), &mut files)?;
    write(dir, "src/tests.rs", &fill(tests, &vars), &mut files)?;
    write(dir, "policy.toml", &fill(POLICY, &vars), &mut files)?;
    write(dir, "README.md", &fill(README, &vars), &mut files)?;
    if place.in_tree {
        register_member(place.repo.as_deref(), name)?;
    } else {
        write(dir, ".gitignore", "/target\n", &mut files)?;
    }
    Ok(Scaffold {
        dir: dir.clone(),
        files,
        in_tree: place.in_tree,
        next,
    })
}

fn register_member(repo: Option<&Path>, name: &str) -> Result<(), Failure> {
    let Some(repo) = repo else {
        return Ok(());
    };
    let manifest = repo.join("tools/Cargo.toml");
    let text = std::fs::read_to_string(&manifest)
        .map_err(|e| config_failure(format!("{}: {e}", manifest.display())))?;
    let updated = add_member(&text, name).map_err(config_failure)?;
    std::fs::write(&manifest, updated)
        .map_err(|e| config_failure(format!("{}: {e}", manifest.display())))
}

fn wasm_path(name: &str, in_tree: bool) -> String {
    if in_tree {
        format!("target/tools/{name}.wasm")
    } else {
        format!("target/wasm32-wasip2/release/{name}.wasm")
    }
}

/// Test, build, call.
fn next_commands(name: &str, side: bool, in_tree: bool) -> Vec<String> {
    let (test, build, tools_dir) = if in_tree {
        (
            format!("cargo test --manifest-path tools/Cargo.toml -p {name}"),
            format!("scripts/build-components -p {name}"),
            "target/tools",
        )
    } else {
        (
            "cargo test".to_string(),
            "cargo build --release --target wasm32-wasip2".to_string(),
            "target/wasm32-wasip2/release",
        )
    };
    let call = if side {
        format!(
            "mkdir -p /tmp/{name}-demo && capsaga call {name} '{{\"path\":\"/tmp/{name}-demo/notes.txt\",\"line\":\"hello\"}}' --tools-dir {tools_dir} --grant 'fs:write:/tmp/{name}-demo/**'"
        )
    } else {
        format!("capsaga call {name} '{{\"text\":\"hello tool world\"}}' --tools-dir {tools_dir}")
    };
    vec![test, build, call]
}

/// Run `capsaga new tool`.
pub(crate) fn run(out: &Out, cmd: &NewCmd) -> Result<u8, Failure> {
    let NewCmd::Tool(args) = cmd;
    let s = scaffold(args)?;
    if out.json {
        out.json(&s);
    } else {
        println!(
            "created {} ({})",
            s.dir.display(),
            if s.in_tree {
                "a member of tools/Cargo.toml"
            } else {
                "out of tree, its own workspace"
            }
        );
        for f in &s.files {
            println!("  {f}");
        }
        println!(
            "next (from {}):",
            if s.in_tree {
                "the repository root"
            } else {
                "the crate"
            }
        );
        for c in &s.next {
            println!("  {c}");
        }
    }
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_gain_the_new_crate() {
        let t = "[workspace]\nmembers = [\"a\", \"b\"]\n";
        assert_eq!(
            add_member(t, "c").unwrap(),
            "[workspace]\nmembers = [\"a\", \"b\", \"c\"]\n"
        );
        assert_eq!(
            add_member("members = []", "c").unwrap(),
            "members = [\"c\"]"
        );
        let multi = "members = [\n  \"a\",\n]\n";
        assert_eq!(
            add_member(multi, "c").unwrap(),
            "members = [\n  \"a\",\"c\"\n]\n"
        );
        assert!(add_member("x = 1", "c").is_err());
    }

    #[test]
    fn type_names_are_camel_case() {
        assert_eq!(type_name("word_count"), "WordCount");
        assert_eq!(type_name("a2b"), "A2b");
    }

    #[test]
    fn every_placeholder_is_filled() {
        for side in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let args = NewToolArgs {
                name: "my_tool".into(),
                side_effects: side,
                path: Some(dir.path().join("t")),
                repo: None,
            };
            let s = scaffold(&args).unwrap();
            for f in &s.files {
                let text = std::fs::read_to_string(s.dir.join(f)).unwrap();
                assert!(!text.contains("{{"), "{f}: {text}");
            }
            let cargo = std::fs::read_to_string(s.dir.join("Cargo.toml")).unwrap();
            let parsed: toml::Value = toml::from_str(&cargo).unwrap();
            assert_eq!(parsed["package"]["name"].as_str(), Some("my_tool"));
            assert_eq!(
                parsed["profile"]["release"]["opt-level"].as_str(),
                Some("s")
            );
            // An existing non-empty directory is refused.
            assert!(scaffold(&args).is_err());
        }
    }

    #[test]
    fn bad_names_are_refused() {
        for name in ["", "Caps", "has-dash", "1st"] {
            let args = NewToolArgs {
                name: name.into(),
                side_effects: false,
                path: Some(std::env::temp_dir().join("never-created")),
                repo: None,
            };
            assert!(scaffold(&args).is_err(), "{name}");
        }
    }
}
