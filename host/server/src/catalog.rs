//! `notifications/tools/list_changed`: a long-running server's tool set
//! changes when the operator activates or retires a neuron (`capsaga
//! neurons approve|retire`, from another process, into the same state
//! database), when a pure neuron activates itself
//! (`[neurons] auto_activate_pure`), and when the host is reloaded
//! ([`super::live`]: SIGHUP, or the policy, `fsm.toml` or a component in
//! the tools directory changed). A watcher task per server, every
//! [`super::McpOptions::catalog_poll`] and at once on SIGHUP, reloads the
//! host when needed, brings the catalog in line with the stored active
//! neurons and, when what `tools/list` would answer changed (a name, or a
//! version's identity hash: a rebuilt component is a new version), tells
//! every live session, and every open `subscriptions/listen` stream of
//! MCP 2026-07-28 that asked for `toolsListChanged` (the revision's
//! replacement of the session's notification channel).

use super::mcp::McpShared;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// What `tools/list` answers, reduced to names and identity hashes.
pub fn fingerprint(shared: &McpShared) -> Vec<(String, String)> {
    shared
        .door()
        .catalog(shared.autonomy())
        .iter()
        .map(|t| (t.meta.name.clone(), t.hash.clone()))
        .collect()
}

/// One round: reload the host when asked or when its sources changed,
/// sync the neurons from the store, and tell the sessions when the catalog
/// differs from `last` (which is updated). Returns how many sessions were
/// told.
pub async fn round(shared: &McpShared, last: &mut Vec<(String, String)>) -> usize {
    shared.live.reload_if_needed().await;
    let host = shared.live.host();
    if let Some(n) = &host.neurons
        && host.config.policy.neurons.enabled
        && let Err(e) = capsaga_door::neurons::sync_active(
            &host.config.policy,
            &host.sandbox,
            &host.registry,
            host.store.as_ref(),
            n,
        )
        .await
    {
        tracing::warn!("neuron catalog not refreshed: {e}");
    }
    let now = fingerprint(shared);
    if now == *last {
        return 0;
    }
    *last = now;
    let told = shared.listeners.tools_changed().await;
    tracing::info!("tool list changed: {told} session(s) told");
    told
}

/// Run a round every `every` (`None`: only when a reload is asked for,
/// SIGHUP) until the server (its [`McpShared`]) is gone.
pub async fn watch(shared: Weak<McpShared>, every: Option<Duration>) {
    let (mut last, live) = match shared.upgrade() {
        Some(s) => (fingerprint(&s), Arc::downgrade(&s.live)),
        None => return,
    };
    let mut tick = tokio::time::interval(every.unwrap_or(Duration::from_secs(3600)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        let Some(l) = live.upgrade() else {
            return;
        };
        tokio::select! {
            _ = tick.tick(), if every.is_some() => {}
            () = l.asked() => {}
        }
        drop(l);
        let Some(s) = shared.upgrade() else {
            return;
        };
        round(&s, &mut last).await;
    }
}
