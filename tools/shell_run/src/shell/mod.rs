//! The interpreter: runs a parsed script (brush-parser's AST) against the
//! overlay filesystem, with every command implemented in this component.
//!
//! What it runs: simple commands, pipelines (stages one after another, pipes
//! in memory), `&&` `||` `;` `&` (in the foreground: there are no
//! background jobs), `!`, redirections (`<` `>` `>>` `2>&1` `>&2` `&>`,
//! here-documents and here-strings), `{ }` and `( )`, `if`, `while`,
//! `until`, `for`, `case`, `(( ))`, functions with `local` and `return`,
//! parameter, command (`$(...)` and backticks, run by this same shell) and
//! arithmetic expansion, field splitting, globbing and quote removal.
//! Nothing is ever executed outside the component: a name that is neither a
//! function, a builtin nor one of [`crate::cmds`] is "command not found".
//!
//! Limits ([`Limits`]): commands and loop iterations run (steps), depth of
//! function calls and substitutions, and a stop time before the host's
//! deadline. Hitting one stops the whole script with [`Flow::Abort`]; the
//! overlay is then discarded, so nothing is changed.

pub mod io;

mod arith;
mod builtins;
mod compound;
mod exec;
mod redirect;
mod test;
pub use builtins::Builtin;
pub mod expand;
mod params;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::rc::Rc;

use brush_parser::ast;
use brush_parser::{Parser, ParserOptions, SourceInfo};

use crate::vfs::Vfs;
use io::Io;

/// Capacity of a pipe or a command substitution, bytes (32 MiB).
pub const PIPE_CAP: usize = 32 * 1024 * 1024;

/// Capacity of a redirection to a file, bytes (64 MiB).
pub const FILE_CAP: usize = 64 * 1024 * 1024;

/// How control leaves a command other than by finishing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Flow {
    /// `exit N`, or a fatal expansion error.
    Exit(i32),
    /// `return N`.
    Return(i32),
    /// `break N`.
    Break(u32),
    /// `continue N`.
    Continue(u32),
    /// The command's output passed a hard cap (a pipe, a capture, a file).
    BrokenPipe,
    /// A limit of shell_run was hit: the script stops, its changes are dropped.
    Abort(String),
}

/// The script's limits.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Most commands and loop iterations.
    pub max_steps: u64,
    /// Deepest nesting of function calls and command substitutions.
    pub max_depth: usize,
    /// Wall-clock time (ms since the epoch) at which the script is stopped.
    pub stop_at_ms: Option<u64>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_steps: 1_000_000,
            max_depth: 64,
            stop_at_ms: None,
        }
    }
}

/// Milliseconds since the epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

type FuncBody = Rc<ast::FunctionBody>;

/// Shell state that a subshell or command substitution restores.
#[derive(Clone)]
struct Saved {
    vars: BTreeMap<String, String>,
    exported: BTreeSet<String>,
    positional: Vec<String>,
    funcs: HashMap<String, FuncBody>,
    cwd: PathBuf,
    errexit: bool,
}

/// The interpreter.
pub struct Shell {
    /// The filesystem as the script sees it.
    pub vfs: Vfs,
    /// Current directory (resolved, inside the grants).
    pub cwd: PathBuf,
    vars: BTreeMap<String, String>,
    exported: BTreeSet<String>,
    positional: Vec<String>,
    funcs: HashMap<String, FuncBody>,
    /// Status of the last pipeline.
    pub last_status: i32,
    /// Status of the last command substitution of the current command.
    subst_status: Option<i32>,
    depth: usize,
    steps: u64,
    limits: Limits,
    errexit: bool,
    in_cond: u32,
    locals: Vec<Vec<(String, Option<String>)>>,
    /// Paths refused by the path guard, for the output.
    pub refused: Vec<String>,
    opts: ParserOptions,
}

impl Shell {
    /// A shell over `vfs` in `cwd`, with `env` as exported variables.
    pub fn new(vfs: Vfs, cwd: PathBuf, env: Vec<(String, String)>, limits: Limits) -> Shell {
        let mut vars = BTreeMap::new();
        let mut exported = BTreeSet::new();
        for (k, v) in env {
            exported.insert(k.clone());
            vars.insert(k, v);
        }
        vars.insert("PWD".into(), cwd.display().to_string());
        vars.entry("HOME".into())
            .or_insert_with(|| cwd.display().to_string());
        vars.insert("IFS".into(), " \t\n".into());
        Shell {
            vfs,
            cwd,
            vars,
            exported,
            positional: Vec::new(),
            funcs: HashMap::new(),
            last_status: 0,
            subst_status: None,
            depth: 0,
            steps: 0,
            limits,
            errexit: false,
            in_cond: 0,
            locals: Vec::new(),
            refused: Vec::new(),
            opts: ParserOptions {
                enable_extended_globbing: false,
                posix_mode: false,
                sh_mode: false,
                tilde_expansion: true,
            },
        }
    }

    /// Commands and loop iterations run so far.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Parses `script`.
    ///
    /// # Errors
    /// The parser's message.
    pub fn parse(&self, script: &str) -> Result<ast::Program, String> {
        let mut parser = Parser::new(
            std::io::BufReader::new(script.as_bytes()),
            &self.opts,
            &SourceInfo::default(),
        );
        parser.parse_program().map_err(|e| e.to_string())
    }

    /// Runs `script`; returns its exit status.
    ///
    /// # Errors
    /// The reason when a limit stopped it ([`Flow::Abort`]).
    pub fn run_script(&mut self, script: &str, io: &Io) -> Result<i32, String> {
        let program = match self.parse(script) {
            Ok(p) => p,
            Err(e) => {
                io.warn(format!("sh: {e}"));
                return Ok(2);
            }
        };
        match self.run_program(&program, io) {
            Ok(s) | Err(Flow::Exit(s) | Flow::Return(s)) => Ok(s),
            Err(Flow::Break(_) | Flow::Continue(_)) => Ok(self.last_status),
            Err(Flow::BrokenPipe) => Ok(141),
            Err(Flow::Abort(why)) => Err(why),
        }
    }

    /// Counts one step and checks the limits.
    ///
    /// # Errors
    /// [`Flow::Abort`] past the step limit or the stop time.
    pub fn step(&mut self) -> Result<(), Flow> {
        self.steps += 1;
        if self.steps > self.limits.max_steps {
            return Err(Flow::Abort(format!(
                "the script ran more than {} commands and loop iterations (shell_run's step \
                 limit)",
                self.limits.max_steps
            )));
        }
        if self.steps.is_multiple_of(64) {
            self.check_time()?;
        }
        Ok(())
    }

    /// Checks the stop time.
    ///
    /// # Errors
    /// [`Flow::Abort`] once it has passed.
    pub fn check_time(&self) -> Result<(), Flow> {
        if let Some(stop) = self.limits.stop_at_ms
            && now_ms() >= stop
        {
            return Err(Flow::Abort(
                "the script ran out of time (it is stopped before the call's deadline)".into(),
            ));
        }
        Ok(())
    }

    /// Enters one level of nesting (a function call or a substitution).
    ///
    /// # Errors
    /// [`Flow::Abort`] past the depth limit.
    fn enter(&mut self, what: &str) -> Result<(), Flow> {
        if self.depth >= self.limits.max_depth {
            return Err(Flow::Abort(format!(
                "function calls and command substitutions nested deeper than {} (at `{what}`): \
                 the script was stopped (a recursive or fork-bomb-shaped function?)",
                self.limits.max_depth
            )));
        }
        self.depth += 1;
        Ok(())
    }

    fn save(&self) -> Saved {
        Saved {
            vars: self.vars.clone(),
            exported: self.exported.clone(),
            positional: self.positional.clone(),
            funcs: self.funcs.clone(),
            cwd: self.cwd.clone(),
            errexit: self.errexit,
        }
    }

    fn restore(&mut self, s: Saved) {
        self.vars = s.vars;
        self.exported = s.exported;
        self.positional = s.positional;
        self.funcs = s.funcs;
        self.cwd = s.cwd;
        self.errexit = s.errexit;
    }

    /// A variable's value.
    pub fn var(&self, name: &str) -> Option<String> {
        self.vars.get(name).cloned()
    }

    /// Sets a variable.
    pub fn set_var(&mut self, name: &str, value: String) {
        if name == "PWD" {
            return;
        }
        self.vars.insert(name.to_owned(), value);
    }

    /// The exported variables (what `env` prints).
    pub fn environment(&self) -> Vec<(String, String)> {
        self.exported
            .iter()
            .filter_map(|k| self.vars.get(k).map(|v| (k.clone(), v.clone())))
            .collect()
    }

    /// Records a path refused by the guard.
    pub fn refuse(&mut self, msg: &str) {
        if self.refused.len() < 100 {
            self.refused.push(msg.to_owned());
        }
    }

    /// Reports a filesystem error of command `cmd` on stderr (and records
    /// refusals); returns status 1.
    pub fn fs_fail(&mut self, cmd: &str, e: &crate::vfs::FsError, io: &Io) -> i32 {
        if e.kind == crate::vfs::FsErrorKind::Denied {
            self.refuse(&e.msg);
        }
        io.warn(format!("{cmd}: {e}"));
        1
    }
}

/// Every name the shell runs, sorted, comma-separated.
pub fn available() -> String {
    let mut names: Vec<&str> = builtins::NAMES
        .iter()
        .chain(crate::cmds::NAMES.iter())
        .copied()
        .collect();
    names.sort_unstable();
    names.dedup();
    names.join(", ")
}
