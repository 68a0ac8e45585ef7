//! `test`, `[` and `[[ ]]`: brush-parser parses the expression, this
//! module evaluates it against the overlay (file tests) and the variables.

use brush_parser::ast::{BinaryPredicate as BP, ExtendedTestExpr, TestExpr, UnaryPredicate as UP};
use capsaga_sdk::fs::Follow;

use super::io::Io;
use super::{Flow, Shell, expand};
use crate::vfs::Kind;

/// Runs `test` (or `[` without its `]`) with the arguments `a`.
///
/// # Errors
/// Limits.
pub fn test(sh: &mut Shell, a: &[String], io: &Io, name: &str) -> Result<i32, Flow> {
    match brush_parser::test_command::parse(a) {
        Ok(expr) => Ok(i32::from(!eval_test(sh, &expr, io)?)),
        Err(e) => {
            io.warn(format!("sh: {name}: {e}"));
            Ok(2)
        }
    }
}

fn eval_test(sh: &mut Shell, e: &TestExpr, io: &Io) -> Result<bool, Flow> {
    Ok(match e {
        TestExpr::False => false,
        TestExpr::Literal(s) => !s.is_empty(),
        TestExpr::And(a, b) => eval_test(sh, a, io)? && eval_test(sh, b, io)?,
        TestExpr::Or(a, b) => eval_test(sh, a, io)? || eval_test(sh, b, io)?,
        TestExpr::Not(a) => !eval_test(sh, a, io)?,
        TestExpr::Parenthesized(a) => eval_test(sh, a, io)?,
        TestExpr::UnaryTest(p, s) => unary(sh, p, s, io)?,
        TestExpr::BinaryTest(p, l, r) => binary(sh, p, l, r, io)?,
    })
}

/// Evaluates `[[ ... ]]`; its words are expanded without splitting.
///
/// # Errors
/// Expansion errors and limits.
pub fn eval_extended(sh: &mut Shell, e: &ExtendedTestExpr, io: &Io) -> Result<bool, Flow> {
    Ok(match e {
        ExtendedTestExpr::And(a, b) => eval_extended(sh, a, io)? && eval_extended(sh, b, io)?,
        ExtendedTestExpr::Or(a, b) => eval_extended(sh, a, io)? || eval_extended(sh, b, io)?,
        ExtendedTestExpr::Not(a) => !eval_extended(sh, a, io)?,
        ExtendedTestExpr::Parenthesized(a) => eval_extended(sh, a, io)?,
        ExtendedTestExpr::UnaryTest(p, w) => {
            let s = sh.expand_single(&w.value, io)?;
            unary(sh, p, &s, io)?
        }
        ExtendedTestExpr::BinaryTest(p, l, r) => {
            let l = sh.expand_single(&l.value, io)?;
            let r = match p {
                BP::StringExactlyMatchesPattern | BP::StringDoesNotExactlyMatchPattern => {
                    sh.expand_pattern(&r.value, io)?
                }
                _ => sh.expand_single(&r.value, io)?,
            };
            binary(sh, p, &l, &r, io)?
        }
    })
}

fn file_kind(sh: &mut Shell, s: &str, follow: Follow) -> Option<crate::vfs::Stat> {
    let p = sh.vfs.resolve(&sh.cwd, s, follow).ok()?;
    sh.vfs.stat(&p).ok().flatten()
}

fn unary(sh: &mut Shell, p: &UP, s: &str, io: &Io) -> Result<bool, Flow> {
    Ok(match p {
        UP::StringHasZeroLength => s.is_empty(),
        UP::StringHasNonZeroLength => !s.is_empty(),
        // WASI shows no permission bits, and a dry run gets every grant
        // read-only: so -r and -w answer "exists inside the grants" in both
        // modes, and a script cannot tell a dry run from execute.
        UP::FileExists | UP::FileExistsAndIsReadable | UP::FileExistsAndIsWritable => {
            file_kind(sh, s, Follow::Final).is_some()
        }
        UP::FileExistsAndIsExecutable => {
            file_kind(sh, s, Follow::Final).is_some_and(|k| k.kind == Kind::Dir)
        }
        UP::FileExistsAndIsDir => {
            file_kind(sh, s, Follow::Final).is_some_and(|k| k.kind == Kind::Dir)
        }
        UP::FileExistsAndIsRegularFile => {
            file_kind(sh, s, Follow::Final).is_some_and(|k| k.kind == Kind::File)
        }
        UP::FileExistsAndIsNotZeroLength => {
            file_kind(sh, s, Follow::Final).is_some_and(|k| k.kind != Kind::File || k.len > 0)
        }
        UP::FileExistsAndIsSymlink => {
            file_kind(sh, s, Follow::NoFinal).is_some_and(|k| k.kind == Kind::Link)
        }
        UP::ShellVariableIsSetAndAssigned => sh.vars.contains_key(s),
        UP::FdIsOpenTerminal => false,
        UP::FileExistsAndIsBlockSpecialFile
        | UP::FileExistsAndIsCharSpecialFile
        | UP::FileExistsAndIsSetgid
        | UP::FileExistsAndHasStickyBit
        | UP::FileExistsAndIsFifo
        | UP::FileExistsAndIsSetuid
        | UP::FileExistsAndOwnedByEffectiveGroupId
        | UP::FileExistsAndModifiedSinceLastRead
        | UP::FileExistsAndOwnedByEffectiveUserId
        | UP::FileExistsAndIsSocket
        | UP::ShellOptionEnabled
        | UP::ShellVariableIsSetAndNameRef => {
            let _ = io;
            false
        }
    })
}

fn num(s: &str, io: &Io) -> Result<i64, Flow> {
    s.trim().parse::<i64>().map_err(|_| {
        io.warn(format!("sh: test: {s}: integer expression expected"));
        Flow::Exit(2)
    })
}

fn binary(sh: &mut Shell, p: &BP, l: &str, r: &str, io: &Io) -> Result<bool, Flow> {
    Ok(match p {
        BP::StringExactlyMatchesString => l == r,
        BP::StringDoesNotExactlyMatchString => l != r,
        BP::StringExactlyMatchesPattern => expand::glob_match(r, l),
        BP::StringDoesNotExactlyMatchPattern => !expand::glob_match(r, l),
        BP::StringMatchesRegex => regex::Regex::new(r).is_ok_and(|re| re.is_match(l)),
        BP::StringContainsSubstring => l.contains(r),
        BP::LeftSortsBeforeRight => l < r,
        BP::LeftSortsAfterRight => l > r,
        BP::ArithmeticEqualTo => num(l, io)? == num(r, io)?,
        BP::ArithmeticNotEqualTo => num(l, io)? != num(r, io)?,
        BP::ArithmeticLessThan => num(l, io)? < num(r, io)?,
        BP::ArithmeticLessThanOrEqualTo => num(l, io)? <= num(r, io)?,
        BP::ArithmeticGreaterThan => num(l, io)? > num(r, io)?,
        BP::ArithmeticGreaterThanOrEqualTo => num(l, io)? >= num(r, io)?,
        BP::LeftFileIsNewerOrExistsWhenRightDoesNot
        | BP::LeftFileIsOlderOrDoesNotExistWhenRightDoes => {
            let a = file_kind(sh, l, Follow::Final).and_then(|s| s.modified);
            let b = file_kind(sh, r, Follow::Final).and_then(|s| s.modified);
            if matches!(p, BP::LeftFileIsNewerOrExistsWhenRightDoesNot) {
                match (a, b) {
                    (Some(a), Some(b)) => a > b,
                    (Some(_), None) => true,
                    _ => false,
                }
            } else {
                match (a, b) {
                    (Some(a), Some(b)) => a < b,
                    (None, Some(_)) => true,
                    _ => false,
                }
            }
        }
        BP::FilesReferToSameDeviceAndInodeNumbers => {
            let a = sh.vfs.resolve(&sh.cwd, l, Follow::Final).ok();
            a.is_some() && a == sh.vfs.resolve(&sh.cwd, r, Follow::Final).ok()
        }
    })
}
