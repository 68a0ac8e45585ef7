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

pub mod analysis;
pub mod io;

mod arith;
mod builtins;
pub use builtins::Builtin;
pub mod expand;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::rc::Rc;

use brush_parser::ast;
use brush_parser::{Parser, ParserOptions, SourceInfo};

use crate::vfs::Vfs;
use io::{Io, Sink, input, sink};

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

    fn run_program(&mut self, program: &ast::Program, io: &Io) -> Result<i32, Flow> {
        let mut st = 0;
        for cc in &program.complete_commands {
            st = self.run_list(cc, io)?;
        }
        Ok(st)
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

    fn run_list(&mut self, list: &ast::CompoundList, io: &Io) -> Result<i32, Flow> {
        let mut st = 0;
        for item in &list.0 {
            st = self.run_and_or(&item.0, io)?;
        }
        Ok(st)
    }

    fn run_and_or(&mut self, ao: &ast::AndOrList, io: &Io) -> Result<i32, Flow> {
        let n = ao.additional.len();
        self.in_cond += u32::from(n > 0);
        let first = self.run_pipeline(&ao.first, io);
        self.in_cond -= u32::from(n > 0);
        let mut st = first?;
        let mut last_ran = n == 0;
        for (i, a) in ao.additional.iter().enumerate() {
            let (run, p) = match a {
                ast::AndOr::And(p) => (st == 0, p),
                ast::AndOr::Or(p) => (st != 0, p),
            };
            if run {
                let is_last = i + 1 == n;
                self.in_cond += u32::from(!is_last);
                let r = self.run_pipeline(p, io);
                self.in_cond -= u32::from(!is_last);
                st = r?;
                last_ran = is_last;
            }
        }
        if self.errexit && self.in_cond == 0 && last_ran && st != 0 {
            return Err(Flow::Exit(st));
        }
        Ok(st)
    }

    fn run_pipeline(&mut self, p: &ast::Pipeline, io: &Io) -> Result<i32, Flow> {
        self.in_cond += u32::from(p.bang);
        let r = self.run_stages(p, io);
        self.in_cond -= u32::from(p.bang);
        let st = r?;
        let st = if p.bang { i32::from(st == 0) } else { st };
        self.last_status = st;
        Ok(st)
    }

    fn run_stages(&mut self, p: &ast::Pipeline, io: &Io) -> Result<i32, Flow> {
        if p.seq.len() == 1 {
            return self.run_command(&p.seq[0], io);
        }
        let mut stdin = io.stdin.clone();
        let mut st = 0;
        let n = p.seq.len();
        for (i, cmd) in p.seq.iter().enumerate() {
            let last = i + 1 == n;
            let out = if last {
                io.out.clone()
            } else {
                sink(Sink::hard(PIPE_CAP))
            };
            let stage = Io {
                stdin: stdin.clone(),
                out: out.clone(),
                err: io.err.clone(),
            };
            st = match self.run_command(cmd, &stage) {
                Ok(s) | Err(Flow::Exit(s) | Flow::Return(s)) => s,
                Err(Flow::Break(_) | Flow::Continue(_)) => 0,
                Err(Flow::BrokenPipe) => {
                    io.warn(format!(
                        "sh: pipeline stage {}: output stopped at the pipe limit of {PIPE_CAP} \
                         bytes (shell_run runs the stages one after another and keeps pipes in \
                         memory)",
                        i + 1
                    ));
                    141
                }
                Err(abort @ Flow::Abort(_)) => return Err(abort),
            };
            if !last {
                let data = std::mem::take(&mut out.borrow_mut().buf);
                stdin = input(data);
            }
        }
        Ok(st)
    }

    fn run_command(&mut self, cmd: &ast::Command, io: &Io) -> Result<i32, Flow> {
        match cmd {
            ast::Command::Simple(s) => self.run_simple(s, io),
            ast::Command::Compound(c, redirs) => {
                let list: &[ast::IoRedirect] = redirs.as_ref().map_or(&[], |r| r.0.as_slice());
                self.with_redirects(list, io, |sh, io| sh.run_compound(c, io))
            }
            ast::Command::Function(def) => {
                self.funcs
                    .insert(def.fname.value.clone(), Rc::new(def.body.clone()));
                Ok(0)
            }
            ast::Command::ExtendedTest(t) => {
                self.step()?;
                let r = builtins::eval_extended(self, &t.expr, io)?;
                Ok(i32::from(!r))
            }
        }
    }

    fn run_compound(&mut self, c: &ast::CompoundCommand, io: &Io) -> Result<i32, Flow> {
        use ast::CompoundCommand as C;
        match c {
            C::BraceGroup(b) => self.run_list(&b.list, io),
            C::Subshell(s) => {
                let saved = self.save();
                let r = self.run_list(&s.list, io);
                self.restore(saved);
                match r {
                    Err(Flow::Exit(s)) => Ok(s),
                    other => other,
                }
            }
            C::ForClause(f) => self.run_for(f, io),
            C::WhileClause(w) => self.run_while(w, io, true),
            C::UntilClause(w) => self.run_while(w, io, false),
            C::IfClause(i) => self.run_if(i, io),
            C::CaseClause(c) => self.run_case(c, io),
            C::Arithmetic(a) => {
                self.step()?;
                let v = self.arith(&a.expr.value, io)?;
                Ok(i32::from(v == 0))
            }
            C::ArithmeticForClause(f) => self.run_arith_for(f, io),
        }
    }

    /// Handles `break`/`continue` at a loop boundary: `Some(true)` to stop
    /// the loop, `Some(false)` to go on, `None` to propagate.
    fn loop_flow(r: &Result<i32, Flow>) -> Option<bool> {
        match r {
            Err(Flow::Break(1)) => Some(true),
            Err(Flow::Continue(1)) => Some(false),
            _ => None,
        }
    }

    fn outer(r: Result<i32, Flow>) -> Result<i32, Flow> {
        match r {
            Err(Flow::Break(n)) if n > 1 => Err(Flow::Break(n - 1)),
            Err(Flow::Continue(n)) if n > 1 => Err(Flow::Continue(n - 1)),
            other => other,
        }
    }

    fn run_for(&mut self, f: &ast::ForClauseCommand, io: &Io) -> Result<i32, Flow> {
        let values = match &f.values {
            Some(words) => {
                let mut v = Vec::new();
                for w in words {
                    v.extend(self.expand_word(&w.value, io)?);
                }
                v
            }
            None => self.positional.clone(),
        };
        let mut st = 0;
        for v in values {
            self.step()?;
            self.set_var(&f.variable_name, v);
            let r = self.run_list(&f.body.list, io);
            match Self::loop_flow(&r) {
                Some(true) => break,
                Some(false) => continue,
                None => st = Self::outer(r)?,
            }
        }
        Ok(st)
    }

    fn run_while(
        &mut self,
        w: &ast::WhileOrUntilClauseCommand,
        io: &Io,
        while_true: bool,
    ) -> Result<i32, Flow> {
        let mut st = 0;
        loop {
            self.step()?;
            self.in_cond += 1;
            let c = self.run_list(&w.0, io);
            self.in_cond -= 1;
            let c = match Self::loop_flow(&c) {
                Some(true) => break,
                Some(false) => continue,
                None => Self::outer(c)?,
            };
            if (c == 0) != while_true {
                break;
            }
            let r = self.run_list(&w.1.list, io);
            match Self::loop_flow(&r) {
                Some(true) => break,
                Some(false) => continue,
                None => st = Self::outer(r)?,
            }
        }
        Ok(st)
    }

    fn run_arith_for(&mut self, f: &ast::ArithmeticForClauseCommand, io: &Io) -> Result<i32, Flow> {
        if let Some(init) = &f.initializer {
            self.arith(&init.value, io)?;
        }
        let mut st = 0;
        loop {
            self.step()?;
            if let Some(cond) = &f.condition
                && self.arith(&cond.value, io)? == 0
            {
                break;
            }
            let r = self.run_list(&f.body.list, io);
            match Self::loop_flow(&r) {
                Some(true) => break,
                Some(false) => {}
                None => st = Self::outer(r)?,
            }
            if let Some(upd) = &f.updater {
                self.arith(&upd.value, io)?;
            }
        }
        Ok(st)
    }

    fn run_if(&mut self, i: &ast::IfClauseCommand, io: &Io) -> Result<i32, Flow> {
        self.in_cond += 1;
        let c = self.run_list(&i.condition, io);
        self.in_cond -= 1;
        if c? == 0 {
            return self.run_list(&i.then, io);
        }
        for e in i.elses.iter().flatten() {
            match &e.condition {
                Some(cond) => {
                    self.in_cond += 1;
                    let c = self.run_list(cond, io);
                    self.in_cond -= 1;
                    if c? == 0 {
                        return self.run_list(&e.body, io);
                    }
                }
                None => return self.run_list(&e.body, io),
            }
        }
        Ok(0)
    }

    fn run_case(&mut self, c: &ast::CaseClauseCommand, io: &Io) -> Result<i32, Flow> {
        self.step()?;
        let word = self.expand_single(&c.value.value, io)?;
        let mut st = 0;
        let mut fall_through = false;
        for item in &c.cases {
            let mut hit = fall_through;
            if !hit {
                for pat in &item.patterns {
                    let p = self.expand_pattern(&pat.value, io)?;
                    if expand::glob_match(&p, &word) {
                        hit = true;
                        break;
                    }
                }
            }
            if !hit {
                continue;
            }
            if let Some(cmd) = &item.cmd {
                st = self.run_list(cmd, io)?;
            }
            match item.post_action {
                ast::CaseItemPostAction::ExitCase => return Ok(st),
                ast::CaseItemPostAction::UnconditionallyExecuteNextCaseItem => fall_through = true,
                ast::CaseItemPostAction::ContinueEvaluatingCases => fall_through = false,
            }
        }
        Ok(st)
    }

    fn run_simple(&mut self, s: &ast::SimpleCommand, io: &Io) -> Result<i32, Flow> {
        self.step()?;
        let mut assigns: Vec<(String, String)> = Vec::new();
        let mut redirs: Vec<ast::IoRedirect> = Vec::new();
        let mut words: Vec<&str> = Vec::new();
        let prefix = s.prefix.iter().flat_map(|p| p.0.iter());
        let suffix = s.suffix.iter().flat_map(|p| p.0.iter());
        self.subst_status = None;
        for item in prefix {
            match item {
                ast::CommandPrefixOrSuffixItem::IoRedirect(r) => redirs.push(r.clone()),
                ast::CommandPrefixOrSuffixItem::AssignmentWord(a, _) => {
                    let name = match &a.name {
                        ast::AssignmentName::VariableName(n) => n.clone(),
                        ast::AssignmentName::ArrayElementName(n, _) => {
                            io.warn(format!("sh: {n}: arrays are not supported"));
                            return Ok(2);
                        }
                    };
                    let value = match &a.value {
                        ast::AssignmentValue::Scalar(w) => self.expand_single(&w.value, io)?,
                        ast::AssignmentValue::Array(_) => {
                            io.warn(format!("sh: {name}: arrays are not supported"));
                            return Ok(2);
                        }
                    };
                    let value = if a.append {
                        format!("{}{value}", self.var(&name).unwrap_or_default())
                    } else {
                        value
                    };
                    assigns.push((name, value));
                }
                ast::CommandPrefixOrSuffixItem::Word(w) => words.push(&w.value),
                ast::CommandPrefixOrSuffixItem::ProcessSubstitution(..) => {
                    io.warn("sh: process substitution is not supported");
                    return Ok(2);
                }
            }
        }
        if let Some(w) = &s.word_or_name {
            words.push(&w.value);
        }
        for item in suffix {
            match item {
                ast::CommandPrefixOrSuffixItem::IoRedirect(r) => redirs.push(r.clone()),
                ast::CommandPrefixOrSuffixItem::Word(w)
                | ast::CommandPrefixOrSuffixItem::AssignmentWord(_, w) => words.push(&w.value),
                ast::CommandPrefixOrSuffixItem::ProcessSubstitution(..) => {
                    io.warn("sh: process substitution is not supported");
                    return Ok(2);
                }
            }
        }
        let mut args: Vec<String> = Vec::new();
        for w in words {
            args.extend(self.expand_word(w, io)?);
        }
        if args.is_empty() {
            let st = self.subst_status.unwrap_or(0);
            for (k, v) in assigns {
                self.set_var(&k, v);
            }
            return self.with_redirects(&redirs, io, move |_, _| Ok(st));
        }
        let name = args.remove(0);
        self.with_redirects(&redirs, io, |sh, io| {
            let saved: Vec<(String, Option<String>)> = assigns
                .iter()
                .map(|(k, _)| (k.clone(), sh.vars.get(k).cloned()))
                .collect();
            let was_exported: Vec<bool> = assigns
                .iter()
                .map(|(k, _)| sh.exported.contains(k))
                .collect();
            for (k, v) in &assigns {
                sh.vars.insert(k.clone(), v.clone());
                sh.exported.insert(k.clone());
            }
            let r = sh.dispatch(&name, &args, io);
            for ((k, old), exp) in saved.into_iter().zip(was_exported) {
                match old {
                    Some(v) => sh.vars.insert(k.clone(), v),
                    None => sh.vars.remove(&k),
                };
                if !exp {
                    sh.exported.remove(&k);
                }
            }
            r
        })
    }

    /// Runs command `name` with `args`: a function, a builtin or a command.
    ///
    /// # Errors
    /// Control flow and limits.
    pub fn dispatch(&mut self, name: &str, args: &[String], io: &Io) -> Result<i32, Flow> {
        if let Some(body) = self.funcs.get(name).cloned() {
            return self.call_function(name, &body, args, io);
        }
        if let Some(b) = builtins::lookup(name) {
            return b(self, args, io);
        }
        if let Some(c) = crate::cmds::lookup(name) {
            return c(self, args, io);
        }
        if name.contains('/') {
            io.warn(format!(
                "sh: {name}: cannot run programs: shell_run has no exec and runs only its own \
                 commands ({})",
                available()
            ));
            return Ok(126);
        }
        io.warn(format!(
            "sh: {name}: command not found; shell_run runs no programs, only its own commands: \
             {}",
            available()
        ));
        Ok(127)
    }

    fn call_function(
        &mut self,
        name: &str,
        body: &ast::FunctionBody,
        args: &[String],
        io: &Io,
    ) -> Result<i32, Flow> {
        self.enter(name)?;
        let saved = std::mem::replace(&mut self.positional, args.to_vec());
        self.locals.push(Vec::new());
        let redirs: &[ast::IoRedirect] = body.1.as_ref().map_or(&[], |r| r.0.as_slice());
        let r = self.with_redirects(redirs, io, |sh, io| sh.run_compound(&body.0, io));
        if let Some(frame) = self.locals.pop() {
            for (k, old) in frame.into_iter().rev() {
                match old {
                    Some(v) => self.vars.insert(k, v),
                    None => self.vars.remove(&k),
                };
            }
        }
        self.positional = saved;
        self.depth -= 1;
        match r {
            Err(Flow::Return(s)) => Ok(s),
            other => other,
        }
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

    /// Runs `text` as a command substitution (in this shell, with its
    /// variables restored afterwards) and returns its output without the
    /// trailing newlines.
    ///
    /// # Errors
    /// Limits; a fatal error inside ends only the substitution.
    fn command_subst(&mut self, text: &str, io: &Io) -> Result<String, Flow> {
        self.enter("$(...)")?;
        let program = match self.parse(text) {
            Ok(p) => p,
            Err(e) => {
                self.depth -= 1;
                io.warn(format!("sh: in $(...): {e}"));
                self.subst_status = Some(2);
                return Ok(String::new());
            }
        };
        let capture = sink(Sink::hard(PIPE_CAP));
        let sub = Io {
            stdin: input(Vec::new()),
            out: capture.clone(),
            err: io.err.clone(),
        };
        let saved = self.save();
        let r = self.run_program(&program, &sub);
        self.restore(saved);
        self.depth -= 1;
        let st = match r {
            Ok(s) | Err(Flow::Exit(s) | Flow::Return(s)) => s,
            Err(Flow::Break(_) | Flow::Continue(_)) => 0,
            Err(Flow::BrokenPipe) => {
                io.warn(format!(
                    "sh: $(...): output stopped at {PIPE_CAP} bytes (shell_run's capture limit)"
                ));
                141
            }
            Err(abort @ Flow::Abort(_)) => return Err(abort),
        };
        self.subst_status = Some(st);
        let mut out = String::from_utf8_lossy(&capture.borrow().buf).into_owned();
        while out.ends_with('\n') {
            out.pop();
        }
        Ok(out)
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

    /// Runs `f` with `redirs` applied to `io`, then writes redirected output
    /// to its files.
    fn with_redirects(
        &mut self,
        redirs: &[ast::IoRedirect],
        io: &Io,
        f: impl FnOnce(&mut Shell, &Io) -> Result<i32, Flow>,
    ) -> Result<i32, Flow> {
        if redirs.is_empty() {
            return f(self, io);
        }
        let (rio, files) = match builtins::redirect(self, redirs, io)? {
            Ok(r) => r,
            Err(st) => {
                self.last_status = st;
                return Ok(st);
            }
        };
        let r = f(self, &rio);
        let mut st = match r {
            Err(Flow::BrokenPipe) if !files.is_empty() => {
                io.warn(format!(
                    "sh: output to a file stopped at {FILE_CAP} bytes (shell_run's file limit)"
                ));
                1
            }
            other => other?,
        };
        for (path, out, append) in files {
            let data = std::mem::take(&mut out.borrow_mut().buf);
            let res = if append {
                self.vfs.append(&path, &data)
            } else {
                self.vfs.write(&path, data)
            };
            if let Err(e) = res {
                st = self.fs_fail("sh", &e, io);
            }
        }
        Ok(st)
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
