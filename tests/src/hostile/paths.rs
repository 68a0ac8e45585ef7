//! Path families: hostile paths against the path guard under the grant
//! `fs:write:~/ws/**`, over the planted tree of [`super::tree`].

use super::Family;
use super::tree::{LINKS, LinkKind};
use capsaga_check::corpus::Case;
use capsaga_check::{Decision, Guard};

/// The grant every path family uses unless it says otherwise.
pub const WS_GRANT: &str = "fs:write:~/ws/**";

fn allow(input: impl Into<String>) -> Case {
    Case::new(Guard::Path, input, Decision::Allow)
        .grants(&[WS_GRANT])
        .kind("allowed")
}

fn deny(input: impl Into<String>, kind: &str) -> Case {
    Case::new(Guard::Path, input, Decision::Deny)
        .grants(&[WS_GRANT])
        .kind(kind)
}

/// Every path family.
pub fn families() -> Vec<Family> {
    vec![
        dotdot_climb(),
        absolute_outside(),
        absolute_inside(),
        symlink_planted(),
        trailing_slash_links(),
        control_characters(),
        windows_special_names(),
        long_paths(),
        no_decoding(),
        grant_choice(),
    ]
}

/// Prefixes of the climb family, with the physical depth below `ws/` they
/// resolve to (through links: `sub/link_parent` is `ws/` itself).
const CLIMB_PREFIXES: &[(&str, usize)] = &[
    ("", 0),
    ("sub/", 1),
    ("sub/deeper/", 2),
    ("link_in/", 1),
    ("sub/link_parent/", 0),
    ("link_chain1/", 1),
    ("sub/link_side/", 2),
];

fn dotdot_climb() -> Family {
    let mut cases = Vec::new();
    for (prefix, depth) in CLIMB_PREFIXES {
        for ups in 0..=4usize {
            for suffix in ["", "secret.txt", "etc/passwd", "ws/sub/a.txt"] {
                for absolute in [false, true] {
                    for sep in ["/", "/./"] {
                        let mut comps: Vec<&str> =
                            prefix.split('/').filter(|c| !c.is_empty()).collect();
                        comps.extend(std::iter::repeat_n("..", ups));
                        comps.extend(suffix.split('/').filter(|c| !c.is_empty()));
                        let rel = comps.join(sep);
                        let input = if absolute {
                            format!("${{home}}/ws{sep}{rel}")
                        } else if rel.is_empty() {
                            continue;
                        } else {
                            rel
                        };
                        cases.push(if ups <= *depth {
                            allow(input)
                        } else {
                            deny(input, "escapes_root")
                        });
                    }
                }
            }
        }
    }
    Family {
        name: "dotdot_climb",
        doc: "`..` runs of 0 to 4 after prefixes of known physical depth (plain directories and symlinked ones, where `..` is the parent of the link's target, not of the link), relative and absolute, with `/` and `/./` separators, going on to a secret, to `etc/passwd` or back into the granted directory (`ws/x/../../ws/sub/a.txt`: a detour above the root is an escape, as cap-std refuses it): allowed exactly when the climb stays at or below the root (zip-slip, CVE-2007-4559 tarfile)",
        cases,
    }
}

fn absolute_outside() -> Family {
    let cases = [
        "/",
        "/etc/passwd",
        "/etc/../etc/passwd",
        "//etc/passwd",
        "/./etc/passwd",
        "/proc/self/root/etc/passwd",
        "/proc/self/cwd/secret.txt",
        "/dev/null",
        "/tmp",
        "${home}",
        "${home}/",
        "${home}/secret.txt",
        "${home}/wsx",
        "${home}/wsx/a",
        "${home}/w",
        "${home}/ws2/a",
        "${home}/ws.bak/a",
        "${home}/./ws/sub/a.txt",
        "${home}//ws/sub/a.txt",
        "${home}/../ws/sub/a.txt",
        "/proc/self/root${home}/ws/sub/a.txt",
    ]
    .into_iter()
    .map(|p| deny(p, "outside_root"))
    .collect();
    Family {
        name: "absolute_outside",
        doc: "absolute paths that do not literally start with the granted directory: system files, `/proc/self/root` detours, the home and siblings sharing the root's name as a prefix (`ws2`, `wsx`), non-normalised spellings of the root",
        cases,
    }
}

fn absolute_inside() -> Family {
    let cases = [
        "${home}/ws",
        "${home}/ws/",
        "${home}/ws//sub///a.txt",
        "${home}/ws/./sub/./a.txt",
        "${home}/ws/sub/../sub/a.txt",
        "${home}/ws/link_in/a.txt",
        "${home}/ws/link_file",
        "${home}/ws/new/file/not/yet/there.txt",
        "sub/a.txt",
        "./sub/a.txt",
        "sub/deeper/../../sub/a.txt",
    ]
    .into_iter()
    .map(allow)
    .collect();
    Family {
        name: "absolute_inside",
        doc: "legitimate paths, absolute and relative, with redundant separators, `.` and `..` that stay inside, through links that stay inside, and not yet existing files",
        cases,
    }
}

fn symlink_planted() -> Family {
    let mut cases = Vec::new();
    for (i, (link, _, kind)) in LINKS.iter().enumerate() {
        let base = if i % 2 == 0 {
            link.to_string()
        } else {
            format!("${{home}}/ws/{link}")
        };
        // The link itself, not followed: always the link's own path.
        let mut c = allow(base.clone());
        c.no_follow = true;
        cases.push(c);
        for (suffix, ups) in [
            ("", 0usize),
            ("/x", 0),
            ("/..", 1),
            ("/../..", 2),
            ("/../../..", 3),
        ] {
            for no_follow in [false, true] {
                if suffix.is_empty() && no_follow {
                    continue;
                }
                let input = format!("{base}{suffix}");
                let mut c = match kind {
                    LinkKind::Escape => deny(input, "symlink_escape"),
                    LinkKind::Loop => deny(input, "too_many_symlinks"),
                    LinkKind::Control => deny(input, "control_character"),
                    LinkKind::Inside(d) if ups <= *d => allow(input),
                    LinkKind::Inside(_) => deny(input, "escapes_root"),
                };
                c.no_follow = no_follow;
                cases.push(c);
            }
        }
    }
    Family {
        name: "symlink_planted",
        doc: "every planted link (absolute targets inside and outside, `..` targets, chains, loops, dangling, control characters in the target), alone with and without following the final component, and with `/x`, `/..`, `/../..`, `/../../..` after it: an escape anywhere in the chain is refused, `..` after a link is physical (CVE-2018-15664 docker cp, CVE-2022-21658 remove_dir_all, tar/zip symlink entries)",
        cases,
    }
}

fn trailing_slash_links() -> Family {
    let mut cases = Vec::new();
    for (i, (link, _, kind)) in LINKS.iter().enumerate() {
        let base = if i % 2 == 0 {
            link.to_string()
        } else {
            format!("${{home}}/ws/{link}")
        };
        for suffix in ["/", "/.", "//", "/./"] {
            // Written as a directory, the final link is followed even when
            // not following is asked: the kernel and cap-std follow it.
            let input = format!("{base}{suffix}");
            let mut c = match kind {
                LinkKind::Escape => deny(input, "symlink_escape"),
                LinkKind::Loop => deny(input, "too_many_symlinks"),
                LinkKind::Control => deny(input, "control_character"),
                LinkKind::Inside(_) => allow(input),
            };
            c.no_follow = true;
            cases.push(c);
        }
    }
    Family {
        name: "trailing_slash_links",
        doc: "every planted link written as a directory (`link/`, `link/.`, `link//`, `link/./`) with the final component not followed: the trailing slash makes the kernel and cap-std follow it, so a link leading out is refused however the caller asked (issue 13 item 5: `ws/d -> ../../..` probed as `ws/d/` with --no-follow)",
        cases,
    }
}

/// The characters `char::is_control` is true for: C0, DEL, C1.
fn control_chars() -> impl Iterator<Item = char> {
    (0u32..=0x1F)
        .chain(std::iter::once(0x7F))
        .chain(0x80..=0x9F)
        .filter_map(char::from_u32)
}

fn control_characters() -> Family {
    let mut cases = Vec::new();
    for c in control_chars() {
        for input in [
            format!("{c}sub/a.txt"),
            format!("sub/{c}a.txt"),
            format!("${{home}}/ws/sub/a.txt{c}"),
        ] {
            cases.push(deny(input, "control_character"));
        }
    }
    Family {
        name: "control_characters",
        doc: "every C0 control, DEL and every C1 control (NUL truncation, newline log injection, escape sequences) at the start, middle and end of a path",
        cases,
    }
}

const DEVICES: &[&str] = &[
    "CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$", "COM0", "COM1", "COM2", "COM3", "COM4",
    "COM5", "COM6", "COM7", "COM8", "COM9", "LPT0", "LPT1", "LPT2", "LPT3", "LPT4", "LPT5", "LPT6",
    "LPT7", "LPT8", "LPT9", "COM¹", "COM²", "COM³", "LPT¹", "LPT²", "LPT³",
];

fn windows_special_names() -> Family {
    let mut cases = Vec::new();
    for (i, dev) in DEVICES.iter().enumerate() {
        let lower = dev.to_lowercase();
        let title: String = dev.chars().take(1).chain(lower.chars().skip(1)).collect();
        for (j, name) in [dev.to_string(), lower, title].into_iter().enumerate() {
            for ext in ["", ".txt", ".tar.gz"] {
                let input = if (i + j) % 2 == 0 {
                    format!("sub/{name}{ext}")
                } else {
                    format!("{name}{ext}/a.txt")
                };
                cases.push(deny(input, "special_name"));
            }
        }
    }
    for special in [
        "a.txt::$DATA",
        "sub/a.txt:stream",
        "sub/a.txt:Zone.Identifier:$DATA",
        "C:",
        "C:\\Windows\\win.ini",
        "..\\..\\secret.txt",
        "sub\\..\\..\\secret.txt",
        "sub/..\\..\\secret.txt",
        "a.txt.",
        "a.txt ",
        "sub./a",
        "sub /a",
        "...",
        "....",
        ".. ",
        ". ",
        "a..",
        "CON .txt",
        "\\\\?\\C:\\secret.txt",
        "\\\\.\\PhysicalDrive0",
    ] {
        cases.push(deny(special, "special_name"));
    }
    for fine in [
        "console",
        "CONSOLE.txt",
        "COM10",
        "LPT10",
        "COMA",
        "nul_",
        "auxiliary",
        "PRNX",
        "CON_",
        "CONIN",
        ".hidden",
        "a.b.c",
        "com",
        "lpt",
        "a b",
        " leading",
        "$DATA",
    ] {
        cases.push(allow(fine));
    }
    Family {
        name: "windows_special_names",
        doc: "DOS device names (CON, PRN, AUX, NUL, CONIN$, CONOUT$, COM0-9, LPT0-9 and the superscript COM¹²³/LPT¹²³ Windows also treats as devices) in three cases, bare and with extensions, as the last or a middle component; NTFS alternate data streams (`::$DATA`, CVE-1999-0278), drive letters, `\\` traversal (CVE-2018-1271 Spring on Windows), `\\\\?\\` and `\\\\.\\` device paths, trailing dots and spaces Windows strips (CVE-2013-4547 nginx); and near misses that must stay allowed",
        cases,
    }
}

fn long_paths() -> Family {
    let cases = vec![
        deny(format!("{}b", "a/".repeat(2048)), "too_long"),
        allow(format!("{}bb", "a/".repeat(2047))),
        deny("é".repeat(2049), "too_long"),
        allow(format!("{}a.txt", "./".repeat(2000))),
        allow(format!(
            "{}{}secret.txt",
            "x/".repeat(600),
            "../".repeat(600)
        )),
        deny(format!("{}..", "x/../".repeat(600)), "escapes_root"),
        deny(
            format!("{}../secret.txt", "sub/..//./".repeat(300)),
            "escapes_root",
        ),
        allow("a".repeat(255)),
        allow("a".repeat(4000)),
        deny("", "empty"),
    ];
    Family {
        name: "long_paths",
        doc: "the 4096-byte limit exactly and one byte over (in ASCII and two-byte characters), thousands of `.` and `x/..` components hiding a climb, one huge component, the empty path",
        cases,
    }
}

fn no_decoding() -> Family {
    let cases = [
        "%2e%2e/secret.txt",
        "%2e%2e%2fsecret.txt",
        "..%2fsecret.txt",
        "..%5csecret.txt",
        "%252e%252e/secret.txt",
        ".%2e/secret.txt",
        "%%32%65%%32%65/secret.txt",
        "..%c0%afsecret.txt",
        "%c0%ae%c0%ae/secret.txt",
        "..%255csecret.txt",
        "..;/secret.txt",
        "sub/..;/..;/secret.txt",
        "\u{FF0E}\u{FF0E}/secret.txt",
        "\u{2025}/secret.txt",
        "\u{2024}\u{2024}/secret.txt",
        "\u{FE52}\u{FE52}/secret.txt",
        "..\u{2215}secret.txt",
        "..\u{2044}secret.txt",
        "..\u{FF0F}secret.txt",
        "..\u{29F8}secret.txt",
        "..\u{2216}secret.txt",
        "\u{202E}txt.exe",
        "sub/..\u{200B}/secret.txt",
        "cafe\u{301}",
        "\u{FB01}le",
    ]
    .into_iter()
    .map(allow)
    .chain(
        // An invisible character before `..` or between its dots leaves a
        // name ending in a dot, which Windows would strip: refused as such.
        ["sub/\u{200B}../secret.txt", "sub/.\u{200D}./secret.txt"]
            .into_iter()
            .map(|p| deny(p, "special_name")),
    )
    .collect();
    Family {
        name: "no_decoding",
        doc: "percent-encoded, double-encoded and overlong-UTF-8 traversals (CVE-2021-41773 `.%2e`, CVE-2021-42013 `%%32%65`, CVE-2000-0884 `%c0%af`, CVE-2001-0333 `%255c`), Tomcat's `..;` (Orange Tsai, Black Hat 2018), and Unicode lookalikes of `.` and `/` (fullwidth, leaders, division and fraction slashes) or `..` split by invisible characters: the guard decodes nothing, so each is one literal name inside the root",
        cases,
    }
}

fn grant_choice() -> Family {
    let two = ["fs:write:~/ws/**", "fs:read:~/ro/**"];
    let nested = ["fs:write:~/ws/**", "fs:read:~/ws/sub/**"];
    let mk = |input: &str, grants: &[&str], write: bool, expect: Decision, kind: &str| {
        let mut c = Case::new(Guard::Path, input, expect)
            .grants(grants)
            .kind(kind);
        c.write = write;
        c
    };
    let cases = vec![
        mk("${home}/ws/a.txt", &two, true, Decision::Allow, "allowed"),
        mk("${home}/ro/x", &two, true, Decision::Deny, "read_only"),
        mk("${home}/ro/x", &two, false, Decision::Allow, "allowed"),
        mk(
            "${home}/ro/../ws/a.txt",
            &two,
            false,
            Decision::Deny,
            "escapes_root",
        ),
        mk(
            "${home}/ro/../ws/a.txt",
            &two,
            true,
            Decision::Deny,
            "escapes_root",
        ),
        mk(
            "${home}/secret.txt",
            &two,
            false,
            Decision::Deny,
            "outside_root",
        ),
        mk("x", &two, false, Decision::Deny, "ambiguous_relative"),
        mk(
            "${home}/ws/sub/a.txt",
            &nested,
            true,
            Decision::Allow,
            "allowed",
        ),
        mk(
            "${home}/ws/sub/../a.txt",
            &nested,
            true,
            Decision::Allow,
            "allowed",
        ),
        mk(
            "${home}/ws/a.txt",
            &["fs:read:~/ws/**"],
            true,
            Decision::Deny,
            "read_only",
        ),
        mk(
            "${home}/ws/a.txt",
            &["net:https:example.com"],
            false,
            Decision::Deny,
            "no_grant",
        ),
        mk("${home}/ws/a.txt", &[], false, Decision::Deny, "no_grant"),
    ];
    Family {
        name: "grant_choice",
        doc: "several grants: write needs a write grant containing the path, a read-only grant nested in a writable one does not narrow it (a tool can use any of its preopens), `..` out of one granted directory into another is still refused, relative paths with several grants are ambiguous, no fs grant denies everything",
        cases,
    }
}
