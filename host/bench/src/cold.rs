//! The first call of a component: cold start (compile or cache hit, then
//! instantiate) and the peak memory of a process that makes it.

use super::*;

pub(super) async fn cold_start(bytes: &[u8]) -> Result<ColdStart, String> {
    let dir = std::env::temp_dir().join(format!("capsaga-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cached = SandboxConfig {
        compiled_cache: Some(dir.join("compiled")),
        ..SandboxConfig::default()
    };
    let result = async {
        let (mut without, mut with, mut compile, mut load) = (vec![], vec![], vec![], vec![]);
        // Fill the cache once.
        let s = Sandbox::with_config(&cached).map_err(|e| e.to_string())?;
        s.prepare_cached(bytes).map_err(|e| e.to_string())?;
        drop(s);
        for _ in 0..5 {
            let t0 = Instant::now();
            let s = Sandbox::with_config(&SandboxConfig::default()).map_err(|e| e.to_string())?;
            let t1 = Instant::now();
            s.prepare(bytes).map_err(|e| e.to_string())?;
            without.push(t0.elapsed());
            compile.push(t1.elapsed());
            drop(s);

            let t0 = Instant::now();
            let s = Sandbox::with_config(&cached).map_err(|e| e.to_string())?;
            let t1 = Instant::now();
            let (_, outcome) = s.prepare_cached(bytes).map_err(|e| e.to_string())?;
            with.push(t0.elapsed());
            load.push(t1.elapsed());
            if outcome != capsaga_sandbox::CacheOutcome::Hit {
                return Err(format!("the compiled cache was not hit: {outcome:?}"));
            }
        }
        Ok(ColdStart {
            without_cache_ms: median_ms(without),
            with_cache_ms: median_ms(with),
            compile_ms: median_ms(compile),
            cache_load_ms: median_ms(load),
        })
    }
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    result
}

pub(super) async fn peak_memory(path: &Path) -> Result<Option<PeakMemory>, String> {
    let Ok(bytes) = std::fs::read(path) else {
        return Ok(None);
    };
    let sandbox = Sandbox::with_config(&SandboxConfig::default()).map_err(|e| e.to_string())?;
    let prepared = sandbox.prepare(&bytes).map_err(|e| e.to_string())?;
    let limits = Limits::DEFAULT;
    let ctx = CallContext {
        saga_id: "bench".into(),
        step_seq: 0,
        idempotency_key: "bench".into(),
        deadline_ms: u64::MAX,
        dry_run: false,
    };
    // Reset the peak (Linux ≥ 4.0); without it the figure is the process's
    // lifetime peak and is reported as such.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let Some((before, _)) = rss() else {
        return Ok(None);
    };
    let (res, _) = sandbox
        .call(CallRequest {
            tool: "big_output",
            prepared: &prepared,
            bindings: &Bindings::default(),
            limits: &limits,
            ctx: &ctx,
            args_json: r#"{"mb":100}"#,
            op: &Op::Execute,
        })
        .await;
    let Some((_, peak)) = rss() else {
        return Ok(None);
    };
    let mb = |b: u64| b as f64 / 1e6;
    Ok(Some(PeakMemory {
        rss_before_mb: mb(before),
        peak_rss_mb: mb(peak),
        growth_mb: mb(peak.saturating_sub(before)),
        memory_cap_mb: mb(limits.memory_bytes),
        error: match res {
            Ok(_) => "none (the output was accepted)".into(),
            Err(e) => format!("{}: {}", render::kind_name(e.kind), e.message),
        },
    }))
}
