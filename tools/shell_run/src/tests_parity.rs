//! Dry run against execute, from the attacker's side: the dry run always
//! runs the script, nothing the script observes tells the two apart, an
//! unsupported redirection writes nothing, directories the script made are
//! listable, and an output too large for the host changes nothing.

use std::fs;
use std::path::Path;

use capsaga_sdk::fs::with_granted_roots;

use super::*;
use crate::tests::{Scratch, snapshot};

/// The paths of `d.changes` relative to `ws`, with their after-kinds.
fn changed(d: &RunData, ws: &Path) -> Vec<String> {
    d.changes
        .iter()
        .map(|c| {
            let rel = c
                .path
                .strip_prefix(&*ws.to_string_lossy())
                .unwrap_or(&c.path);
            format!("{rel} {:?}", std::mem::discriminant(&c.after))
        })
        .collect()
}

#[test]
fn dry_run_runs_every_script_and_lists_what_execute_does() {
    // Each of these removes or edits a.txt; the first five were judged
    // read-only by the removed static analysis and not run in a dry run.
    let scripts = [
        "sed --in-place=x s/hello/PWNED/ a.txt",
        "[[ -n $(rm a.txt) ]]",
        "(( $(rm a.txt) 1 ))",
        "case x in $(rm a.txt)) ;; esac",
        "for (( i=$(rm a.txt); i<1; i++ )); do :; done",
        "x=$(rm a.txt)",
        ": ${x:=$(rm a.txt)}",
        "[ -w . ] && rm a.txt",
        "if [ -w a.txt ]; then rm a.txt; echo EXEC; else echo DRY; fi",
        "eval 'r''m a.txt'",
        "cmd=rm; $cmd a.txt",
        "f() { rm a.txt; }; f",
        "echo a.txt | xargs rm",
        "cat <<EOF\n$(rm a.txt)\nEOF",
        "while [ ! -e b ]; do rm a.txt; touch b; done",
        "echo $((1 + $(rm a.txt; echo 1)))",
        "printf '%s' \"$(sed -i s/hello/X/ a.txt)\"",
        "[ \"$(rm a.txt)\" = \"\" ]",
        "find . -name a.txt -delete",
        "echo PWNED | tee a.txt >/dev/null",
        "cp /dev/null a.txt 2>/dev/null || echo > a.txt",
    ];
    for script in scripts {
        let s = Scratch::new("always-runs");
        s.put("a.txt", "hello\n");
        let before = snapshot(&s.ws());
        let (_, dry) = s.call_with(script, true);
        assert!(dry.ran, "{script}");
        assert_eq!(snapshot(&s.ws()), before, "{script}: the dry run wrote");
        let (_, exec) = s.call(script);
        assert_ne!(
            s.get("a.txt").as_deref(),
            Some("hello\n"),
            "{script}: {exec:?}"
        );
        assert_eq!(changed(&dry, &s.ws()), changed(&exec, &s.ws()), "{script}");
        assert!(
            dry.changes.iter().any(|c| c.path.ends_with("/a.txt")),
            "{script}: {dry:?}"
        );
        assert_eq!(
            (dry.exit_code, &dry.stdout, &dry.stderr),
            (exec.exit_code, &exec.stdout, &exec.stderr),
            "{script}"
        );
    }
}

#[test]
fn nothing_the_script_observes_differs_between_dry_run_and_execute() {
    let probes = [
        "for t in -e -r -w -x -f -d -s -L; do for p in . a.txt sub nothing; do \
         if [ $t $p ]; then echo \"$t $p yes\"; else echo \"$t $p no\"; fi; done; done",
        "[[ -w . ]] && echo w; [[ -r a.txt ]] && echo r; [[ -x sub ]] && echo x",
        "test -w a.txt; echo $?; test -w /; echo $?",
        "ls -l; ls -la sub; ls -l a.txt",
        "env | sort; echo \"$HOME $PWD\"; pwd",
        "echo x > /etc/passwd; echo $?; echo x > ../out.txt; echo $?",
        "echo x > a.txt; echo $?; cat a.txt; mkdir d; echo $?; ls",
        "rm nothing; echo $?; rmdir sub; echo $?; mkdir sub; echo $?",
        "touch new; [ -w new ] && echo w; ls -l new",
        "cd /; echo $?; cd ..; echo $?; pwd",
        "echo hi 3>b.txt; echo $?",
    ];
    for script in probes {
        let s = Scratch::new("observe");
        s.put("a.txt", "hello\n");
        s.put("sub/in.txt", "in\n");
        let (_, dry) = s.call_with(script, true);
        let (_, exec) = s.call(script);
        assert_eq!(
            (dry.exit_code, &dry.stdout, &dry.stderr, &dry.refused),
            (exec.exit_code, &exec.stdout, &exec.stderr, &exec.refused),
            "{script}"
        );
        assert_eq!(changed(&dry, &s.ws()), changed(&exec, &s.ws()), "{script}");
    }
}

/// Runs `script` in a shell over `ws` granted writable or not; returns
/// (status, stdout, stderr, the overlay's paths).
fn shell_over(ws: &Path, writable: bool, script: &str) -> (i32, String, String, Vec<String>) {
    with_granted_roots([ws], || {
        let roots = vec![vfs::Root {
            path: ws.to_path_buf(),
            writable,
        }];
        let mut sh = Shell::new(
            Vfs::new(roots),
            ws.to_path_buf(),
            Vec::new(),
            Limits::default(),
        );
        let io = Io::new(Vec::new(), Sink::soft(1 << 16), Sink::soft(1 << 16));
        let status = sh.run_script(script, &io).unwrap_or(124);
        let out = String::from_utf8_lossy(&io.out.borrow().buf).into_owned();
        let err = String::from_utf8_lossy(&io.err.borrow().buf).into_owned();
        let nodes = sh
            .vfs
            .nodes()
            .keys()
            .map(|p| p.display().to_string())
            .collect();
        (status, out, err, nodes)
    })
}

#[test]
fn the_script_cannot_tell_a_read_only_grant_from_a_writable_one() {
    // A dry run gets every grant read-only: the shell must behave the same.
    let s = Scratch::new("grant-view");
    s.put("a.txt", "hello\n");
    for script in [
        "[ -w . ] && echo yes || echo no; [ -w a.txt ] && echo yes || echo no",
        "echo x > a.txt; echo $?; rm a.txt; echo $?; mkdir d; echo $?; touch d/e; ls d",
        "cp a.txt b.txt; mv b.txt c.txt; sed -i s/h/H/ c.txt; cat c.txt",
        "cat nothing; echo x > nodir/f; echo $?; rmdir .; echo $?",
    ] {
        assert_eq!(
            shell_over(&s.ws(), false, script),
            shell_over(&s.ws(), true, script),
            "{script}"
        );
    }
}

#[test]
fn a_change_under_a_read_only_grant_is_refused_before_anything_changes() {
    let s = Scratch::new("read-only");
    s.put("a.txt", "hello\n");
    let before = snapshot(&s.ws());
    let ws = s.ws();
    for (writable, refused) in [(false, true), (true, false)] {
        with_granted_roots([&ws], || {
            let roots = vec![vfs::Root {
                path: ws.clone(),
                writable,
            }];
            let mut sh = Shell::new(Vfs::new(roots), ws.clone(), Vec::new(), Limits::default());
            let io = Io::new(Vec::new(), Sink::soft(1024), Sink::soft(1024));
            let _ = sh.run_script("echo x > b.txt; rm a.txt; mkdir d", &io);
            let planned = commit::plan(&sh.vfs, None).unwrap_or_else(|e| panic!("{}", e.msg));
            assert_eq!(planned.len(), 3);
            let r = commit::refuse_read_only(&planned, &sh.vfs);
            assert_eq!(r.is_err(), refused, "{writable}");
            if let Err(e) = r {
                assert_eq!(e.kind, ErrorKind::PermissionDenied);
                assert!(
                    e.message.contains("read-only") && e.message.contains("nothing was changed")
                );
            }
        });
    }
    assert_eq!(snapshot(&s.ws()), before);
}

#[test]
fn an_unsupported_redirection_creates_and_truncates_nothing() {
    let scripts = [
        "echo hi 3>a.txt",
        "echo hi 3>>new.txt",
        "exec 3>x.txt",
        "echo hi >b.txt 3>c.txt",
        "echo hi 9>a.txt >b.txt",
        "echo hi >d.txt 2>&5",
        "echo hi >d.txt 1>&7",
        "x=5; echo hi >e.txt 2>&$x",
        "cat 3<a.txt >f.txt",
        "echo hi <>a.txt",
        "{ echo hi; } 3>a.txt",
        "f() { echo hi; }; f 4>a.txt",
        "echo hi 3>&1 >g.txt",
    ];
    for script in scripts {
        let s = Scratch::new("fd");
        s.put("a.txt", "keep\n");
        let before = snapshot(&s.ws());
        let (_, dry) = s.call_with(script, true);
        assert!(dry.changes.is_empty(), "{script}: {:?}", dry.changes);
        let (_, exec) = s.call(script);
        assert!(exec.changes.is_empty(), "{script}: {:?}", exec.changes);
        assert_eq!(snapshot(&s.ws()), before, "{script}");
        assert_ne!(exec.exit_code, 0, "{script}");
        assert!(
            exec.stderr.contains("not supported") || exec.stderr.contains("only descriptors"),
            "{script}: {}",
            exec.stderr
        );
    }
    // Supported ones still work, and `>` truncates before `<` reads.
    let s = Scratch::new("fd-ok");
    s.put("a.txt", "keep\n");
    let (_, d) =
        s.call("echo hi >o.txt 2>&1; cat <a.txt >c.txt; cat >t.txt <t.txt 2>&1; cat 0<a.txt");
    assert_eq!(d.stdout, "keep\n", "{}", d.stderr);
    assert_eq!(s.get("o.txt").as_deref(), Some("hi\n"));
    assert_eq!(s.get("c.txt").as_deref(), Some("keep\n"));
    assert_eq!(s.get("t.txt").as_deref(), Some(""));
}

#[test]
fn directories_that_exist_only_in_the_overlay_are_listed() {
    let s = Scratch::new("overlay-dirs");
    s.put("sub/in.txt", "in\n");
    let cases = [
        ("mkdir nd; ls nd; echo $?", "0\n"),
        ("mkdir nd; touch nd/f; ls nd", "f\n"),
        ("cp -r sub nd2; ls nd2", "in.txt\n"),
        ("mkdir -p x/y/z; ls x; ls x/y", "y\nz\n"),
        (
            "mkdir -p x/y; touch x/y/f; find x | sort",
            "x\nx/y\nx/y/f\n",
        ),
        ("mv sub moved; ls moved", "in.txt\n"),
        ("rm -r sub; mkdir sub; ls sub; echo $?", "0\n"),
        ("mkdir e; rmdir e; echo $?; ls", "0\nsub\n"),
        ("mkdir g; for f in g/*; do echo \"[$f]\"; done", "[g/*]\n"),
    ];
    for (script, want) in cases {
        let (_, dry) = s.call_with(script, true);
        assert_eq!(
            (dry.stdout.as_str(), dry.stderr.as_str()),
            (want, ""),
            "{script}"
        );
    }
}

/// Runs `script` with `max_output_bytes` at its largest.
fn call_big(s: &Scratch, script: &str, dry: bool) -> Result<(Output, RunData), ToolError> {
    let args = Args {
        script: script.into(),
        cwd: None,
        stdin: String::new(),
        max_output_bytes: MAX_OUTPUT,
    };
    let ws = s.ws();
    let out = with_granted_roots([&ws], || {
        if dry {
            ShellRun::dry_run(&CallContext::default(), args)
        } else {
            ShellRun::execute(&CallContext::default(), args)
        }
    })?;
    let data: RunData = out.data_as()?;
    Ok((out, data))
}

#[test]
fn output_is_bounded_as_json_before_anything_changes() {
    let s = Scratch::new("budget");
    // 1 MiB of control characters: 6 MiB once JSON-escaped.
    s.put("ctl.txt", &"\u{1}".repeat(1 << 20));
    s.put("a.txt", "hello\n");
    for script in [
        "rm a.txt; cat ctl.txt",
        "rm a.txt; cat ctl.txt >&2",
        "rm a.txt; cat ctl.txt; cat ctl.txt >&2",
        "rm a.txt; sed 's/x/y/' ctl.txt | tr -d '\\n'",
    ] {
        s.put("a.txt", "hello\n");
        let (out, d) = call_big(&s, script, false).unwrap_or_else(|e| panic!("{script}: {e}"));
        let size = budget::measure(&d, &out.effects).unwrap_or(u64::MAX);
        assert!(
            size + out.summary.len() as u64 <= budget::OUTPUT_CAP,
            "{script}: {size}"
        );
        assert!(
            d.stdout_truncated_bytes + d.stderr_truncated_bytes > 0,
            "{script}"
        );
        assert!(s.get("a.txt").is_none(), "{script}: the change was made");
    }
    // Pre-images too large to travel: quota-exceeded, nothing changed, in
    // both modes.
    for script in [
        "rm ctl.txt",
        "echo new > new.txt; rm ctl.txt",
        "mkdir d; sed -i s/x/y/ a.txt; echo > ctl.txt",
    ] {
        let before = snapshot(&s.ws());
        for dry in [true, false] {
            let e = call_big(&s, script, dry).err();
            assert_eq!(
                e.map(|e| e.kind),
                Some(ErrorKind::QuotaExceeded),
                "{script}"
            );
            assert_eq!(snapshot(&s.ws()), before, "{script}");
        }
    }
    assert!(fs::metadata(s.ws().join("ctl.txt")).is_ok());
}

#[test]
fn applying_stops_before_the_deadline_with_an_exact_record() {
    let s = Scratch::new("apply-stop");
    s.put("a.txt", "hello\n");
    let ws = s.ws();
    with_granted_roots([&ws], || {
        let roots = vec![vfs::Root {
            path: ws.clone(),
            writable: true,
        }];
        let mut sh = Shell::new(Vfs::new(roots), ws.clone(), Vec::new(), Limits::default());
        let io = Io::new(Vec::new(), Sink::soft(1024), Sink::soft(1024));
        let _ = sh.run_script("rm a.txt; echo b > b.txt", &io);
        let planned = commit::plan(&sh.vfs, None).unwrap_or_else(|e| panic!("{}", e.msg));
        let (done, err) = commit::apply(planned, &CallContext::default(), Some(1));
        assert!(done.is_empty());
        assert!(err.is_some_and(|e| e.contains("before the call's deadline after 0 of 2")));
    });
    assert_eq!(s.get("a.txt").as_deref(), Some("hello\n"));
    assert!(s.get("b.txt").is_none());
}
