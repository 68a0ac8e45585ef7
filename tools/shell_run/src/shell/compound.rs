//! Compound commands: `{ }`, `( )`, `for`, `while`, `until`, `if`, `case`,
//! `(( ))` and the arithmetic `for`, with `break` and `continue`.

use brush_parser::ast;

use super::io::Io;
use super::{Flow, Shell, expand};

impl Shell {
    pub(super) fn run_compound(&mut self, c: &ast::CompoundCommand, io: &Io) -> Result<i32, Flow> {
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
}
