//! The structural per-call caps (core instances, memories, tables, table
//! elements, initial memory, the sum of all memories) against hostile
//! components written in the component text format, instantiated through
//! the sandbox's own store setup, with the pooling allocator and without.
//! A component over a cap never runs: with the pooling allocator Wasmtime may
//! already refuse to compile it (the tool is then not loaded), otherwise
//! instantiation fails with `quota-exceeded`.

use super::*;

fn repeat(item: &str, n: usize) -> String {
    (0..n).map(|_| item).collect::<Vec<_>>().join(" ")
}

/// Core instances of one trivial module.
fn instances(n: usize) -> String {
    format!(
        "(component (core module $m) {})",
        repeat("(core instance (instantiate $m))", n)
    )
}

/// One core module with `n` memories of one page each.
fn memories(n: usize) -> String {
    format!(
        "(component (core module $m {}) (core instance (instantiate $m)))",
        repeat("(memory 1)", n)
    )
}

/// One core module with `n` tables of one element each.
fn tables(n: usize) -> String {
    format!(
        "(component (core module $m {}) (core instance (instantiate $m)))",
        repeat("(table 1 funcref)", n)
    )
}

/// A table of `n` elements.
fn table_elements(n: usize) -> String {
    format!("(component (core module $m (table {n} funcref)) (core instance (instantiate $m)))")
}

/// `count` core instances each with one memory of `pages` 64 KiB pages.
fn memory_pages(pages: u64, count: usize) -> String {
    format!(
        "(component (core module $m (memory {pages})) {})",
        repeat("(core instance (instantiate $m))", count)
    )
}

enum Outcome {
    Instantiated,
    /// Refused at compile time (the pooling allocator validates components
    /// against its limits): such a tool is never loaded.
    NotCompiled(String),
    Refused(ToolError),
}

async fn try_instantiate(sandbox: &Sandbox, wat: &str, limits: &Limits) -> Outcome {
    let component = match Component::new(sandbox.engine(), wat) {
        Ok(c) => c,
        Err(e) => return Outcome::NotCompiled(format!("{e:#}")),
    };
    let (mut store, _stdio) =
        match sandbox.new_store("caps", &Bindings::default(), limits, false, None) {
            Ok(s) => s,
            Err(e) => return Outcome::Refused(e),
        };
    match sandbox
        .linker
        .instantiate_async(&mut store, &component)
        .await
    {
        Ok(_) => Outcome::Instantiated,
        Err(e) => Outcome::Refused(outcome::trap_to_error(
            "caps",
            "instantiate",
            &e.context(outcome::Instantiating),
            store.data().limiter.hit.as_deref(),
            "",
            limits,
        )),
    }
}

fn sandboxes() -> Vec<(&'static str, Sandbox)> {
    let mut out = Vec::new();
    for (name, pooling) in [("pooling", true), ("on-demand", false)] {
        let sandbox = Sandbox::with_config(&SandboxConfig {
            pooling,
            ..SandboxConfig::default()
        })
        .unwrap();
        if pooling {
            assert_eq!(sandbox.allocator(), Allocator::Pooling, "pool not reserved");
        }
        out.push((name, sandbox));
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn components_over_the_structural_caps_never_run() {
    let limits = Limits::DEFAULT;
    let caps = InstanceCaps::for_memory(limits.memory_bytes);
    let cap_pages = limits.memory_bytes / 65536;
    let within: Vec<(&str, String)> = vec![
        ("instances", instances(caps.instances)),
        ("memories", memories(caps.memories)),
        ("tables", tables(caps.tables)),
        ("table elements", table_elements(caps.table_elements)),
        ("memory pages", memory_pages(cap_pages, 1)),
        ("memory sum", memory_pages(cap_pages / 2, 2)),
    ];
    let over: Vec<(&str, String)> = vec![
        ("instances", instances(caps.instances + 1)),
        ("memories", memories(caps.memories + 1)),
        ("tables", tables(caps.tables + 1)),
        ("table elements", table_elements(caps.table_elements + 1)),
        ("memory pages", memory_pages(cap_pages + 1, 1)),
        // Each memory fits; together they do not.
        ("memory sum", memory_pages(cap_pages / 2 + 1, 2)),
    ];
    for (allocator, sandbox) in sandboxes() {
        for (what, wat) in &within {
            match try_instantiate(&sandbox, wat, &limits).await {
                Outcome::Instantiated => {}
                Outcome::NotCompiled(e) => panic!("{allocator}: {what} at the cap: {e}"),
                Outcome::Refused(e) => panic!("{allocator}: {what} at the cap: {e:?}"),
            }
        }
        for (what, wat) in &over {
            match try_instantiate(&sandbox, wat, &limits).await {
                Outcome::Instantiated => panic!("{allocator}: {what} over the cap instantiated"),
                Outcome::NotCompiled(e) => {
                    assert_eq!(allocator, "pooling", "{what}: {e}");
                }
                Outcome::Refused(e) => {
                    assert_eq!(
                        e.kind,
                        ErrorKind::QuotaExceeded,
                        "{allocator}: {what}: {e:?}"
                    )
                }
            }
        }
    }
}

#[test]
fn the_pool_falls_back_to_on_demand_when_it_cannot_be_reserved() {
    // Far more address space than a 64-bit process has: 4 GiB slots for
    // 100 000 calls x 8 memories.
    let sandbox = Sandbox::with_config(&SandboxConfig {
        max_concurrent_calls: 100_000,
        ..SandboxConfig::default()
    })
    .unwrap();
    assert_eq!(sandbox.allocator(), Allocator::OnDemand);
}
