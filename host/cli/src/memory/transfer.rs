//! `capsaga memory import FILE` and `capsaga memory export`: past
//! conversations in and out of the memory as JSON Lines (the format and
//! the import's guarantees are `capsaga_memory::transfer`'s; here only the
//! file, the progress bar and the report).

use super::{OnError, failure};
use crate::render::Out;
use crate::{Failure, exit};
use capsaga_door::memory::HostMemory;
use capsaga_memory::transfer::{self, Report};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Bad lines printed in the text report (`--json` lists them all).
const SHOWN: usize = 20;

fn input(file: &Path) -> Result<Box<dyn BufRead + Send>, Failure> {
    if file == Path::new("-") {
        return Ok(Box::new(BufReader::new(std::io::stdin())));
    }
    let f = std::fs::File::open(file).map_err(|e| Failure {
        code: exit::NOT_FOUND,
        message: format!("{}: {e}", file.display()),
    })?;
    Ok(Box::new(BufReader::with_capacity(1 << 20, f)))
}

fn joined<T>(r: Result<T, tokio::task::JoinError>) -> Result<T, Failure> {
    r.map_err(|e| Failure {
        code: exit::INTERNAL,
        message: format!("memory task failed: {e}"),
    })
}

fn print_bad(r: &Report) {
    for b in r.bad.iter().take(SHOWN) {
        errln!("  line {}: {}", b.line, b.reason);
    }
    if r.bad_lines > SHOWN as u64 {
        errln!(
            "  ... and {} more (--json lists up to {})",
            r.bad_lines - SHOWN as u64,
            transfer::MAX_LISTED
        );
    }
}

/// A bar over the file's bytes on standard error (hidden when it is not a
/// terminal, or when the size is unknown: standard input).
fn bar(len: Option<u64>) -> indicatif::ProgressBar {
    let Some(len) = len else {
        return indicatif::ProgressBar::hidden();
    };
    let bar = indicatif::ProgressBar::new(len);
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {msg} (eta {eta})")
    {
        bar.set_style(style);
    }
    bar
}

/// `memory import`.
pub(super) async fn import(
    hm: Arc<HostMemory>,
    out: &Out,
    file: PathBuf,
    ns: String,
    on_error: OnError,
) -> Result<u8, Failure> {
    let stdin = file == Path::new("-");
    if stdin && on_error == OnError::Refuse {
        return Err(Failure {
            code: exit::USAGE,
            message: "--on-error refuse reads the input twice: name a file, not -".into(),
        });
    }
    if on_error == OnError::Refuse {
        let mut r = input(&file)?;
        let checked = joined(tokio::task::spawn_blocking(move || transfer::check(&mut *r)).await)?
            .map_err(failure)?;
        if checked.bad_lines > 0 {
            let message = format!(
                "{}: {} bad line(s); nothing was imported (--on-error skip imports the others)",
                file.display(),
                checked.bad_lines
            );
            if out.json {
                // One JSON document: the check's report with the error.
                let mut v = serde_json::to_value(&checked).map_err(|e| Failure {
                    code: exit::INTERNAL,
                    message: e.to_string(),
                })?;
                if let Some(o) = v.as_object_mut() {
                    o.insert("error".into(), message.into());
                    o.insert("exit_code".into(), exit::USAGE.into());
                }
                out.json(&v);
                return Ok(exit::USAGE);
            }
            print_bad(&checked);
            return Err(Failure {
                code: exit::USAGE,
                message,
            });
        }
    }
    let len = (!stdin)
        .then(|| std::fs::metadata(&file).ok().map(|m| m.len()))
        .flatten();
    let bar = bar(len);
    let mut r = input(&file)?;
    let b = bar.clone();
    let report = joined(
        tokio::task::spawn_blocking(move || {
            hm.memory.import(&mut *r, &ns, &mut |p| {
                b.set_position(p.bytes);
                b.set_message(format!("{} exchanges", p.exchanges));
            })
        })
        .await,
    )?
    .map_err(failure)?;
    bar.finish_and_clear();
    if out.json {
        out.json(&report);
        return Ok(exit::OK);
    }
    outln!(
        "{} session(s), {} exchange(s): {} added, {} already in memory; {} bad line(s) skipped",
        report.sessions,
        report.exchanges,
        report.added,
        report.already,
        report.bad_lines
    );
    print_bad(&report);
    Ok(exit::OK)
}

/// `memory export`.
pub(super) async fn export(
    hm: Arc<HostMemory>,
    out: &Out,
    ns: String,
    sender: Option<String>,
    to: Option<PathBuf>,
) -> Result<u8, Failure> {
    let path = to.clone();
    let n = joined(
        tokio::task::spawn_blocking(move || {
            let mut w: Box<dyn Write> = match &path {
                Some(p) => Box::new(BufWriter::new(std::fs::File::create(p).map_err(|e| {
                    capsaga_memory::MemoryError::File {
                        path: p.clone(),
                        reason: e.to_string(),
                    }
                })?)),
                None => Box::new(BufWriter::new(std::io::stdout().lock())),
            };
            let n = hm.memory.export(&ns, sender.as_deref(), &mut w)?;
            w.flush().map_err(|e| capsaga_memory::MemoryError::File {
                path: path.clone().unwrap_or_else(|| "(standard output)".into()),
                reason: e.to_string(),
            })?;
            Ok::<_, capsaga_memory::MemoryError>(n)
        })
        .await,
    )?
    .map_err(failure)?;
    if let Some(p) = to {
        if out.json {
            out.json(&serde_json::json!({"sessions": n, "file": p}));
        } else {
            outln!("{n} session(s) written to {}", p.display());
        }
    }
    Ok(exit::OK)
}
