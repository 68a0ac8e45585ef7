//! Retries of a failed `execute` (agent-kernel SPEC phase 3: "retry only for
//! `retriable` errors, with a stable idempotency key").
//!
//! A step is retried only when running it again is safe: the tool declares
//! itself idempotent (WIT `idempotent`), or the failed attempt provably
//! sent nothing (every outgoing request was refused by the guard or failed
//! before a connection was made; see [`Repeat`]). A non-idempotent step
//! (a POST, a payment) whose request may have reached the server is never
//! retried automatically: it fails, and the model or the operator decides
//! (an approval for one run never turns into several). Then only
//! when the tool marked its error retriable, at most
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
    /// be retried (running it again is not known to be safe, the error is
    /// not retriable, or the attempts are used up).
    pub fn next_delay_ms(&self, attempts: u32, error: &ToolError, repeat: Repeat) -> Option<u64> {
        if repeat == Repeat::Unsafe || !error.retriable || attempts >= self.max_attempts {
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

/// Whether running a failed step again is known to be safe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repeat {
    /// The tool is idempotent: the same call twice has the effect of one.
    Idempotent,
    /// The failed attempt sent nothing (no effect left the sandbox).
    NothingSent,
    /// Neither: the effect may have happened; never retried automatically.
    Unsafe,
}

impl Repeat {
    /// The rule: `idempotent` (the tool's meta) wins; otherwise a tool that
    /// can write nothing outside the network (`network_only`: no writable
    /// grant) and whose attempt made at least one outgoing request, every
    /// one of them refused or failed before connecting (`all_unsent`), is
    /// safe to run again; everything else is [`Repeat::Unsafe`].
    pub fn of(idempotent: bool, network_only: bool, requests: usize, all_unsent: bool) -> Repeat {
        if idempotent {
            Repeat::Idempotent
        } else if network_only && requests > 0 && all_unsent {
            Repeat::NothingSent
        } else {
            Repeat::Unsafe
        }
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
        let i = Repeat::Idempotent;
        assert_eq!(p.next_delay_ms(1, &fatal, i), None);
        assert_eq!(p.next_delay_ms(1, &retriable, i), Some(100));
        assert_eq!(p.next_delay_ms(2, &retriable, i), Some(200));
        assert_eq!(p.next_delay_ms(3, &retriable, i), Some(300));
        assert_eq!(p.next_delay_ms(4, &retriable, i), Some(300));
        assert_eq!(p.next_delay_ms(5, &retriable, i), None);
        assert_eq!(p.next_delay_ms(u32::MAX, &retriable, i), None);
        assert_eq!(RetryPolicy::NEVER.next_delay_ms(1, &retriable, i), None);
        assert_eq!(
            p.next_delay_ms(1, &retriable, Repeat::NothingSent),
            Some(100)
        );
        let huge = RetryPolicy {
            max_attempts: u32::MAX,
            base_delay_ms: u64::MAX,
            max_delay_ms: 10,
        };
        assert_eq!(huge.next_delay_ms(100, &retriable, i), Some(10));
    }

    #[test]
    fn a_step_that_may_have_had_its_effect_is_never_retried() {
        let p = RetryPolicy::DEFAULT;
        let retriable = ToolError::with_hint(ErrorKind::NetworkError, "502", "y").retriable(true);
        assert_eq!(p.next_delay_ms(1, &retriable, Repeat::Unsafe), None);
        // (idempotent, network only, requests, all unsent) -> repeat
        let cases = [
            ((true, false, 0, false), Repeat::Idempotent),
            ((true, true, 3, false), Repeat::Idempotent),
            ((false, true, 1, true), Repeat::NothingSent),
            ((false, true, 2, false), Repeat::Unsafe),
            ((false, true, 0, true), Repeat::Unsafe),
            ((false, false, 1, true), Repeat::Unsafe),
            ((false, false, 0, false), Repeat::Unsafe),
        ];
        for ((idem, net, n, unsent), want) in cases {
            assert_eq!(
                Repeat::of(idem, net, n, unsent),
                want,
                "{idem} {net} {n} {unsent}"
            );
        }
    }
}
