//! The cache's own checks with a tiny component.
use super::*;
use std::os::unix::fs::PermissionsExt;

/// A tiny component (the cache does not care what it holds).
const WAT: &str = r#"(component (core module (func (export "f"))))"#;

fn setup() -> (tempfile::TempDir, Engine, Vec<u8>, String) {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = wasmtime::Config::new();
    config.consume_fuel(true);
    let engine = Engine::new(&config).unwrap();
    // Component::new accepts the text format; the cache keys on bytes.
    let bytes = WAT.as_bytes().to_vec();
    let hash = sha256_hex(&bytes);
    (tmp, engine, bytes, hash)
}

#[test]
fn round_trip_then_hit() {
    let (tmp, engine, bytes, hash) = setup();
    let dir = tmp.path().join("compiled");
    let cache = CompiledCache::open(&dir, &engine).unwrap();
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
    assert!(cache.load(&engine, &hash).unwrap().is_none());
    let c = Component::new(&engine, &bytes).unwrap();
    cache.store(&hash, &c);
    let file = dir.join(cache.file_name(&hash));
    let fmode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(fmode, 0o600);
    assert!(cache.load(&engine, &hash).unwrap().is_some());
    // No temporary file left behind.
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
}

#[test]
fn corrupt_truncated_foreign_and_misnamed_files_are_refused() {
    let (tmp, engine, bytes, hash) = setup();
    let dir = tmp.path().join("compiled");
    let cache = CompiledCache::open(&dir, &engine).unwrap();
    let c = Component::new(&engine, &bytes).unwrap();
    cache.store(&hash, &c);
    let file = dir.join(cache.file_name(&hash));
    let good = std::fs::read(&file).unwrap();

    // One flipped bit in the native code, at its start, middle and end.
    let payload_len = good.len() - entry::TRAILER_LEN;
    for at in [0, payload_len / 2, payload_len - 1] {
        let mut bad = good.clone();
        bad[at] ^= 1;
        std::fs::write(&file, &bad).unwrap();
        let err = cache.load(&engine, &hash).unwrap_err();
        assert!(err.contains("checksum"), "byte {at}: {err}");
    }

    // Bytes appended after the trailer, or a length that lies.
    let mut padded = good.clone();
    padded.extend_from_slice(&[0u8; 7]);
    std::fs::write(&file, &padded).unwrap();
    assert!(
        cache
            .load(&engine, &hash)
            .unwrap_err()
            .contains("not a capsaga")
    );
    let mut lying = good.clone();
    let n = lying.len();
    lying[n - 8] ^= 1;
    std::fs::write(&file, &lying).unwrap();
    assert!(
        cache
            .load(&engine, &hash)
            .unwrap_err()
            .contains("truncated")
    );

    // An entry of the previous format (a header before the payload).
    let mut old = b"CAPSAGA-CWASM-01".to_vec();
    old.extend_from_slice(&good[payload_len + 16..]);
    old.extend_from_slice(&good[..payload_len]);
    std::fs::write(&file, &old).unwrap();
    let err = cache.load(&engine, &hash).unwrap_err();
    assert!(err.contains("older capsaga"), "{err}");

    // Shorter than a trailer.
    std::fs::write(&file, b"CAPSAGA").unwrap();
    assert!(
        cache
            .load(&engine, &hash)
            .unwrap_err()
            .contains("not a capsaga")
    );

    // Truncated: the trailer is gone.
    std::fs::write(&file, &good[..good.len() - 10]).unwrap();
    assert!(
        cache
            .load(&engine, &hash)
            .unwrap_err()
            .contains("not a capsaga")
    );
    // Truncated inside the payload, the trailer kept.
    let mut cut = good[..payload_len / 2].to_vec();
    cut.extend_from_slice(&good[payload_len..]);
    std::fs::write(&file, &cut).unwrap();
    assert!(
        cache
            .load(&engine, &hash)
            .unwrap_err()
            .contains("truncated")
    );
    // Restored, it loads again.
    std::fs::write(&file, &good).unwrap();
    assert!(cache.load(&engine, &hash).unwrap().is_some());

    // A raw Wasmtime .cwasm (what an attacker would plant), no header.
    std::fs::write(&file, c.serialize().unwrap()).unwrap();
    assert!(
        cache
            .load(&engine, &hash)
            .unwrap_err()
            .contains("not a capsaga")
    );

    // A valid entry of another component renamed to this one's name.
    let other = sha256_hex(b"other");
    std::fs::write(&file, &good).unwrap();
    std::fs::rename(&file, dir.join(cache.file_name(&other))).unwrap();
    let err = cache.load(&engine, &other).unwrap_err();
    assert!(err.contains("other component"), "{err}");
}

#[test]
fn stale_engine_is_refused_by_key() {
    let (tmp, engine, bytes, hash) = setup();
    let dir = tmp.path().join("compiled");
    let cache = CompiledCache::open(&dir, &engine).unwrap();
    cache.store(&hash, &Component::new(&engine, &bytes).unwrap());
    // Same directory, an engine with other settings: a different key, so
    // a different file name; the old entry is never even opened...
    let other = Engine::new(&wasmtime::Config::new()).unwrap();
    let cache2 = CompiledCache::open(&dir, &other).unwrap();
    assert_ne!(cache.file_name(&hash), cache2.file_name(&hash));
    assert!(cache2.load(&other, &hash).unwrap().is_none());
    // ...and copied under the new name its header still says no.
    std::fs::copy(
        dir.join(cache.file_name(&hash)),
        dir.join(cache2.file_name(&hash)),
    )
    .unwrap();
    let err = cache2.load(&other, &hash).unwrap_err();
    assert!(err.contains("another engine"), "{err}");
}

#[test]
fn links_and_loose_permissions_are_refused() {
    let (tmp, engine, bytes, hash) = setup();
    let dir = tmp.path().join("compiled");
    let cache = CompiledCache::open(&dir, &engine).unwrap();
    let c = Component::new(&engine, &bytes).unwrap();
    cache.store(&hash, &c);
    let file = dir.join(cache.file_name(&hash));

    // Group-writable file.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o620)).unwrap();
    assert!(cache.load(&engine, &hash).unwrap_err().contains("writable"));
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();

    // A second hard link.
    std::fs::hard_link(&file, tmp.path().join("elsewhere")).unwrap();
    assert!(
        cache
            .load(&engine, &hash)
            .unwrap_err()
            .contains("hard links")
    );
    std::fs::remove_file(tmp.path().join("elsewhere")).unwrap();

    // A symbolic link in place of the file, to a valid entry elsewhere.
    std::fs::rename(&file, tmp.path().join("planted.cwasm")).unwrap();
    std::os::unix::fs::symlink(tmp.path().join("planted.cwasm"), &file).unwrap();
    assert!(
        cache
            .load(&engine, &hash)
            .unwrap_err()
            .contains("symbolic link")
    );
    // Storing replaces the link itself, not its target.
    cache.store(&hash, &c);
    assert!(!std::fs::symlink_metadata(&file).unwrap().is_symlink());
    assert!(cache.load(&engine, &hash).unwrap().is_some());

    // A world-writable directory is not used at all.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    assert!(matches!(
        CompiledCache::open(&dir, &engine),
        Err(CacheError::Untrusted { .. })
    ));
    // Nor a symbolic link to a directory.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&dir, &link).unwrap();
    assert!(matches!(
        CompiledCache::open(&link, &engine),
        Err(CacheError::Untrusted { .. })
    ));
}

#[test]
fn one_compiler_at_a_time_and_the_waiter_loads_its_result() {
    let (tmp, engine, bytes, hash) = setup();
    let dir = tmp.path().join("compiled");
    // Two handles on one directory: two processes' worth of descriptors (a
    // flock is per open file description, so they exclude each other).
    let a = CompiledCache::open(&dir, &engine).unwrap();
    let b = CompiledCache::open(&dir, &engine).unwrap();
    let (compiling_tx, compiling_rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|s| {
        let (a, engine, hash, bytes) = (&a, &engine, &hash, &bytes);
        let first = s.spawn(move || {
            a.load_or_compile(engine, hash, move || {
                compiling_tx.send(()).unwrap();
                go_rx.recv().unwrap();
                Ok::<_, String>(Component::new(engine, bytes).unwrap())
            })
        });
        compiling_rx.recv().unwrap();
        // While `a` compiles, the lock is taken.
        assert!(b.lock_compile(hash, std::time::Duration::ZERO).is_none());
        let b = &b;
        let second = s.spawn(move || {
            b.load_or_compile(engine, hash, || -> Result<Component, String> {
                panic!("compiled a second time")
            })
        });
        go_tx.send(()).unwrap();
        let (_, first) = first.join().unwrap().unwrap();
        let (_, second) = second.join().unwrap().unwrap();
        assert_eq!(first, CacheOutcome::Miss);
        assert_eq!(second, CacheOutcome::Hit);
    });
    // Released: the next one takes it at once.
    assert!(b.lock_compile(&hash, std::time::Duration::ZERO).is_some());
}

#[test]
fn a_waiter_whose_wait_runs_out_compiles_without_the_lock() {
    // Another process holds the compile lock and never finishes (hung or
    // stopped): past its wait, this one compiles, stores and goes on.
    let (tmp, engine, bytes, hash) = setup();
    let dir = tmp.path().join("compiled");
    let a = CompiledCache::open(&dir, &engine).unwrap();
    let b = CompiledCache::open(&dir, &engine).unwrap();
    let held = a
        .lock_compile(&hash, std::time::Duration::ZERO)
        .expect("the lock is free");
    let (_, outcome) = b
        .load_or_compile_waiting(&engine, &hash, std::time::Duration::from_millis(50), || {
            Component::new(&engine, &bytes).map_err(|e| e.to_string())
        })
        .unwrap();
    assert_eq!(outcome, CacheOutcome::Miss, "compiled by the waiter itself");
    // Still held by `a`: the waiter did not take or break it.
    assert!(b.lock_compile(&hash, std::time::Duration::ZERO).is_none());
    drop(held);
    // What it stored is the entry the next process loads.
    let (_, outcome) = a
        .load_or_compile(&engine, &hash, || -> Result<Component, String> {
            panic!("compiled again")
        })
        .unwrap();
    assert_eq!(outcome, CacheOutcome::Hit);
}

#[test]
fn a_lock_file_that_is_a_link_is_not_followed() {
    let (tmp, engine, _bytes, hash) = setup();
    let dir = tmp.path().join("compiled");
    let cache = CompiledCache::open(&dir, &engine).unwrap();
    let victim = tmp.path().join("victim");
    std::fs::write(&victim, "keep").unwrap();
    let lock = dir.join(format!(".{}.lock", cache.file_name(&hash)));
    std::os::unix::fs::symlink(&victim, &lock).unwrap();
    assert!(
        cache
            .lock_compile(&hash, std::time::Duration::ZERO)
            .is_none()
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
}

/// On a file system mounted `noexec` Wasmtime cannot map an entry
/// executable: the cache loads a checked copy instead of recompiling at
/// every start. Needs a tmpfs mount (root); says so and returns otherwise.
#[test]
#[cfg(target_os = "linux")]
fn an_entry_on_a_noexec_file_system_loads_from_a_checked_copy() {
    use std::process::Command;
    let (tmp, engine, bytes, hash) = setup();
    let mnt = tmp.path().join("noexec");
    std::fs::create_dir(&mnt).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "noexec,size=16m", "tmpfs"])
        .arg(&mnt)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("skipped: cannot mount a noexec tmpfs here (needs root)");
        return;
    }
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(mnt.clone());
    let dir = mnt.join("compiled");
    let cache = CompiledCache::open(&dir, &engine).unwrap();
    let c = Component::new(&engine, &bytes).unwrap();
    cache.store(&hash, &c);
    let file = dir.join(cache.file_name(&hash));
    // Mapped, it is refused here...
    // SAFETY: an entry this test just wrote.
    assert!(unsafe { Component::deserialize_file(&engine, &file) }.is_err());
    // ...the cache loads it from memory...
    assert!(cache.load(&engine, &hash).unwrap().is_some());
    // ...and the copy is checked: a flipped bit is still refused.
    let mut bad = std::fs::read(&file).unwrap();
    let mid = (bad.len() - entry::TRAILER_LEN) / 2;
    bad[mid] ^= 1;
    std::fs::write(&file, &bad).unwrap();
    let err = cache.load(&engine, &hash).unwrap_err();
    assert!(err.contains("checksum"), "{err}");
}

/// A hint is a guess only: absent, garbage or a link gives none, and an
/// entry checked early loads like any other.
#[test]
fn hints_and_checked_entries() {
    let (tmp, engine, bytes, hash) = setup();
    let dir = tmp.path().join("compiled");
    let cache = CompiledCache::open(&dir, &engine).unwrap();
    assert_eq!(cache.hint("runner"), None);
    cache.set_hint("runner", &hash);
    assert_eq!(cache.hint("runner").as_deref(), Some(hash.as_str()));
    std::fs::write(dir.join("runner.hint"), "not a hash").unwrap();
    assert_eq!(cache.hint("runner"), None);
    std::fs::remove_file(dir.join("runner.hint")).unwrap();
    std::fs::write(tmp.path().join("elsewhere"), &hash).unwrap();
    std::os::unix::fs::symlink(tmp.path().join("elsewhere"), dir.join("runner.hint")).unwrap();
    assert_eq!(cache.hint("runner"), None);

    assert!(cache.check_entry(&hash).unwrap().is_none());
    cache.store(&hash, &Component::new(&engine, &bytes).unwrap());
    let checked = cache.check_entry(&hash).unwrap().unwrap();
    assert!(cache.load_checked(&engine, checked).is_ok());
    // The entry of another hash is refused by its trailer, hint or not.
    let other = sha256_hex(b"other");
    std::fs::copy(
        dir.join(cache.file_name(&hash)),
        dir.join(cache.file_name(&other)),
    )
    .unwrap();
    let err = cache.check_entry(&other).unwrap_err();
    assert!(err.contains("other component"), "{err}");
}
