//! The live sessions and `subscriptions/listen` streams told when the
//! tool list changes (`notifications/tools/list_changed`); the catalog's
//! watcher (`crate::catalog`) decides when.

use rmcp::RoleServer;
use rmcp::service::{Peer, SubscriptionSink};
use std::sync::Mutex;

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
