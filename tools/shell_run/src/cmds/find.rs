//! find: walks the overlay (links listed, not followed) and prints or
//! removes what matches its predicates.

use std::path::Path;

use super::walk;
use crate::shell::expand::compile;
use crate::shell::io::Io;
use crate::shell::{Flow, Shell};
use crate::vfs::Kind;

enum Pred {
    Name(globset::GlobMatcher),
    Path(globset::GlobMatcher),
    Type(Kind),
    Empty,
    Not(Box<Pred>),
}

/// `find [PATH]... [-name P] [-iname P] [-path P] [-type f|d|l] [-maxdepth N]
/// [-mindepth N] [-empty] [!|-not PRED] [-print] [-delete]`
pub fn find(sh: &mut Shell, args: &[String], io: &Io) -> Result<i32, Flow> {
    let mut starts = Vec::new();
    let mut i = 0;
    while i < args.len() && !args[i].starts_with('-') && args[i] != "!" && args[i] != "(" {
        starts.push(args[i].clone());
        i += 1;
    }
    if starts.is_empty() {
        starts.push(".".into());
    }
    let (mut preds, mut maxd, mut mind, mut delete) = (Vec::new(), usize::MAX, 0usize, false);
    let mut negate = false;
    let usage = |io: &Io, m: String| {
        io.warn(format!(
            "find: {m} (shell_run's find supports -name -iname -path -type -maxdepth -mindepth \
             -empty -not ! -print -delete; for -exec pipe the paths to xargs)"
        ));
        Ok(2)
    };
    while i < args.len() {
        let a = args[i].as_str();
        let val = args.get(i + 1).cloned();
        i += 1;
        let pred = match a {
            "!" | "-not" => {
                negate = !negate;
                continue;
            }
            "-print" | "-a" | "-and" => continue,
            "-delete" => {
                delete = true;
                continue;
            }
            "-empty" => Pred::Empty,
            "-name" | "-iname" | "-path" | "-wholename" | "-type" | "-maxdepth" | "-mindepth" => {
                let Some(v) = val else {
                    return usage(io, format!("missing argument to `{a}`"));
                };
                i += 1;
                match a {
                    "-maxdepth" | "-mindepth" => {
                        let Ok(n) = v.parse::<usize>() else {
                            return usage(io, format!("{a}: not a number: {v}"));
                        };
                        if a == "-maxdepth" {
                            maxd = n
                        } else {
                            mind = n
                        }
                        continue;
                    }
                    "-type" => Pred::Type(match v.as_str() {
                        "f" => Kind::File,
                        "d" => Kind::Dir,
                        "l" => Kind::Link,
                        _ => return usage(io, format!("-type {v}: use f, d or l")),
                    }),
                    _ => {
                        let pat = if a == "-iname" { v.to_lowercase() } else { v };
                        let Some(m) = compile(&pat) else {
                            return usage(io, format!("bad pattern {pat:?}"));
                        };
                        if a == "-name" || a == "-iname" {
                            Pred::Name(m)
                        } else {
                            Pred::Path(m)
                        }
                    }
                }
            }
            other => return usage(io, format!("unsupported expression `{other}`")),
        };
        let icase = a == "-iname";
        preds.push((
            if negate {
                Pred::Not(Box::new(pred))
            } else {
                pred
            },
            icase,
        ));
        negate = false;
    }
    let mut st = 0;
    let mut to_delete = Vec::new();
    for s in &starts {
        for (shown, p, kind, depth) in walk(sh, "find", s, maxd, io)? {
            if depth < mind {
                continue;
            }
            let name = Path::new(&shown)
                .file_name()
                .map_or(shown.clone(), |n| n.to_string_lossy().into_owned());
            let ok = preds
                .iter()
                .all(|(pr, icase)| eval(sh, pr, &name, &shown, &p, kind, *icase));
            if !ok {
                continue;
            }
            if delete {
                to_delete.push((shown, p, kind));
            } else {
                io.print(format!("{shown}\n"))?;
            }
        }
    }
    // Children before their directories.
    for (shown, p, kind) in to_delete.into_iter().rev() {
        let r = if kind == Kind::Dir {
            sh.vfs.rmdir(&p)
        } else {
            sh.vfs.remove_file(&p)
        };
        if let Err(e) = r {
            io.warn(format!("find: cannot delete '{shown}': {e}"));
            st = 1;
        }
    }
    Ok(st)
}

fn eval(
    sh: &Shell,
    p: &Pred,
    name: &str,
    shown: &str,
    real: &Path,
    kind: Kind,
    icase: bool,
) -> bool {
    match p {
        Pred::Name(m) => {
            if icase {
                m.is_match(name.to_lowercase())
            } else {
                m.is_match(name)
            }
        }
        Pred::Path(m) => m.is_match(shown),
        Pred::Type(k) => *k == kind,
        Pred::Empty => match kind {
            Kind::Dir => sh.vfs.list(real).is_ok_and(|e| e.is_empty()),
            Kind::File => sh.vfs.stat(real).ok().flatten().is_some_and(|s| s.len == 0),
            _ => false,
        },
        Pred::Not(inner) => !eval(sh, inner, name, shown, real, kind, icase),
    }
}
