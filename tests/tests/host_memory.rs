//! What the host itself allocates while a guest returns 100 MB: counted by a
//! global allocator in this test binary (guest linear memory is mapped by
//! Wasmtime outside the Rust allocator, so it is not counted). The host
//! refuses the output before copying it, so its heap grows by far less than
//! the output; without the transfer cap it would grow by the output's size.
//! One test per binary: the counter is process-wide.

use capsaga_core::tool::CallContext;
use capsaga_sandbox::{CallRequest, Op};
use capsaga_tests::TestWorkspace;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator, only counting sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[tokio::test(flavor = "multi_thread")]
async fn a_100_mb_output_is_refused_before_the_host_copies_it() {
    let ws = TestWorkspace::new(&["big_output"], "[tools.big_output]\n");
    let host = ws.host().await;
    let t = host.registry.get("big_output").unwrap();
    let ctx = CallContext {
        saga_id: "memory".into(),
        step_seq: 0,
        idempotency_key: "memory".into(),
        deadline_ms: u64::MAX,
        dry_run: false,
    };
    let call = |args: &'static str| {
        let t = t.clone();
        let host = &host;
        let ctx = &ctx;
        async move {
            let base = LIVE.load(Ordering::Relaxed);
            PEAK.store(base, Ordering::Relaxed);
            let (res, _) = host
                .sandbox
                .call(CallRequest {
                    tool: "big_output",
                    prepared: t.component().unwrap(),
                    bindings: &Default::default(),
                    limits: &t.limits,
                    ctx,
                    args_json: args,
                    op: &Op::Execute,
                })
                .await;
            (res, PEAK.load(Ordering::Relaxed).saturating_sub(base))
        }
    };
    // Control: 3 MB under the 4 MiB cap is copied, so the counter sees it.
    let (res, grew_small) = call(r#"{"mb":3}"#).await;
    assert!(res.is_ok(), "{res:?}");
    assert!(
        grew_small >= 3_000_000,
        "the counter missed a 3 MB copy: {grew_small}"
    );
    // 100 MB: refused, and the host heap grew by far less than that.
    let (res, grew) = call(r#"{"mb":100}"#).await;
    let err = res.unwrap_err();
    assert_eq!(
        err.kind,
        capsaga_core::error::ErrorKind::QuotaExceeded,
        "{err:?}"
    );
    assert!(
        grew < 16 * 1024 * 1024,
        "the host allocated {grew} bytes for a refused 100 MB output"
    );
}
