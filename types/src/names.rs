//! Path components that are special on some operating system: refused by the
//! host's path guard (`capsaga_core::path_guard`) and by the SDK's
//! (`capsaga_sdk::fs`), so that a name means the same thing everywhere a
//! workspace may be shared (a Windows machine, a Samba share).

/// Whether one path component is a name special on some operating system:
/// it contains `\` (a separator on Windows) or `:` (drive letters, NTFS
/// alternate data streams), ends with a dot or a space (stripped by
/// Windows), or is a DOS device name: `CON`, `PRN`, `AUX`, `NUL`, `CONIN$`,
/// `CONOUT$`, `COM0`-`COM9`, `LPT0`-`LPT9` (also with the superscript digits
/// `¹²³`, which Windows treats as device suffixes), in any case and with or
/// without an extension (`NUL.txt`, `com1.log`). `.` and `..` are not
/// special here (the path guards handle them).
///
/// Control characters are not judged here: both guards refuse them first,
/// with their own message.
pub fn is_special_name(name: &str) -> bool {
    if name == "." || name == ".." {
        return false;
    }
    if name.contains('\\') || name.contains(':') || name.ends_with('.') || name.ends_with(' ') {
        return true;
    }
    let stem = name.split('.').next().unwrap_or(name).trim_end();
    let upper = stem.to_ascii_uppercase();
    let device = matches!(
        upper.as_str(),
        "CON" | "PRN" | "AUX" | "NUL" | "CONIN$" | "CONOUT$"
    ) || ((upper.starts_with("COM") || upper.starts_with("LPT"))
        && upper.len() == 4
        && upper.as_bytes()[3].is_ascii_digit());
    let superscript = {
        let u: Vec<char> = stem.to_uppercase().chars().collect();
        u.len() == 4
            && (u[..3] == ['C', 'O', 'M'] || u[..3] == ['L', 'P', 'T'])
            && matches!(u[3], '¹' | '²' | '³')
    };
    device || superscript
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_names() {
        for bad in [
            "CON", "nul.txt", "Com1", "lpt9.log", "a:stream", "a\\b", "trail.", "trail ", "COM¹",
            "conin$", "AUX .txt",
        ] {
            assert!(is_special_name(bad), "{bad}");
        }
        for ok in [".", "..", "console", "com10", "lpt", "a.b", "nul_x", "COM"] {
            assert!(!is_special_name(ok), "{ok}");
        }
    }
}
