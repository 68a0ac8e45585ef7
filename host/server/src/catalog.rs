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
use rmcp::RoleServer;
use rmcp::service::{Peer, SubscriptionSink};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// Most sessions told at once; beyond it the oldest closed ones are
/// dropped first, then new sessions are not registered (they still see the
/// new list on their next `tools/list`).
pub const MAX_LISTENERS: usize = 10_000;

/// The live sessions' peers, and the open listen streams, to notify.
#[derive(Debug, Default)]
pub struct Listeners {
    peers: Mutex<Vec<Peer<RoleServer>>>,
    sinks: Mutex<Vec<SubscriptionSink>>,
}

impl Listeners {
    /// Register the peer of a session that finished its handshake.
    pub fn add(&self, peer: Peer<RoleServer>) {
        if let Ok(mut p) = self.peers.lock() {
            p.retain(|x| !x.is_transport_closed());
            if p.len() < MAX_LISTENERS {
                p.push(peer);
            }
        }
    }

    /// Register an open `subscriptions/listen` stream (MCP 2026-07-28)
    /// that accepted `toolsListChanged`; it is forgotten once a send finds
    /// it closed. At [`MAX_LISTENERS`] streams a new one is not registered.
    pub fn add_sink(&self, sink: SubscriptionSink) {
        if let Ok(mut s) = self.sinks.lock()
            && s.len() < MAX_LISTENERS
        {
            s.push(sink);
        }
    }

    /// Sessions registered and not closed.
    pub fn live(&self) -> usize {
        self.peers
            .lock()
            .map(|p| p.iter().filter(|x| !x.is_transport_closed()).count())
            .unwrap_or(0)
    }

    /// Send `notifications/tools/list_changed` to every live session;
    /// closed ones are forgotten. Returns how many were told.
    pub async fn tools_changed(&self) -> usize {
        let peers: Vec<Peer<RoleServer>> = match self.peers.lock() {
            Ok(mut p) => {
                p.retain(|x| !x.is_transport_closed());
                p.clone()
            }
            Err(_) => return 0,
        };
        let mut told = 0;
        for p in peers {
            match p.notify_tool_list_changed().await {
                Ok(()) => told += 1,
                Err(e) => tracing::debug!("tools/list_changed not delivered: {e}"),
            }
        }
        let sinks: Vec<SubscriptionSink> = self.sinks.lock().map(|s| s.clone()).unwrap_or_default();
        let mut closed = Vec::new();
        for s in sinks {
            let n = rmcp::model::ServerNotification::ToolListChangedNotification(
                rmcp::model::ToolListChangedNotification::default(),
            );
            match s.send(n).await {
                Ok(()) => told += 1,
                Err(e) => {
                    tracing::debug!("tools/list_changed not delivered to a listen stream: {e}");
                    closed.push(s.id().clone());
                }
            }
        }
        if !closed.is_empty()
            && let Ok(mut s) = self.sinks.lock()
        {
            s.retain(|x| !closed.contains(x.id()));
        }
        told
    }
}

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
