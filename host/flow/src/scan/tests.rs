use super::*;

fn atoms(text: &str) -> Vec<(Kind, String)> {
    let mut s = Scan::default();
    scan_str(text, &mut s);
    s.atoms.into_iter().map(|a| (a.kind, a.key)).collect()
}

#[test]
fn paths_and_file_names() {
    let a = atoms("write to /ws/out/../report.pdf, or ~/notes/a.md and docs/q3.pdf");
    assert!(a.contains(&(Kind::Path, "/ws/report.pdf".into())), "{a:?}");
    assert!(a.contains(&(Kind::Path, "~/notes/a.md".into())), "{a:?}");
    assert!(a.contains(&(Kind::Path, "docs/q3.pdf".into())), "{a:?}");
    let a = atoms("attach team-building-activities.docx please");
    assert!(
        a.contains(&(Kind::Path, "team-building-activities.docx".into())),
        "{a:?}"
    );
    let a = atoms(r"C:\Users\Bob\secret.txt");
    assert!(
        a.contains(&(Kind::Path, "/users/bob/secret.txt".into())),
        "{a:?}"
    );
    // Not paths: prose slashes, fractions, a URL's path, versions.
    for t in [
        "and/or",
        "24/7",
        "km/h",
        "https://a.example/x/y.pdf",
        "v1.2",
        "e.g. this",
    ] {
        assert!(
            !atoms(t).iter().any(|(k, _)| *k == Kind::Path),
            "{t}: {:?}",
            atoms(t)
        );
    }
    assert_eq!(normalise_path("/a/./b//c/"), "/a/b/c");
    assert_eq!(
        normalise_path("/../etc/passwd"),
        "../etc/passwd".replacen("", "/", 1)
    );
}

#[test]
fn ids() {
    let a = atoms("event evt_8f2a9c and INV-2024-0042 and 123e4567-e89b-12d3-a456-426614174000");
    assert!(a.contains(&(Kind::Id, "evt_8f2a9c".into())), "{a:?}");
    assert!(a.contains(&(Kind::Id, "inv-2024-0042".into())), "{a:?}");
    assert!(
        a.contains(&(Kind::Id, "123e4567-e89b-12d3-a456-426614174000".into())),
        "{a:?}"
    );
    for t in ["covid", "mp3", "abc12", "x86"] {
        assert!(!atoms(t).iter().any(|(k, _)| *k == Kind::Id), "{t}");
    }
}

#[test]
fn paths_after_a_colon_or_equals_inside_a_token() {
    let a = atoms("grants = [\"fs:write:/ws/**\"] and --out=/tmp/x.txt");
    assert!(a.contains(&(Kind::Path, "/ws".into())), "{a:?}");
    assert!(a.contains(&(Kind::Path, "/tmp/x.txt".into())), "{a:?}");
}
