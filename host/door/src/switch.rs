//! The operator's kill switch as this process sees it (seed 003; issue 24
//! item 9; the rules are `capsaga_core::pause`).
//!
//! The mode lives in the state store (`SwitchStore`), so `capsaga pause`
//! in one shell, `POST /v1/pause` on a server, and every other process on
//! the same state (later, every host on a shared store) agree. The door
//! reads it from the store before each call ([`KillSwitch::current`]) and
//! refuses what the mode forbids. A call already running listens to a
//! watch channel ([`KillSwitch::watch`], [`stopped`]): a change made in this
//! process ([`KillSwitch::set`]) reaches it at once, one made elsewhere
//! within [`POLL`] (a background task reads the store while any call
//! listens, and not at all otherwise). The door then drops the call (the
//! tool's instance with it) and settles it as a step the host stopped: a
//! side-effecting step is compensated from its pre-image and its saga
//! rolled back, as for a deadline.

use crate::store::{Store, StoreError};
use capsaga_core::pause::{Mode, Switch, aborts};
use capsaga_core::principal::Principal;
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::watch;

/// How often a running call's process reads the switch from the store.
pub const POLL: Duration = Duration::from_millis(200);

/// The switch of one process: the store's value and a channel for the
/// calls running here.
#[derive(Debug)]
pub struct KillSwitch {
    store: Arc<dyn Store>,
    tx: watch::Sender<Mode>,
}

impl KillSwitch {
    /// The switch over `store`; inside a Tokio runtime, the task that reads
    /// the store every [`POLL`] while a call listens starts too (it ends
    /// with the switch).
    pub fn new(store: Arc<dyn Store>) -> Arc<KillSwitch> {
        let (tx, _) = watch::channel(Mode::Running);
        let sw = Arc::new(KillSwitch { store, tx });
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(poll(Arc::downgrade(&sw)));
        }
        sw
    }

    /// The switch as stored now (the running calls are told if it changed).
    ///
    /// # Errors
    /// [`StoreError`].
    pub async fn current(&self) -> Result<Switch, StoreError> {
        let sw = self.store.switch().await?;
        self.tx.send_if_modified(|m| {
            let changed = *m != sw.mode;
            *m = sw.mode;
            changed
        });
        Ok(sw)
    }

    /// Set the mode (by `by`, an operator: the caller checks), store it,
    /// and tell the calls running in this process at once.
    ///
    /// # Errors
    /// [`StoreError`].
    pub async fn set(
        &self,
        mode: Mode,
        by: &Principal,
        note: Option<&str>,
    ) -> Result<Switch, StoreError> {
        let sw = self.store.set_switch(mode, &by.to_string(), note).await?;
        self.tx.send_replace(sw.mode);
        tracing::warn!("kill switch: {} by {by}", sw.mode);
        Ok(sw)
    }

    /// A receiver for a call about to run (the poll task reads the store
    /// while at least one exists).
    pub fn watch(&self) -> watch::Receiver<Mode> {
        self.tx.subscribe()
    }
}

/// Resolves with the mode once it aborts a running call of a tool with
/// (or without) side effects; never if the switch is gone.
pub async fn stopped(rx: &mut watch::Receiver<Mode>, has_side_effects: bool) -> Mode {
    loop {
        let mode = *rx.borrow_and_update();
        if aborts(mode, has_side_effects) {
            return mode;
        }
        if rx.changed().await.is_err() {
            return std::future::pending().await;
        }
    }
}

async fn poll(sw: Weak<KillSwitch>) {
    loop {
        tokio::time::sleep(POLL).await;
        let Some(sw) = sw.upgrade() else {
            return;
        };
        if sw.tx.receiver_count() == 0 {
            continue;
        }
        if let Err(e) = sw.current().await {
            tracing::debug!("kill switch: cannot read the store: {e}");
        }
    }
}
