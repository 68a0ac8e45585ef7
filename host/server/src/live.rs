//! The host a running server serves, reloaded while it runs.
//!
//! A server (`capsaga serve`, `capsaga mcp`) reads its policy once, at
//! start; the operator then changes it, or drops a new or rebuilt
//! component into the tools directory. [`Live`] holds the current
//! generation of the [`Host`] and replaces it by [`Host::reload`] when
//!
//! - the process gets SIGHUP ([`on_hangup`]), or
//! - the watcher ([`super::catalog::watch`]) finds the sources changed:
//!   the policy file or its `fsm.toml` (by content), or the `*.wasm` files
//!   of the tools directory (by name, size and modification time).
//!
//! Every call takes the generation current when it starts and finishes on
//! it; later calls see the new one. A reload that fails (a policy that does
//! not parse, a grant the tool does not declare, a moved state directory)
//! changes nothing: the server keeps serving the generation it had, and
//! says why in the log. The sagas keep their log and owner across
//! generations (one store, one owner lock), and a step compensates with the
//! component it ran with (pinned by content hash), whatever the tools
//! directory holds now.

use capsaga_core::idempotency::sha256_hex;
use capsaga_door::dispatch::Dispatcher;
use capsaga_door::host::{Host, HostError};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;
use tokio::sync::Notify;

/// What a reload is decided on: the policy file's and `fsm.toml`'s
/// SHA-256 (`None`: absent or unreadable) and each `*.wasm` of the tools
/// directory with its size (bytes) and modification time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sources {
    policy: Option<String>,
    fsm: Option<String>,
    tools: Result<Vec<(String, u64, Option<SystemTime>)>, String>,
}

fn file_hash(path: &Path) -> Option<String> {
    std::fs::read(path).ok().map(|b| sha256_hex(&b))
}

impl Sources {
    /// Read them for `host`'s configuration. Never fails: what cannot be
    /// read is recorded as such, so a directory that becomes unreadable is
    /// a change too.
    pub fn of(host: &Host) -> Sources {
        let config = &host.config;
        let fsm = config
            .path
            .parent()
            .map(|d| d.join(capsaga_door::config::FSM_FILE));
        let tools = std::fs::read_dir(&config.tools_dir)
            .map_err(|e| e.to_string())
            .map(|dir| {
                let mut v: Vec<(String, u64, Option<SystemTime>)> = dir
                    .filter_map(Result::ok)
                    .filter(|e| e.path().extension().is_some_and(|x| x == "wasm"))
                    .filter_map(|e| {
                        let m = e.metadata().ok()?;
                        Some((
                            e.file_name().to_string_lossy().into_owned(),
                            m.len(),
                            m.modified().ok(),
                        ))
                    })
                    .collect();
                v.sort();
                v
            });
        Sources {
            policy: file_hash(&config.path),
            fsm: fsm.as_deref().and_then(file_hash),
            tools,
        }
    }
}

/// What [`Live::reload_if_needed`] did.
#[derive(Debug)]
pub enum Reload {
    /// Nothing changed and none was asked for.
    Unchanged,
    /// A new generation serves from now on.
    Reloaded,
    /// The reload failed; the previous generation still serves.
    Refused(HostError),
}

/// The current generation of the host, and what it was loaded from.
#[derive(Debug)]
pub struct Live {
    current: RwLock<Arc<Host>>,
    /// The sources of the last reload attempted (successful or not), so a
    /// refused policy is not tried again until it changes.
    seen: Mutex<Sources>,
    asked: Notify,
    asked_flag: std::sync::atomic::AtomicBool,
    stats: Counters,
}

/// How often the sources were checked and what came of it, since the
/// server started (reported by `GET /healthz` as `reload`).
#[derive(Debug, Default)]
struct Counters {
    checks: AtomicU64,
    reloaded: AtomicU64,
    refused: AtomicU64,
}

/// A snapshot of the reload counters: what an operator (or a test) reads to
/// know that a change was seen, applied or refused, without waiting a fixed
/// time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReloadStats {
    /// Checks of the sources finished (watcher rounds and SIGHUPs).
    pub checks: u64,
    /// Reloads that put a new generation in service (the generation now
    /// serving is this number; 0 is the one the server started with).
    pub generation: u64,
    /// Reloads refused (the previous generation kept serving).
    pub refused: u64,
}

impl Live {
    /// Serve `host`.
    pub fn new(host: Arc<Host>) -> Live {
        let seen = Sources::of(&host);
        Live {
            current: RwLock::new(host),
            seen: Mutex::new(seen),
            asked: Notify::new(),
            asked_flag: std::sync::atomic::AtomicBool::new(false),
            stats: Counters::default(),
        }
    }

    /// The reload counters so far.
    pub fn stats(&self) -> ReloadStats {
        ReloadStats {
            checks: self.stats.checks.load(Ordering::SeqCst),
            generation: self.stats.reloaded.load(Ordering::SeqCst),
            refused: self.stats.refused.load(Ordering::SeqCst),
        }
    }

    /// The current generation.
    pub fn host(&self) -> Arc<Host> {
        match self.current.read() {
            Ok(h) => h.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// The door of the current generation.
    pub fn door(&self) -> Dispatcher {
        Dispatcher::new(self.host())
    }

    /// Ask for a reload even if the sources look unchanged (SIGHUP: a
    /// secret file or a certificate the policy names may have changed).
    pub fn ask(&self) {
        self.asked_flag.store(true, Ordering::SeqCst);
        self.asked.notify_one();
    }

    /// Resolves when [`Live::ask`] was called (at once if it was called
    /// since the last wait).
    pub async fn asked(&self) {
        self.asked.notified().await;
    }

    /// Reload when asked or when the sources changed since the last
    /// attempt; log what happened, and count it ([`Live::stats`]).
    pub async fn reload_if_needed(&self) -> Reload {
        let r = self.check().await;
        match r {
            Reload::Unchanged => {}
            Reload::Reloaded => {
                self.stats.reloaded.fetch_add(1, Ordering::SeqCst);
            }
            Reload::Refused(_) => {
                self.stats.refused.fetch_add(1, Ordering::SeqCst);
            }
        }
        self.stats.checks.fetch_add(1, Ordering::SeqCst);
        r
    }

    async fn check(&self) -> Reload {
        let asked = self.asked_flag.swap(false, Ordering::SeqCst);
        let host = self.host();
        let now = Sources::of(&host);
        let changed = match self.seen.lock() {
            Ok(mut seen) => {
                let c = *seen != now;
                *seen = now;
                c
            }
            Err(_) => false,
        };
        if !asked && !changed {
            return Reload::Unchanged;
        }
        match host.reload().await {
            Ok(next) => {
                for issue in next.registry.open_issues() {
                    if issue.unlisted {
                        tracing::info!("reload: {}: {}", issue.source, issue.error);
                    } else {
                        tracing::warn!("reload: {}: {}", issue.source, issue.error);
                    }
                }
                if let Ok(mut c) = self.current.write() {
                    *c = next;
                }
                tracing::info!(
                    "reloaded {} ({})",
                    host.config.path.display(),
                    if asked { "asked" } else { "changed" }
                );
                Reload::Reloaded
            }
            Err(e) => {
                tracing::error!(
                    "reload of {} refused, still serving the previous policy and tools: {e}",
                    host.config.path.display()
                );
                Reload::Refused(e)
            }
        }
    }
}

/// Ask `live` for a reload on every SIGHUP, until it is dropped (Unix; a
/// no-op elsewhere).
pub async fn on_hangup(live: std::sync::Weak<Live>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut hup) = signal(SignalKind::hangup()) else {
            tracing::warn!("SIGHUP cannot be handled: reload by editing the policy file");
            return;
        };
        while hup.recv().await.is_some() {
            let Some(l) = live.upgrade() else {
                return;
            };
            tracing::info!("SIGHUP: reloading");
            l.ask();
        }
    }
    #[cfg(not(unix))]
    {
        let _ = live;
    }
}
