//! Native tests over real files in a scratch directory (the component's
//! confinement itself is tested through the real sandbox in
//! `tests/tests/shell_run/`).

use std::fs;
use std::path::PathBuf;

use capsaga_sdk::fs::with_granted_roots;

use super::*;

pub(crate) struct Scratch(pub(crate) PathBuf);

impl Scratch {
    pub(crate) fn new(name: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("shell_run-test-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("ws")).unwrap_or_else(|e| panic!("{e}"));
        Scratch(dir)
    }
    pub(crate) fn ws(&self) -> PathBuf {
        self.0.join("ws")
    }
    pub(crate) fn put(&self, rel: &str, content: &str) {
        let p = self.ws().join(rel);
        if let Some(d) = p.parent() {
            fs::create_dir_all(d).unwrap_or_else(|e| panic!("{e}"));
        }
        fs::write(p, content).unwrap_or_else(|e| panic!("{e}"));
    }
    pub(crate) fn get(&self, rel: &str) -> Option<String> {
        fs::read_to_string(self.ws().join(rel)).ok()
    }
    pub(crate) fn call(&self, script: &str) -> (Output, RunData) {
        self.call_with(script, false)
    }
    pub(crate) fn call_with(&self, script: &str, dry: bool) -> (Output, RunData) {
        let args = Args {
            script: script.into(),
            cwd: None,
            stdin: String::new(),
            max_output_bytes: DEFAULT_MAX_OUTPUT,
        };
        let ws = self.ws();
        let out = with_granted_roots([&ws], || {
            if dry {
                ShellRun::dry_run(&CallContext::default(), args)
            } else {
                ShellRun::execute(&CallContext::default(), args)
            }
        })
        .unwrap_or_else(|e| panic!("{script}: {e}"));
        let data: RunData = out.data_as().unwrap_or_else(|e| panic!("{e}"));
        (out, data)
    }
    pub(crate) fn undo(&self, out: &Output) -> Result<(), ToolError> {
        let args = Args {
            script: String::new(),
            cwd: None,
            stdin: String::new(),
            max_output_bytes: DEFAULT_MAX_OUTPUT,
        };
        let ws = self.ws();
        with_granted_roots([&ws], || {
            ShellRun::compensate(&CallContext::default(), args, out)
        })
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

pub(crate) fn snapshot(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut v = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            let rel = p
                .strip_prefix(dir)
                .map(|r| r.display().to_string())
                .unwrap_or_default();
            if p.is_dir() {
                v.push((format!("{rel}/"), Vec::new()));
                stack.push(p);
            } else {
                v.push((rel, fs::read(&p).unwrap_or_default()));
            }
        }
    }
    v.sort();
    v
}

#[test]
fn meta_is_valid() {
    let meta = capsaga_sdk::describe::<ShellRun>(env!("CARGO_PKG_VERSION"));
    assert_eq!(meta.check(), Ok(()));
    assert!(meta.has_side_effects && meta.returns_untrusted && meta.supports_dry_run);
    assert_eq!(meta.capabilities, ["fs:read:*", "fs:write:*"]);
}

#[test]
fn pipelines_variables_and_control_flow() {
    let s = Scratch::new("basics");
    s.put("a.txt", "pear\napple\nfig\napple\n");
    let cases: &[(&str, &str)] = &[
        ("echo hello world", "hello world\n"),
        (
            "cat a.txt | sort | uniq -c | sort -rn | head -n 1",
            "      2 apple\n",
        ),
        ("grep -c apple a.txt", "2\n"),
        ("x=3; y=$((x * 4 + 1)); echo \"$y\"", "13\n"),
        (
            "for f in one two; do printf '%s-' \"$f\"; done; echo",
            "one-two-\n",
        ),
        (
            "case pear.txt in *.md) echo md;; *.txt) echo txt;; esac",
            "txt\n",
        ),
        (
            "f() { echo \"in f: $1\"; return 3; }; f arg; echo $?",
            "in f: arg\n3\n",
        ),
        ("echo $(echo inner | tr a-z A-Z)", "INNER\n"),
        ("echo `echo back`", "back\n"),
        (
            "true && echo yes || echo no; false && echo yes || echo no",
            "yes\nno\n",
        ),
        (
            "i=0; while [ $i -lt 3 ]; do i=$((i+1)); done; echo $i",
            "3\n",
        ),
        (
            "v=path/to/file.tar.gz; echo ${v##*/} ${v%.gz} ${#v} ${u:-dflt}",
            "file.tar.gz path/to/file.tar 19 dflt\n",
        ),
        (
            "printf '%05.1f|%-4s|%x\\n' 3.14159 ab 255",
            "003.1|ab  |ff\n",
        ),
        ("echo a:b:c | cut -d: -f2,3", "b:c\n"),
        ("sed -n '2p' a.txt", "apple\n"),
        ("sed 's/p\\(.*\\)r/P\\1R/' a.txt | head -1", "PeaR\n"),
        (
            "sed -E 's/(a)(p+)/<\\2\\1>/g' a.txt | tail -n 1",
            "<ppa>le\n",
        ),
        ("wc -l < a.txt", "4\n"),
        ("ls | sort", "a.txt\n"),
        ("echo *.txt", "a.txt\n"),
        ("echo '*.txt' \"$HOME\" | cut -c1-5", "*.txt\n"),
        ("basename /x/y/z.rs .rs; dirname /x/y/z.rs", "z\n/x/y\n"),
        ("cat <<EOF\nline $((1+1))\nEOF", "line 2\n"),
        (
            "echo one two three | xargs -n 1 echo item",
            "item one\nitem two\nitem three\n",
        ),
        ("seq 3 | paste 2>/dev/null; seq 2 4", "2\n3\n4\n"),
        ("test -f a.txt && [ -d . ] && echo ok", "ok\n"),
        ("echo abc | grep -o b; echo ABC | grep -i abc", "b\nABC\n"),
        ("find . -name '*.txt'", "./a.txt\n"),
        ("yes | head -n 2", "y\ny\n"),
        ("printf 'b\\na\\n' | sort -r", "b\na\n"),
        ("echo x 2>&1 >/dev/null; echo err >&2", ""),
    ];
    for (script, want) in cases {
        let (_, d) = s.call(script);
        assert_eq!(d.stdout, *want, "{script}: stderr {}", d.stderr);
    }
}

#[test]
fn writes_are_recorded_applied_and_undone() {
    let s = Scratch::new("undo");
    s.put("notes.txt", "alpha\nbeta\n");
    s.put("old/keep.txt", "keep");
    let before = snapshot(&s.ws());
    let (out, d) = s.call(
        "set -e\n\
         mkdir -p out/deep\n\
         grep -v beta notes.txt | sed 's/alpha/ALPHA/' > out/deep/r.txt\n\
         echo more >> notes.txt\n\
         sed -i 's/beta/BETA/' notes.txt\n\
         mv old moved\n\
         touch empty\n\
         cat out/deep/r.txt",
    );
    assert_eq!(d.exit_code, 0, "{}", d.stderr);
    assert_eq!(d.stdout, "ALPHA\n");
    assert!(d.applied);
    assert_eq!(s.get("notes.txt").as_deref(), Some("alpha\nBETA\nmore\n"));
    assert_eq!(s.get("out/deep/r.txt").as_deref(), Some("ALPHA\n"));
    assert_eq!(s.get("moved/keep.txt").as_deref(), Some("keep"));
    assert!(s.get("old/keep.txt").is_none());
    assert!(out.effects.iter().any(|e| e.starts_with("wrote ")));
    s.undo(&out).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(snapshot(&s.ws()), before, "byte-identical after undo");
    s.undo(&out).unwrap_or_else(|e| panic!("idempotent: {e}"));
    assert_eq!(snapshot(&s.ws()), before);
}

#[test]
fn dry_run_reports_without_writing_and_its_plan_undoes_a_crash() {
    let s = Scratch::new("dry");
    s.put("a.txt", "one\n");
    let before = snapshot(&s.ws());
    let script = "echo two > a.txt; echo new > b.txt; rm -f nothing";
    let (dry, d) = s.call_with(script, true);
    assert!(d.dry_run && !d.applied);
    assert_eq!(snapshot(&s.ws()), before, "dry run wrote");
    let paths: Vec<&str> = d.changes.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(paths.len(), 2, "{paths:?}");
    assert!(dry.effects.iter().any(|e| e.starts_with("would replace")));
    // Undoing the plan of a step that never ran changes nothing.
    s.undo(&dry).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(snapshot(&s.ws()), before);
    // A step that ran but whose output was lost: the plan is enough.
    s.call(script);
    assert_eq!(s.get("b.txt").as_deref(), Some("new\n"));
    s.undo(&dry).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(snapshot(&s.ws()), before);
}

#[test]
fn third_party_change_is_unrevertible_and_left_alone() {
    let s = Scratch::new("conflict");
    s.put("a.txt", "one\n");
    let (out, _) = s.call("echo ours > a.txt; echo x > b.txt");
    s.put("a.txt", "theirs\n");
    let e = s.undo(&out).err();
    assert_eq!(e.as_ref().map(|e| e.kind), Some(ErrorKind::Unrevertible));
    assert_eq!(s.get("a.txt").as_deref(), Some("theirs\n"));
    assert!(s.get("b.txt").is_none(), "the rest is undone");
}

#[test]
fn hostile_scripts_are_contained() {
    let s = Scratch::new("hostile");
    fs::write(s.0.join("secret.txt"), "TOP-SECRET").unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink(s.0.join("secret.txt"), s.ws().join("planted"))
        .unwrap_or_else(|e| panic!("{e}"));
    let before = snapshot(&s.0);
    for script in [
        "cat /etc/passwd",
        "cat ../secret.txt",
        "cd .. && cat secret.txt",
        "ln -s / x; cat x/etc/passwd",
        "echo $(cat /etc/passwd)",
        "echo `cat ../secret.txt`",
        "rm -rf /",
        "rm -rf .",
        "echo pwned > planted",
        "cat planted",
        "/bin/sh -c id",
        "exec /bin/sh",
    ] {
        let (_, d) = s.call(script);
        assert!(d.exit_code != 0 || !d.refused.is_empty(), "{script}: {d:?}");
        assert!(
            !d.stdout.contains("TOP-SECRET") && !d.stdout.contains("root:"),
            "{script}"
        );
        assert!(!d.stderr.is_empty(), "{script}: no error message");
        assert!(d.changes.is_empty(), "{script}: {:?}", d.changes);
    }
    assert_eq!(snapshot(&s.0), before);
    let (_, d) = s.call("cat /etc/passwd");
    assert!(
        d.stderr.contains("outside the directories granted"),
        "{}",
        d.stderr
    );
    let (_, d) = s.call("ln -s / x");
    assert!(
        d.stderr.contains("command not found") && d.stderr.contains("grep"),
        "{}",
        d.stderr
    );
    // A fork-bomb-shaped function hits the nesting limit.
    let (_, d) = s.call(":(){ :|:& };:");
    assert_eq!(d.exit_code, 124);
    assert!(
        d.stopped
            .as_deref()
            .is_some_and(|w| w.contains("nested deeper")),
        "{d:?}"
    );
    // Output floods are bounded.
    let (_, d) = s.call("yes | head -c 100000000");
    assert_eq!(d.stdout.len() as u64, DEFAULT_MAX_OUTPUT);
    assert!(d.stdout_truncated_bytes > 0);
    // A script stopped by a limit changes nothing.
    let (_, d) = s.call("echo x > f.txt; while true; do :; done");
    assert_eq!(d.exit_code, 124);
    assert!(s.get("f.txt").is_none());
}

#[test]
fn text_commands_print_what_gnu_prints() {
    let s = Scratch::new("gnu");
    s.put("a.txt", "alpha one\nBeta two\n\nfoo bar\nfoobar\nlast foo");
    s.put("b.txt", "x\nfoo\n");
    s.put("s.txt", "b 10 x\na 2 y\nB 2 z\nc -1 w\na 2 y\n");
    // Expected outputs of GNU grep 3, sort, tr and wc 9 (LC_ALL=C; wc's
    // columns are not padded) and bash's printf and echo on the same input.
    let cases: &[(&str, &str)] = &[
        ("grep -v foo a.txt", "alpha one\nBeta two\n\n"),
        ("grep -n foo a.txt", "4:foo bar\n5:foobar\n6:last foo\n"),
        ("grep -vn foo a.txt", "1:alpha one\n2:Beta two\n3:\n"),
        ("grep -c -v foo a.txt", "3\n"),
        ("grep -c foo a.txt b.txt", "a.txt:3\nb.txt:1\n"),
        ("grep -l foo a.txt b.txt", "a.txt\nb.txt\n"),
        ("grep -L beta a.txt b.txt", "a.txt\nb.txt\n"),
        ("grep -m 2 foo a.txt", "foo bar\nfoobar\n"),
        ("grep -x foo b.txt", "foo\n"),
        ("grep -w foo a.txt", "foo bar\nlast foo\n"),
        (
            "grep -on o a.txt",
            "1:o\n2:o\n4:o\n4:o\n5:o\n5:o\n6:o\n6:o\n",
        ),
        ("grep -in beta a.txt", "2:Beta two\n"),
        (
            "grep -e alpha -e x a.txt b.txt",
            "a.txt:alpha one\nb.txt:x\n",
        ),
        ("grep -v '' a.txt", ""),
        ("grep -c '^' a.txt", "6\n"),
        ("grep -n '^$' a.txt", "3:\n"),
        ("grep -vm1 alpha a.txt", "Beta two\n"),
        (
            "grep -h foo a.txt b.txt",
            "foo bar\nfoobar\nlast foo\nfoo\n",
        ),
        ("grep -E 'fo+(bar)?$' a.txt", "foobar\nlast foo\n"),
        ("grep 'o\\{2\\}' a.txt", "foo bar\nfoobar\nlast foo\n"),
        ("grep -q foo a.txt && echo yes", "yes\n"),
        ("grep -c zzz a.txt; echo $?", "0\n1\n"),
        ("printf 'foo\\nbar' | grep -v foo", "bar\n"),
        ("sort s.txt", "B 2 z\na 2 y\na 2 y\nb 10 x\nc -1 w\n"),
        ("sort -r s.txt", "c -1 w\nb 10 x\na 2 y\na 2 y\nB 2 z\n"),
        ("sort -f s.txt", "a 2 y\na 2 y\nb 10 x\nB 2 z\nc -1 w\n"),
        ("sort -u s.txt", "B 2 z\na 2 y\nb 10 x\nc -1 w\n"),
        ("sort -n -k2 s.txt", "c -1 w\nB 2 z\na 2 y\na 2 y\nb 10 x\n"),
        (
            "sort -k2,2n -k1,1r s.txt",
            "c -1 w\na 2 y\na 2 y\nB 2 z\nb 10 x\n",
        ),
        (
            "sort -t' ' -k3 s.txt",
            "c -1 w\nb 10 x\na 2 y\na 2 y\nB 2 z\n",
        ),
        ("sort -k2n -u s.txt", "c -1 w\na 2 y\nb 10 x\n"),
        ("sort -fu s.txt", "a 2 y\nb 10 x\nB 2 z\nc -1 w\n"),
        (
            "sort -rn -k2 s.txt",
            "b 10 x\na 2 y\na 2 y\nB 2 z\nc -1 w\n",
        ),
        ("echo a | tr aa xy", "y\n"),
        (
            "echo 'hello,  world!! ok' | tr -cs 'a-z' '\\n'",
            "hello\nworld\nok\n",
        ),
        ("echo aabbcc | tr -ds a b", "bcc\n"),
        ("echo aabbcc | tr -s 'a-c'", "abc\n"),
        ("echo héllo | tr a-z A-Z", "HéLLO\n"),
        ("echo héllo | tr -d é", "hllo\n"),
        ("echo abc | tr abc x", "xxx\n"),
        ("echo 'a1b2' | tr -d '[:digit:]'", "ab\n"),
        ("printf 'h\\303\\251\\n' | wc -m", "3\n"),
        ("printf 'a b\\nc' | wc -l -w", "1 3\n"),
        ("printf '%b' 'a\\tb\\0101\\n'", "a\tbA\n"),
        ("echo -e 'x\\0101y'", "xAy\n"),
        ("printf '\\303\\251\\n'", "é\n"),
        ("printf '%d %s\\n' 1 a 2 b", "1 a\n2 b\n"),
        ("printf '%03d|%-3d|\\n' -5 7", "-05|7  |\n"),
        ("printf '%c%c\\n' hello w", "hw\n"),
    ];
    for (script, want) in cases {
        let (_, d) = s.call(script);
        assert_eq!(d.stdout, *want, "{script}: stderr {}", d.stderr);
    }
}

#[test]
fn writes_and_undo_keep_mode_inode_and_hard_links() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let s = Scratch::new("modes");
    s.put(".env", "TOKEN=secret\n");
    s.put("run.sh", "#!/bin/sh\n");
    let p = |n: &str| s.ws().join(n);
    let set = |n: &str, m: u32| {
        fs::set_permissions(p(n), fs::Permissions::from_mode(m)).unwrap_or_else(|e| panic!("{e}"))
    };
    set(".env", 0o600);
    set("run.sh", 0o755);
    fs::hard_link(p("run.sh"), p("link.sh")).unwrap_or_else(|e| panic!("{e}"));
    let meta = |n: &str| fs::metadata(p(n)).unwrap_or_else(|e| panic!("{e}"));
    let (ino, before) = (meta(".env").ino(), snapshot(&s.ws()));
    let check = |when: &str| {
        assert_eq!(meta(".env").permissions().mode() & 0o777, 0o600, "{when}");
        assert_eq!(meta("run.sh").permissions().mode() & 0o777, 0o755, "{when}");
        assert_eq!(meta(".env").ino(), ino, "{when}");
        assert_eq!(meta("run.sh").nlink(), 2, "{when}");
        assert_eq!(s.get("run.sh"), s.get("link.sh"), "{when}");
    };
    let (out, d) = s.call("sed -i s/secret/new/ .env; echo 'echo hi' >> run.sh; echo x > .env2");
    assert_eq!(d.exit_code, 0, "{}", d.stderr);
    assert_eq!(s.get(".env").as_deref(), Some("TOKEN=new\n"));
    check("execute");
    s.undo(&out).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(snapshot(&s.ws()), before);
    check("undo");
}

#[test]
fn a_write_interrupted_in_place_is_restored_by_undo() {
    let s = Scratch::new("torn");
    s.put("a.txt", "the previous content\n");
    let (dry, _) = s.call_with("echo 'the new content, longer' > a.txt", true);
    // Killed mid-write: the scratch marker is there, the file holds a mix.
    let path = s.ws().join("a.txt");
    let marker = commit::temp_path(&path, &CallContext::default(), "execute")
        .unwrap_or_else(|| panic!("no scratch path"));
    fs::write(&marker, "").unwrap_or_else(|e| panic!("{e}"));
    s.put("a.txt", "the new content, lontent\n");
    s.undo(&dry).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.get("a.txt").as_deref(), Some("the previous content\n"));
    assert!(!marker.exists());
    // Without the marker, the same mix is someone else's change.
    s.put("a.txt", "the new content, lontent\n");
    let e = s.undo(&dry).err().map(|e| e.kind);
    assert_eq!(e, Some(ErrorKind::Unrevertible));
}
