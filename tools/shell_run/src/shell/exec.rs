//! Running lists, `&&`/`||`, pipelines and simple commands: expansion of
//! the words, assignments, redirections, then a function, a builtin or one
//! of [`crate::cmds`]; and command substitution (`$(...)`), run by this same
//! shell.

use std::rc::Rc;

use brush_parser::ast;

use super::io::{Io, Sink, input, sink};
use super::{FILE_CAP, Flow, PIPE_CAP, Shell, available, builtins, redirect, test};

impl Shell {
    pub(super) fn run_program(&mut self, program: &ast::Program, io: &Io) -> Result<i32, Flow> {
        let mut st = 0;
        for cc in &program.complete_commands {
            st = self.run_list(cc, io)?;
        }
        Ok(st)
    }

    pub(super) fn run_list(&mut self, list: &ast::CompoundList, io: &Io) -> Result<i32, Flow> {
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
                let r = test::eval_extended(self, &t.expr, io)?;
                Ok(i32::from(!r))
            }
        }
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

    /// Runs `text` as a command substitution (in this shell, with its
    /// variables restored afterwards) and returns its output without the
    /// trailing newlines.
    ///
    /// # Errors
    /// Limits; a fatal error inside ends only the substitution.
    pub(super) fn command_subst(&mut self, text: &str, io: &Io) -> Result<String, Flow> {
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
        let (rio, files) = match redirect::redirect(self, redirs, io)? {
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
