//! The directory tree the path families run against: a granted directory
//! `ws/` with files, subdirectories and planted symbolic links (inside,
//! outside, absolute, chained, looping, dangling), a secret beside it, and a
//! sibling whose name starts like it.
//!
//! ```text
//! <home>/secret.txt                 outside the grant
//! <home>/wsx/a                      sibling sharing the prefix `ws`
//! <home>/ro/x                       a second, read-only grant in some cases
//! <home>/ws/sub/a.txt               the granted directory ws/
//! <home>/ws/sub/deeper/b.txt
//! <home>/ws/<link> -> <target>      every entry of LINKS
//! ```

use std::path::Path;

/// What following a planted link does, for the expectations of the families.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkKind {
    /// Resolves inside `ws/`, to a place this many components below it.
    Inside(usize),
    /// Leads out of `ws/` (absolute target, or `..` above it): refused.
    Escape,
    /// Loops: refused after too many expansions.
    Loop,
    /// Its target holds a control character: refused.
    Control,
}

/// The planted links: path under `ws/`, target (`${home}` is the tree's
/// home), and what following it does.
pub const LINKS: &[(&str, &str, LinkKind)] = &[
    ("link_in", "sub", LinkKind::Inside(1)),
    ("link_file", "sub/a.txt", LinkKind::Inside(2)),
    ("link_abs", "/etc", LinkKind::Escape),
    ("link_root", "/", LinkKind::Escape),
    ("link_abs_in", "${home}/ws/sub", LinkKind::Escape),
    ("link_ws_abs", "${home}/ws", LinkKind::Escape),
    ("link_up", "..", LinkKind::Escape),
    ("link_secret", "../secret.txt", LinkKind::Escape),
    ("link_sibling", "../wsx", LinkKind::Escape),
    ("sub/link_up2", "../..", LinkKind::Escape),
    ("sub/link_parent", "..", LinkKind::Inside(0)),
    ("sub/link_side", "../sub/deeper", LinkKind::Inside(2)),
    (
        "sub/link_deep_escape",
        "deeper/../../../x",
        LinkKind::Escape,
    ),
    ("link_chain1", "link_chain2", LinkKind::Inside(1)),
    ("link_chain2", "sub", LinkKind::Inside(1)),
    ("link_chain_out1", "link_chain_out2", LinkKind::Escape),
    ("link_chain_out2", "sub/link_up2", LinkKind::Escape),
    ("link_dotdot_in", "sub/../sub/deeper", LinkKind::Inside(2)),
    ("link_messy_in", "sub//deeper/./", LinkKind::Inside(2)),
    ("link_dangling", "nowhere", LinkKind::Inside(1)),
    ("link_dangling_out", "../nowhere", LinkKind::Escape),
    ("loop_a", "loop_b", LinkKind::Loop),
    ("loop_b", "loop_a", LinkKind::Loop),
    ("link_self", "link_self", LinkKind::Loop),
    ("link_control", "a\u{1}b", LinkKind::Control),
];

/// Plant the tree under `home` (an existing, canonical directory).
///
/// # Errors
/// The first I/O error.
pub fn plant(home: &Path) -> std::io::Result<()> {
    use std::fs;
    let ws = home.join("ws");
    fs::create_dir_all(ws.join("sub/deeper"))?;
    fs::create_dir_all(home.join("wsx"))?;
    fs::create_dir_all(home.join("ro"))?;
    fs::write(home.join("secret.txt"), "outside the grant")?;
    fs::write(home.join("wsx/a"), "sibling")?;
    fs::write(home.join("ro/x"), "read-only")?;
    fs::write(ws.join("sub/a.txt"), "a")?;
    fs::write(ws.join("sub/deeper/b.txt"), "b")?;
    let home_str = home.to_string_lossy();
    for (link, target, _) in LINKS {
        std::os::unix::fs::symlink(target.replace("${home}", &home_str), ws.join(link))?;
    }
    Ok(())
}
