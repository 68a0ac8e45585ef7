//! [`CallContext`]: who is calling and until when (WIT `call-context`).

use serde::{Deserialize, Serialize};
use std::time::{SystemTime, UNIX_EPOCH};

/// Identity and limits of one call, set by the host (WIT `call-context`).
///
/// Every field is public so that native unit tests can build one with
/// `CallContext { dry_run: true, ..Default::default() }`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallContext {
    /// The saga (one agent turn or one plan run) this call belongs to.
    pub saga_id: String,
    /// Position of the step in its saga, from 0.
    pub step_seq: u64,
    /// Stable key of this step: the same on every retry of the same logical
    /// step. Pass it on to external APIs that accept idempotency keys.
    pub idempotency_key: String,
    /// Wall-clock deadline of the call in milliseconds since the Unix epoch;
    /// the host interrupts the instance when it passes. 0 means "not set"
    /// (only in native tests; the host always sets it).
    pub deadline_ms: u64,
    /// True when this is a `dry-run` call: the host has removed write access
    /// from the sandbox, so any write fails with permission-denied.
    pub dry_run: bool,
}

impl CallContext {
    /// Milliseconds left until [`CallContext::deadline_ms`], `Some(0)` once it
    /// has passed, `None` when no deadline is set or the clock is unavailable.
    pub fn remaining_ms(&self) -> Option<u64> {
        if self.deadline_ms == 0 {
            return None;
        }
        let now = SystemTime::now().duration_since(UNIX_EPOCH).ok()?;
        let now_ms = u64::try_from(now.as_millis()).ok()?;
        Some(self.deadline_ms.saturating_sub(now_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remaining_ms_without_deadline_is_none() {
        assert_eq!(CallContext::default().remaining_ms(), None);
    }

    #[test]
    fn remaining_ms_after_deadline_is_zero() {
        let ctx = CallContext {
            deadline_ms: 1,
            ..Default::default()
        };
        assert_eq!(ctx.remaining_ms(), Some(0));
    }

    #[test]
    fn remaining_ms_in_future_is_positive() {
        let ctx = CallContext {
            deadline_ms: u64::MAX,
            ..Default::default()
        };
        assert!(ctx.remaining_ms().is_some_and(|ms| ms > 0));
    }

    #[test]
    fn serde_field_names_are_the_wal_s() {
        let v = serde_json::to_value(CallContext::default()).unwrap_or_default();
        for k in [
            "saga_id",
            "step_seq",
            "idempotency_key",
            "deadline_ms",
            "dry_run",
        ] {
            assert!(v.get(k).is_some(), "{k}");
        }
    }
}
