//! A conservative static check: can this script change files at all?
//!
//! The host runs `dry_run` before every `execute` of a tool with side
//! effects; for a script that only reads, running it twice would double
//! the cost for nothing. [`may_write`] answers `false` only when every
//! command is named literally, is not one that writes (or is used without
//! its writing options), no output is redirected to a file, and no word
//! holds a command substitution. Anything it cannot see through (a command
//! name from a variable, `eval`, `xargs`, `env`, a substitution) counts as a
//! possible write, so the dry run then runs the script in the overlay.

use brush_parser::ast;

/// Commands that write whatever their options.
const WRITERS: &[&str] = &[
    "cp", "mv", "rm", "rmdir", "mkdir", "touch", "tee", "xargs", "env", "eval", "exec", ".",
    "source",
];

fn dynamic(word: &str) -> bool {
    word.contains('$') || word.contains('`')
}

fn redirect_writes(r: &ast::IoRedirect) -> bool {
    let to_file = |w: &ast::Word| {
        dynamic(&w.value)
            || !matches!(
                w.value.as_str(),
                "/dev/null" | "/dev/stdout" | "/dev/stderr"
            )
    };
    match r {
        ast::IoRedirect::File(_, kind, target) => match kind {
            ast::IoFileRedirectKind::Write
            | ast::IoFileRedirectKind::Append
            | ast::IoFileRedirectKind::Clobber
            | ast::IoFileRedirectKind::ReadAndWrite => match target {
                ast::IoFileRedirectTarget::Filename(w) => to_file(w),
                _ => true,
            },
            _ => match target {
                ast::IoFileRedirectTarget::Filename(w)
                | ast::IoFileRedirectTarget::Duplicate(w) => dynamic(&w.value),
                _ => false,
            },
        },
        ast::IoRedirect::HereDocument(_, doc) => doc.requires_expansion && dynamic(&doc.doc.value),
        ast::IoRedirect::HereString(_, w) => dynamic(&w.value),
        ast::IoRedirect::OutputAndError(w, _) => to_file(w),
    }
}

fn simple_writes(s: &ast::SimpleCommand) -> bool {
    let items = s
        .prefix
        .iter()
        .flat_map(|p| p.0.iter())
        .chain(s.suffix.iter().flat_map(|p| p.0.iter()));
    let mut args: Vec<&str> = Vec::new();
    for item in items {
        match item {
            ast::CommandPrefixOrSuffixItem::IoRedirect(r) => {
                if redirect_writes(r) {
                    return true;
                }
            }
            ast::CommandPrefixOrSuffixItem::Word(w) => {
                if dynamic(&w.value) && (w.value.contains("$(") || w.value.contains('`')) {
                    return true;
                }
                args.push(&w.value);
            }
            ast::CommandPrefixOrSuffixItem::AssignmentWord(_, w) => {
                if w.value.contains("$(") || w.value.contains('`') {
                    return true;
                }
            }
            ast::CommandPrefixOrSuffixItem::ProcessSubstitution(..) => return true,
        }
    }
    let Some(name) = &s.word_or_name else {
        return false;
    };
    let name = name.value.as_str();
    if dynamic(name) || name.contains(['*', '?', '[', '\\', '"', '\'']) {
        return true;
    }
    if WRITERS.contains(&name) {
        return true;
    }
    let has = |f: &dyn Fn(&str) -> bool| args.iter().any(|a| dynamic(a) || f(a));
    match name {
        "sed" => has(&|a| {
            a.starts_with("-i")
                || a == "--in-place"
                || (a.starts_with('-') && !a.starts_with("--") && a.contains('i'))
        }),
        "sort" => has(&|a| {
            a.starts_with("-o")
                || a.starts_with("--output")
                || (a.starts_with('-') && !a.starts_with("--") && a.contains('o'))
        }),
        "find" => has(&|a| a == "-delete"),
        _ => false,
    }
}

fn list_writes(l: &ast::CompoundList) -> bool {
    l.0.iter().any(|item| {
        let ao = &item.0;
        pipeline_writes(&ao.first)
            || ao.additional.iter().any(|a| match a {
                ast::AndOr::And(p) | ast::AndOr::Or(p) => pipeline_writes(p),
            })
    })
}

fn pipeline_writes(p: &ast::Pipeline) -> bool {
    p.seq.iter().any(command_writes)
}

fn command_writes(c: &ast::Command) -> bool {
    match c {
        ast::Command::Simple(s) => simple_writes(s),
        ast::Command::Compound(c, r) => {
            r.as_ref().is_some_and(|r| r.0.iter().any(redirect_writes)) || compound_writes(c)
        }
        ast::Command::Function(f) => {
            f.body
                .1
                .as_ref()
                .is_some_and(|r| r.0.iter().any(redirect_writes))
                || compound_writes(&f.body.0)
        }
        ast::Command::ExtendedTest(_) => false,
    }
}

fn compound_writes(c: &ast::CompoundCommand) -> bool {
    use ast::CompoundCommand as C;
    match c {
        C::BraceGroup(b) => list_writes(&b.list),
        C::Subshell(s) => list_writes(&s.list),
        C::ForClause(f) => {
            f.values
                .iter()
                .flatten()
                .any(|w| w.value.contains("$(") || w.value.contains('`'))
                || list_writes(&f.body.list)
        }
        C::ArithmeticForClause(f) => list_writes(&f.body.list),
        C::WhileClause(w) | C::UntilClause(w) => list_writes(&w.0) || list_writes(&w.1.list),
        C::IfClause(i) => {
            list_writes(&i.condition)
                || list_writes(&i.then)
                || i.elses
                    .iter()
                    .flatten()
                    .any(|e| e.condition.as_ref().is_some_and(list_writes) || list_writes(&e.body))
        }
        C::CaseClause(c) => {
            dynamic(&c.value.value) && c.value.value.contains("$(")
                || c.cases
                    .iter()
                    .any(|i| i.cmd.as_ref().is_some_and(list_writes))
        }
        C::Arithmetic(_) => false,
    }
}

/// Whether `program` may change files (`true` when in doubt).
pub fn may_write(program: &ast::Program) -> bool {
    program.complete_commands.iter().any(list_writes)
}
