//! diff: a unified diff of two files (the `similar` crate).

use super::{getopt, inputs};
use crate::shell::io::Io;
use crate::shell::{Flow, Shell};

/// `diff [-u] [-q] FILE1 FILE2`: unified format (also without `-u`).
pub fn diff(sh: &mut Shell, args: &[String], io: &Io) -> Result<i32, Flow> {
    let o = match getopt(
        "diff",
        args,
        "uqaNb",
        "U",
        &[("unified", 'u'), ("brief", 'q')],
        io,
    ) {
        Ok(o) => o,
        Err(s) => return Ok(s),
    };
    if o.rest.len() != 2 {
        io.warn("diff: expected two files");
        return Ok(2);
    }
    let (ins, st) = inputs(sh, "diff", &o.rest, io);
    if st != 0 || ins.len() != 2 {
        return Ok(2);
    }
    let a = String::from_utf8_lossy(&ins[0].data).into_owned();
    let b = String::from_utf8_lossy(&ins[1].data).into_owned();
    if a == b {
        return Ok(0);
    }
    if o.has('q') {
        io.print(format!("Files {} and {} differ\n", o.rest[0], o.rest[1]))?;
        return Ok(1);
    }
    let ctx = o.value('U').and_then(|u| u.parse().ok()).unwrap_or(3);
    let d = similar::TextDiff::from_lines(&a, &b);
    let text = d
        .unified_diff()
        .context_radius(ctx)
        .header(&o.rest[0], &o.rest[1])
        .to_string();
    io.print(text)?;
    Ok(1)
}
