//! The compiled-component cache with real components and real starts: a
//! second start loads native code instead of compiling, and anything in the
//! cache directory the host did not write exactly as it is (a corrupt file,
//! another component's code under this one's name, a raw Wasmtime `.cwasm`
//! planted by someone, a directory others can write to) is never loaded.

use capsaga_door::host::Host;
use capsaga_sandbox::CacheOutcome;
use capsaga_tests::TestWorkspace;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

/// A cache of the workspace's own (not the one the test workspaces share),
/// metas read by Cranelift: a start without kept metas compiles every
/// component for calls, which is how the tests below reach the compiled
/// entries at load.
const POLICY: &str = "compiled_cache = \".capsaga/compiled\"\nmeta_compiler = \"cranelift\"\n[tools.time_now]\n[tools.spin]\n";
/// The default: metas read by the baseline compiler (Winch).
const BASELINE: &str = "compiled_cache = \".capsaga/compiled\"\n[tools.time_now]\n[tools.spin]\n";

fn outcomes(host: &Host) -> BTreeMap<String, CacheOutcome> {
    host.registry
        .tools()
        .iter()
        .map(|t| (t.meta.name.clone(), t.compiled.clone()))
        .collect()
}

fn cache_dir(ws: &TestWorkspace) -> PathBuf {
    ws.root.join(".capsaga/compiled")
}

fn cache_file(ws: &TestWorkspace, host: &Host, tool: &str) -> PathBuf {
    let t = host.registry.get(tool).unwrap();
    let cache = host.sandbox.compiled_cache().expect("cache in use");
    cache_dir(ws).join(cache.file_name(&t.hash))
}

async fn time_now_works(host: &std::sync::Arc<Host>) {
    match capsaga_tests::call_once(host, "time_now", serde_json::json!({})).await {
        capsaga_door::dispatch::Outcome::Committed { output, .. } => {
            assert!(output.data["unix_ms"].as_u64().is_some())
        }
        other => panic!("{other:?}"),
    }
}

fn all(host: &Host, expect: &CacheOutcome) {
    for (tool, got) in outcomes(host) {
        assert_eq!(&got, expect, "{tool}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn second_start_loads_every_component_from_the_cache() {
    let ws = TestWorkspace::new(&["time_now", "spin"], POLICY);
    let first = ws.host().await;
    all(&first, &CacheOutcome::Miss);
    let dir = cache_dir(&ws);
    assert_eq!(
        std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
        0o700
    );
    let file = cache_file(&ws, &first, "time_now");
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // One entry per component (and its compile lock), no temporary file left.
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names.iter().filter(|n| n.ends_with(".cwasm")).count(),
        2,
        "{names:?}"
    );
    assert_eq!(
        names.iter().filter(|n| n.ends_with(".meta.json")).count(),
        2,
        "{names:?}"
    );
    assert!(
        names.iter().all(|n| n.ends_with(".cwasm")
            || n.ends_with(".cwasm.lock")
            || n.ends_with(".meta.json")),
        "{names:?}"
    );
    drop(first);

    // The metas were kept: the next start loads every tool without its
    // code, and a call compiles (here: loads) only what it calls.
    let second = ws.host().await;
    all(&second, &CacheOutcome::Deferred);
    time_now_works(&second).await;
    drop(second);
    // Without the metas, every component is loaded from the cache.
    forget_metas(&ws);
    let third = ws.host().await;
    all(&third, &CacheOutcome::Hit);
    time_now_works(&third).await;
}

/// The default first start: every meta read by the baseline compiler and
/// kept, nothing compiled for calls; a call compiles (and keeps) only its
/// own component; the metas are the ones Cranelift's code gives.
#[tokio::test(flavor = "multi_thread")]
async fn a_cold_start_reads_metas_with_the_baseline_compiler_and_compiles_only_what_it_calls() {
    let ws = TestWorkspace::new(&["time_now", "spin"], BASELINE);
    let first = ws.host().await;
    all(&first, &CacheOutcome::Deferred);
    let names = |ws: &TestWorkspace| -> Vec<String> {
        std::fs::read_dir(cache_dir(ws))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    };
    let count = |names: &[String], end: &str| names.iter().filter(|n| n.ends_with(end)).count();
    let before = names(&ws);
    assert_eq!(count(&before, ".meta.json"), 2, "{before:?}");
    assert_eq!(count(&before, ".cwasm"), 0, "nothing compiled: {before:?}");
    time_now_works(&first).await;
    let after = names(&ws);
    assert_eq!(count(&after, ".cwasm"), 1, "time_now only: {after:?}");
    assert!(cache_file(&ws, &first, "time_now").exists());
    assert!(!cache_file(&ws, &first, "spin").exists());
    drop(first);
    let second = ws.host().await;
    all(&second, &CacheOutcome::Deferred);
    time_now_works(&second).await;

    // The same metas as Cranelift's code reads.
    let other = TestWorkspace::new(&["time_now", "spin"], POLICY);
    let cranelift = other.host().await;
    all(&cranelift, &CacheOutcome::Miss);
    for name in ["time_now", "spin"] {
        assert_eq!(
            second.registry.get(name).unwrap().meta,
            cranelift.registry.get(name).unwrap().meta,
            "{name}"
        );
    }
}

/// Remove the metas the cache kept, so a start loads every component.
fn forget_metas(ws: &TestWorkspace) {
    for e in std::fs::read_dir(cache_dir(ws)).unwrap() {
        let p = e.unwrap().path();
        if p.to_string_lossy().ends_with(".meta.json") {
            std::fs::remove_file(p).unwrap();
        }
    }
}

/// A kept meta the host did not write exactly as it is (loose mode, other
/// bytes' meta under this name, a link, not JSON) is not used: the tool is
/// loaded from its compiled code and the meta written again.
#[tokio::test(flavor = "multi_thread")]
async fn untrusted_metas_are_not_used() {
    let ws = TestWorkspace::new(&["time_now", "spin"], POLICY);
    let first = ws.host().await;
    let hash = |t: &str| first.registry.get(t).unwrap().hash.clone();
    let (time_now, spin) = (hash("time_now"), hash("spin"));
    drop(first);
    let meta_of = |h: &str| {
        std::fs::read_dir(cache_dir(&ws))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| {
                let n = p.file_name().unwrap().to_string_lossy().into_owned();
                n.starts_with(h) && n.ends_with(".meta.json")
            })
            .unwrap()
    };
    let (time_now_meta, spin_meta) = (meta_of(&time_now), meta_of(&spin));
    let good = std::fs::read(&time_now_meta).unwrap();
    type Spoil<'a> = Box<dyn Fn() + 'a>;
    let attempts: Vec<(&str, Spoil)> = vec![
        (
            "writable by others",
            Box::new(|| {
                std::fs::set_permissions(&time_now_meta, std::fs::Permissions::from_mode(0o666))
                    .unwrap()
            }),
        ),
        (
            "spin's meta under time_now's name",
            Box::new(|| {
                std::fs::remove_file(&time_now_meta).unwrap();
                std::fs::copy(&spin_meta, &time_now_meta).unwrap();
            }),
        ),
        (
            "a link",
            Box::new(|| {
                std::fs::remove_file(&time_now_meta).unwrap();
                std::os::unix::fs::symlink(&spin_meta, &time_now_meta).unwrap();
            }),
        ),
        (
            "not JSON",
            Box::new(|| {
                std::fs::remove_file(&time_now_meta).unwrap();
                std::fs::write(&time_now_meta, b"{\"format\":").unwrap();
            }),
        ),
    ];
    for (what, spoil) in attempts {
        spoil();
        let host = ws.host().await;
        let got = outcomes(&host);
        assert_eq!(got["time_now"], CacheOutcome::Hit, "{what}");
        assert_eq!(got["spin"], CacheOutcome::Deferred, "{what}");
        time_now_works(&host).await;
        drop(host);
        assert_eq!(
            std::fs::read(&time_now_meta).unwrap(),
            good,
            "{what}: rewritten"
        );
        let mode = std::fs::symlink_metadata(&time_now_meta)
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{what}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn untrusted_cache_entries_are_recompiled_never_loaded() {
    let ws = TestWorkspace::new(&["time_now", "spin"], POLICY);
    let first = ws.host().await;
    let time_now = cache_file(&ws, &first, "time_now");
    let spin = cache_file(&ws, &first, "spin");
    let good = std::fs::read(&time_now).unwrap();
    drop(first);
    // Every start below loads the components (not the kept metas).
    forget_metas(&ws);

    let expect_rejected = |host: &Host, needle: &str| match &outcomes(host)["time_now"] {
        CacheOutcome::Rejected { reason } => assert!(reason.contains(needle), "{reason}"),
        other => panic!("expected a rejected entry ({needle}), got {other:?}"),
    };

    // A flipped byte in the native code.
    let mut bad = good.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 0x40;
    std::fs::write(&time_now, &bad).unwrap();
    let host = ws.host().await;
    expect_rejected(&host, "checksum");
    assert_eq!(outcomes(&host)["spin"], CacheOutcome::Hit);
    time_now_works(&host).await;
    drop(host);
    // It was rewritten: the next start hits.
    assert_eq!(std::fs::read(&time_now).unwrap(), good);
    forget_metas(&ws);
    all(&*ws.host().await, &CacheOutcome::Hit);
    forget_metas(&ws);

    // Another component's (valid) entry under time_now's name: spin's code
    // must never run as time_now.
    std::fs::copy(&spin, &time_now).unwrap();
    let host = ws.host().await;
    expect_rejected(&host, "other component bytes");
    time_now_works(&host).await;
    drop(host);
    forget_metas(&ws);

    // A raw Wasmtime .cwasm planted by someone (what `wasmtime compile`
    // produces): no header, refused.
    let engine = wasmtime::Engine::default();
    let planted = engine
        .precompile_component(&std::fs::read(capsaga_tests::component("time_now")).unwrap())
        .unwrap();
    std::fs::write(&time_now, planted).unwrap();
    let host = ws.host().await;
    expect_rejected(&host, "not a capsaga");
    drop(host);

    // A cache directory that others can write to is not used at all.
    std::fs::set_permissions(cache_dir(&ws), std::fs::Permissions::from_mode(0o777)).unwrap();
    let host = ws.host().await;
    assert!(host.sandbox.compiled_cache().is_none());
    all(&host, &CacheOutcome::Disabled);
    time_now_works(&host).await;
}

/// Processes started together on a cold cache read each meta once and
/// compile what they call once: one holds the entry's lock, the others wait
/// and load what it stored (each `capsaga` says on stderr when it reads a
/// meta or compiles). `spin`, never called, is never compiled.
#[test]
fn processes_started_together_compile_each_component_once() {
    let ws = TestWorkspace::new(&["time_now", "spin"], BASELINE);
    let n = 6;
    let children: Vec<_> = (0..n)
        .map(|_| {
            ws.capsaga(&["--json", "call", "time_now", "{}"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut compiled = BTreeMap::<String, usize>::new();
    let mut read = BTreeMap::<String, usize>::new();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{out:?}");
        for line in String::from_utf8_lossy(&out.stderr).lines() {
            for (prefix, seen) in [
                ("capsaga: compiling component ", &mut compiled),
                ("capsaga: reading the meta of component ", &mut read),
            ] {
                if let Some(rest) = line.strip_prefix(prefix) {
                    let hash = rest.split_whitespace().next().unwrap_or("").to_string();
                    *seen.entry(hash).or_default() += 1;
                }
            }
        }
    }
    assert_eq!(read.len(), 2, "each meta read by someone: {read:?}");
    assert!(
        read.values().all(|&k| k == 1),
        "a meta read more than once: {read:?}"
    );
    let time_now = capsaga_core::idempotency::sha256_hex(
        &std::fs::read(capsaga_tests::component("time_now")).unwrap(),
    );
    assert_eq!(
        compiled.into_iter().collect::<Vec<_>>(),
        [(time_now[..12].to_string(), 1)],
        "time_now compiled once, spin never"
    );
}
