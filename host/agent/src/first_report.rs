//! The first report of a provider and model, one call at a time (issue 45,
//! item 7). Reservations are scaled by what a provider's reports showed
//! ([`capsaga_core::budget::learn`]), but before any report of a provider
//! and model is settled there is nothing to scale by: N calls reserved
//! concurrently then would each pass their reservation by the provider's
//! overrun, together passing the day's hard cap by N overruns.
//!
//! So, in this process, while the store holds nothing learnt about a
//! provider and model (in the learning window), only one priced call of it
//! is reserved at a time: the others wait here until that call is settled
//! (its report recorded, or its reservation refused, or it is abandoned),
//! then read the store again and are reserved at what it taught. The first
//! call alone can pass its reservation, by at most what later calls of that
//! provider and model reserve beyond their estimate.
//!
//! The turn is per process: hosts sharing a PostgreSQL store each send one
//! first call before any has been settled.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The turn of the one call of a provider and model reserved while nothing
/// is learnt about its reports; dropped (with the call's ticket, once it is
/// settled), the next waiting call reads what it taught.
#[derive(Debug)]
pub struct FirstReport {
    _turn: OwnedSemaphorePermit,
}

/// The gates of this process, by (provider, model).
type Gates = Mutex<HashMap<(String, String), Arc<Semaphore>>>;

/// One gate per provider and model, in this process.
fn gate(provider: &str, model: &str) -> Arc<Semaphore> {
    static GATES: OnceLock<Gates> = OnceLock::new();
    let gates = GATES.get_or_init(|| Mutex::new(HashMap::new()));
    // A panic elsewhere cannot leave the map half-written (one insert).
    let mut g = gates.lock().unwrap_or_else(|e| e.into_inner());
    g.entry((provider.to_owned(), model.to_owned()))
        .or_insert_with(|| Arc::new(Semaphore::new(1)))
        .clone()
}

/// Wait for the turn of `provider`'s `model` (while another call of it
/// holds its first-report turn).
pub async fn wait(provider: &str, model: &str) -> FirstReport {
    let gate = gate(provider, model);
    // The semaphore is never closed: acquiring only waits.
    loop {
        if let Ok(turn) = gate.clone().acquire_owned().await {
            return FirstReport { _turn: turn };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_turn_per_provider_and_model() {
        let a = wait("first-report-test", "m").await;
        // Another model, another provider: their own turns.
        let _b = wait("first-report-test", "other").await;
        let _c = wait("first-report-test-2", "m").await;
        // The same provider and model waits until the turn is dropped.
        let next = tokio::spawn(async { wait("first-report-test", "m").await });
        tokio::task::yield_now().await;
        assert!(!next.is_finished());
        drop(a);
        next.await.unwrap();
    }
}
