//! Live sessions of a server, bounded globally and per principal, with
//! least-recently-used eviction of idle sessions (issue 24 item 5).
//!
//! An MCP session costs the server memory until it ends (measured: about
//! 70 kB each). A [`SessionTable`] admits a new session only within
//! [`SessionCaps`]:
//!
//! 1. a principal at its own cap (`max_per_principal`) makes room by
//!    evicting **its own** least recently active idle session; if all of
//!    its sessions are busy, the new one is refused ([`Full::Principal`]);
//! 2. at the global cap (`max_total`), the principal holding the most
//!    sessions gives up its least recently active idle one (the requester
//!    first when it holds as many as anyone); if it has none idle, the new
//!    session is refused ([`Full::Server`]).
//!
//! A session is **busy** while a request of it is in flight, and is never
//! evicted then. So a principal opening thousands of sessions only ever
//! evicts its own (rule 1 bounds it to `max_per_principal`, below the
//! global cap), and cannot evict another principal's session unless that
//! principal holds more sessions than it does. Activity is a logical clock
//! (one tick per admission or touch), so the order does not depend on the
//! wall clock. Every operation is `O(log n)`; nothing is ever cleared
//! wholesale.
//!
//! Pure: the server closes the evicted sessions
//! (`capsaga_server::sessions`).

use std::collections::{BTreeSet, HashMap};

/// The caps of a [`SessionTable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionCaps {
    /// Most live sessions of the server.
    pub max_total: usize,
    /// Most live sessions of one principal.
    pub max_per_principal: usize,
}

impl SessionCaps {
    /// Defaults: 1024 sessions (about 70 MiB), 256 per principal.
    pub const DEFAULT: SessionCaps = SessionCaps {
        max_total: 1024,
        max_per_principal: 256,
    };

    /// Both caps at least 1, and the per-principal cap at most the total.
    pub fn normalised(self) -> SessionCaps {
        let max_total = self.max_total.max(1);
        SessionCaps {
            max_total,
            max_per_principal: self.max_per_principal.clamp(1, max_total),
        }
    }
}

impl Default for SessionCaps {
    fn default() -> Self {
        SessionCaps::DEFAULT
    }
}

/// Why a session was not admitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Full {
    /// The principal has `max_per_principal` sessions, all busy.
    #[error(
        "too many MCP sessions for {principal}: {live} live, all busy (at most {cap} per principal); close one (DELETE /mcp) or wait"
    )]
    Principal {
        /// The principal.
        principal: String,
        /// Its live sessions.
        live: usize,
        /// The cap.
        cap: usize,
    },
    /// The server has `max_total` sessions and none can be evicted.
    #[error(
        "the server has too many MCP sessions ({live}, at most {cap}) and none is idle: try again later"
    )]
    Server {
        /// Live sessions.
        live: usize,
        /// The cap.
        cap: usize,
    },
}

#[derive(Debug, Clone)]
struct Entry {
    principal: String,
    last: u64,
    busy: u32,
}

/// Live sessions: who holds each, when it was last active, whether busy.
#[derive(Debug, Default)]
pub struct SessionTable {
    caps: SessionCaps,
    clock: u64,
    entries: HashMap<String, Entry>,
    /// Idle sessions by last activity, oldest first (busy ones are not here).
    idle: BTreeSet<(u64, String)>,
    /// Idle sessions of each principal, oldest first.
    idle_of: HashMap<String, BTreeSet<(u64, String)>>,
    /// Live sessions of each principal.
    count_of: HashMap<String, usize>,
}

impl SessionTable {
    /// An empty table with `caps` (normalised).
    pub fn new(caps: SessionCaps) -> SessionTable {
        SessionTable {
            caps: caps.normalised(),
            ..SessionTable::default()
        }
    }

    /// The caps.
    pub fn caps(&self) -> SessionCaps {
        self.caps
    }

    /// Live sessions.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Live sessions with a request in flight.
    pub fn busy(&self) -> usize {
        self.entries.len() - self.idle.len()
    }

    /// Live sessions of `principal`.
    pub fn count_of(&self, principal: &str) -> usize {
        self.count_of.get(principal).copied().unwrap_or(0)
    }

    /// The principal holding session `id`.
    pub fn principal_of(&self, id: &str) -> Option<&str> {
        self.entries.get(id).map(|e| e.principal.as_str())
    }

    /// Whether session `id` is live.
    pub fn contains(&self, id: &str) -> bool {
        self.entries.contains_key(id)
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    fn unindex_idle(&mut self, id: &str, e: &Entry) {
        let key = (e.last, id.to_string());
        self.idle.remove(&key);
        if let Some(s) = self.idle_of.get_mut(&e.principal) {
            s.remove(&key);
            if s.is_empty() {
                self.idle_of.remove(&e.principal);
            }
        }
    }

    fn index_idle(&mut self, id: &str, principal: &str, last: u64) {
        self.idle.insert((last, id.to_string()));
        self.idle_of
            .entry(principal.to_string())
            .or_default()
            .insert((last, id.to_string()));
    }

    /// Admit session `id` of `principal`: the ids evicted to make room
    /// (already removed from the table; the caller closes them), or why it
    /// cannot be admitted (nothing changed then). An id already live is
    /// only touched.
    ///
    /// # Errors
    /// [`Full`].
    pub fn admit(&mut self, id: &str, principal: &str) -> Result<Vec<String>, Full> {
        if self.entries.contains_key(id) {
            self.touch(id);
            return Ok(Vec::new());
        }
        let mut evicted = Vec::new();
        let own = self.count_of(principal);
        if own >= self.caps.max_per_principal {
            let Some(victim) = self.oldest_idle_of(principal) else {
                return Err(Full::Principal {
                    principal: principal.to_string(),
                    live: own,
                    cap: self.caps.max_per_principal,
                });
            };
            self.remove(&victim);
            evicted.push(victim);
        } else if self.entries.len() >= self.caps.max_total {
            let Some(victim) = self.global_victim(principal) else {
                return Err(Full::Server {
                    live: self.entries.len(),
                    cap: self.caps.max_total,
                });
            };
            self.remove(&victim);
            evicted.push(victim);
        }
        let last = self.tick();
        self.entries.insert(
            id.to_string(),
            Entry {
                principal: principal.to_string(),
                last,
                busy: 0,
            },
        );
        *self.count_of.entry(principal.to_string()).or_default() += 1;
        self.index_idle(id, principal, last);
        Ok(evicted)
    }

    fn oldest_idle_of(&self, principal: &str) -> Option<String> {
        self.idle_of
            .get(principal)
            .and_then(|s| s.first())
            .map(|(_, id)| id.clone())
    }

    /// At the global cap: the oldest idle session of the principal holding
    /// the most sessions that has an idle one (the requester first on a
    /// tie), never a session of a principal holding fewer than the
    /// requester would after admission.
    fn global_victim(&self, requester: &str) -> Option<String> {
        let mine = self.count_of(requester) + 1;
        let mut best: Option<(usize, bool, u64, String)> = None;
        for (p, set) in &self.idle_of {
            let Some((last, id)) = set.first() else {
                continue;
            };
            let n = self.count_of(p);
            let is_me = p == requester;
            if !is_me && n < mine {
                continue;
            }
            let better = match &best {
                None => true,
                Some((bn, bme, blast, _)) => {
                    (n, is_me, std::cmp::Reverse(*last)) > (*bn, *bme, std::cmp::Reverse(*blast))
                }
            };
            if better {
                best = Some((n, is_me, *last, id.clone()));
            }
        }
        best.map(|(_, _, _, id)| id)
    }

    /// Session `id` was active now (a request arrived).
    pub fn touch(&mut self, id: &str) {
        let now = self.tick();
        let Some(e) = self.entries.get(id).cloned() else {
            return;
        };
        if e.busy == 0 {
            self.unindex_idle(id, &e);
            self.index_idle(id, &e.principal, now);
        }
        if let Some(x) = self.entries.get_mut(id) {
            x.last = now;
        }
    }

    /// A request of session `id` started (`true`) or ended (`false`):
    /// a session with a request in flight is busy and never evicted.
    pub fn set_busy(&mut self, id: &str, started: bool) {
        let now = self.tick();
        let Some(e) = self.entries.get(id).cloned() else {
            return;
        };
        let busy = if started {
            e.busy.saturating_add(1)
        } else {
            e.busy.saturating_sub(1)
        };
        if e.busy == 0 {
            self.unindex_idle(id, &e);
        }
        if busy == 0 {
            self.index_idle(id, &e.principal, now);
        }
        if let Some(x) = self.entries.get_mut(id) {
            x.busy = busy;
            x.last = now;
        }
    }

    /// Forget session `id` (closed by its client, ended, or evicted).
    pub fn remove(&mut self, id: &str) -> bool {
        let Some(e) = self.entries.remove(id) else {
            return false;
        };
        if e.busy == 0 {
            self.unindex_idle(id, &e);
        }
        if let Some(n) = self.count_of.get_mut(&e.principal) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.count_of.remove(&e.principal);
            }
        }
        true
    }

    /// Live sessions per principal, most first (for `/healthz`).
    pub fn principals(&self) -> Vec<(String, usize)> {
        let mut v: Vec<(String, usize)> =
            self.count_of.iter().map(|(p, n)| (p.clone(), *n)).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(total: usize, per: usize) -> SessionCaps {
        SessionCaps {
            max_total: total,
            max_per_principal: per,
        }
    }

    #[test]
    fn a_principal_at_its_cap_evicts_its_own_oldest_idle_session() {
        let mut t = SessionTable::new(caps(100, 3));
        t.admit("b1", "bob").unwrap();
        for i in 0..3 {
            t.admit(&format!("m{i}"), "mallory").unwrap();
        }
        t.touch("m0");
        let ev = t.admit("m3", "mallory").unwrap();
        assert_eq!(ev, vec!["m1".to_string()], "m0 was touched: m1 is oldest");
        assert_eq!(t.count_of("mallory"), 3);
        for i in 4..1000 {
            let ev = t.admit(&format!("m{i}"), "mallory").unwrap();
            assert_eq!(ev.len(), 1);
            assert!(ev[0].starts_with('m'), "never bob's: {ev:?}");
        }
        assert!(t.contains("b1"));
        assert_eq!(t.len(), 4);
    }

    #[test]
    fn busy_sessions_are_never_evicted_and_the_excess_is_refused() {
        let mut t = SessionTable::new(caps(100, 2));
        t.admit("a", "p").unwrap();
        t.admit("b", "p").unwrap();
        t.set_busy("a", true);
        t.set_busy("b", true);
        assert_eq!(t.busy(), 2);
        let e = t.admit("c", "p").unwrap_err();
        assert!(
            matches!(
                e,
                Full::Principal {
                    live: 2,
                    cap: 2,
                    ..
                }
            ),
            "{e}"
        );
        assert_eq!(t.len(), 2, "nothing changed");
        t.set_busy("b", false);
        assert_eq!(t.admit("c", "p").unwrap(), vec!["b".to_string()]);
        // Nested requests: busy until the last one ends.
        t.set_busy("c", true);
        t.set_busy("c", true);
        t.set_busy("c", false);
        assert!(t.admit("d", "p").is_err(), "a and c busy");
        t.set_busy("c", false);
        assert_eq!(t.admit("d", "p").unwrap(), vec!["c".to_string()]);
    }

    #[test]
    fn the_global_cap_takes_from_the_heaviest_principal() {
        let mut t = SessionTable::new(caps(5, 4));
        t.admit("a1", "alice").unwrap();
        for i in 0..4 {
            t.admit(&format!("m{i}"), "mallory").unwrap();
        }
        // Bob's first session: Mallory (4) gives up her oldest.
        assert_eq!(t.admit("b1", "bob").unwrap(), vec!["m0".to_string()]);
        // Alice, Bob and Mallory hold 1, 1, 3: Mallory again.
        assert_eq!(t.admit("b2", "bob").unwrap(), vec!["m1".to_string()]);
        // 1, 2, 2: Bob's own, on a tie with Mallory.
        assert_eq!(t.admit("b3", "bob").unwrap(), vec!["b1".to_string()]);
        assert!(t.contains("a1"), "the lightest principal keeps its session");
        // Everyone else busy: refused.
        for id in ["a1", "m2", "m3", "b2", "b3"] {
            t.set_busy(id, true);
        }
        assert!(matches!(
            t.admit("c1", "carol"),
            Err(Full::Server { live: 5, cap: 5 })
        ));
    }

    #[test]
    fn removal_and_caps_are_consistent() {
        let mut t = SessionTable::new(caps(0, 10));
        assert_eq!(t.caps(), caps(1, 1));
        t.admit("x", "p").unwrap();
        assert!(t.remove("x"));
        assert!(!t.remove("x"));
        assert!(t.is_empty() && t.count_of("p") == 0);
        t.admit("y", "p").unwrap();
        t.set_busy("y", true);
        assert!(t.remove("y"));
        assert!(t.idle.is_empty() && t.idle_of.is_empty() && t.count_of.is_empty());
        assert_eq!(t.admit("z", "q").unwrap(), Vec::<String>::new());
        assert_eq!(t.principals(), vec![("q".to_string(), 1)]);
    }
}
