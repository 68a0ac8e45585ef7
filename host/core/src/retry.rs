//! Retries of a failed `execute` (agent-kernel SPEC phase 3: "retry only for
//! `retriable` errors, with a stable idempotency key").
//!
//! A step is retried only when the tool marked its error retriable, at most
//! [`RetryPolicy::max_attempts`] attempts in all, waiting an exponential
//! backoff capped at [`RetryPolicy::max_delay_ms`] between attempts. Every
//! attempt of a step gets the same call context, hence the same idempotency
//! key, so a tool can recognise a retry of work it already did.

use crate::error::ToolError;

/// How a step's failed attempts are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (1 = never retry).
    pub max_attempts: u32,
    /// Wait before the second attempt, milliseconds; doubled for each
    /// attempt after.
    pub base_delay_ms: u64,
    /// Longest wait between two attempts, milliseconds.
    pub max_delay_ms: u64,
}

impl RetryPolicy {
    /// Three attempts, waiting 100 ms then 200 ms (at most 2 s).
    pub const DEFAULT: RetryPolicy = RetryPolicy {
        max_attempts: 3,
        base_delay_ms: 100,
        max_delay_ms: 2_000,
    };

    /// Never retry.
    pub const NEVER: RetryPolicy = RetryPolicy {
        max_attempts: 1,
        base_delay_ms: 0,
        max_delay_ms: 0,
    };

    /// The wait in milliseconds before another attempt, after `attempts`
    /// attempts (from 1) failed with `error`; `None` when the step must not
    /// be retried (the error is not retriable or the attempts are used up).
    pub fn next_delay_ms(&self, attempts: u32, error: &ToolError) -> Option<u64> {
        if !error.retriable || attempts >= self.max_attempts {
            return None;
        }
        let shift = attempts.saturating_sub(1).min(32);
        Some(
            self.base_delay_ms
                .saturating_mul(1u64 << shift)
                .min(self.max_delay_ms),
        )
    }
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn only_retriable_errors_bounded_and_capped() {
        let p = RetryPolicy {
            max_attempts: 5,
            base_delay_ms: 100,
            max_delay_ms: 300,
        };
        let retriable = ToolError::with_hint(ErrorKind::NetworkError, "x", "y").retriable(true);
        let fatal = ToolError::with_hint(ErrorKind::NetworkError, "x", "y");
        assert_eq!(p.next_delay_ms(1, &fatal), None);
        assert_eq!(p.next_delay_ms(1, &retriable), Some(100));
        assert_eq!(p.next_delay_ms(2, &retriable), Some(200));
        assert_eq!(p.next_delay_ms(3, &retriable), Some(300));
        assert_eq!(p.next_delay_ms(4, &retriable), Some(300));
        assert_eq!(p.next_delay_ms(5, &retriable), None);
        assert_eq!(p.next_delay_ms(u32::MAX, &retriable), None);
        assert_eq!(RetryPolicy::NEVER.next_delay_ms(1, &retriable), None);
        let huge = RetryPolicy {
            max_attempts: u32::MAX,
            base_delay_ms: u64::MAX,
            max_delay_ms: 10,
        };
        assert_eq!(huge.next_delay_ms(100, &retriable), Some(10));
    }
}
