//! Reserve before spending, settle after (seed 003, "Contabilidad de
//! costos y presupuestos": before each call the maximum estimate is
//! reserved against the request and the organisation; afterwards the
//! larger of the reported cost and the host's own recomputation is
//! recorded). Pure rules; the store makes a reservation atomically
//! (`capsaga_store::BudgetStore::reserve_spend`) and the runtime's meter
//! calls it before every model call.
//!
//! - **Estimate** ([`max_estimate`]): the prompt's tokens estimated from the
//!   request's bytes ([`estimate_prompt_tokens`]: one token per
//!   [`ESTIMATE_BYTES_PER_TOKEN`] bytes, plus [`TOKENS_PER_MESSAGE`] per
//!   message, rounded up: an upper estimate for text and code) plus the
//!   request's `max_tokens`, at the price table's rate of the model asked.
//! - **Admission** ([`admits`]): a reservation is made only when what is
//!   spent plus what is reserved (and not expired) is under the hard cap and
//!   stays at or under it with this estimate added; otherwise the call is
//!   refused and nothing is sent. So N concurrent calls never commit more
//!   than the cap, and the spend can pass it only by what a call costs
//!   beyond its own estimate (a provider reporting more tokens than were
//!   estimated).
//! - **Settlement** ([`settled_usd`]): the reservation is replaced by the
//!   larger of the cost of the usage the provider reported and the host's
//!   recomputation ([`floor_tokens`]: a count below one token per
//!   [`FLOOR_BYTES_PER_TOKEN`] bytes of what was sent or received is not
//!   believed; the rate of the model the host asked for is used when the
//!   answer names a cheaper one).
//! - **Expiry**: a reservation carries a time to live (the call's deadline
//!   plus a margin, [`reservation_ttl_ms`]); one whose process died is no
//!   longer counted after it, so a crash never blocks the budget for good.

use super::Price;

/// Bytes per token of the maximum estimate of a prompt (an upper estimate:
/// English prose is about 4 bytes per token, code about 3).
pub const ESTIMATE_BYTES_PER_TOKEN: u64 = 3;
/// Tokens counted per message on top of its bytes (role and framing).
pub const TOKENS_PER_MESSAGE: u64 = 4;
/// Bytes per token below which a provider's reported count is not
/// believed at settlement (no tokenizer in use averages more).
pub const FLOOR_BYTES_PER_TOKEN: u64 = 6;
/// Time a reservation outlives its call's deadline, ms (then it expires
/// whether or not it was settled).
pub const RESERVATION_MARGIN_MS: u64 = 60_000;

/// The prompt tokens of a request of `bytes` bytes in `messages` messages
/// (system prompt, conversation, tool definitions), estimated from above.
pub fn estimate_prompt_tokens(bytes: u64, messages: u64) -> u64 {
    bytes
        .div_ceil(ESTIMATE_BYTES_PER_TOKEN)
        .saturating_add(messages.saturating_mul(TOKENS_PER_MESSAGE))
}

/// The fewest tokens `bytes` bytes of text can be, as far as settlement is
/// concerned (see [`FLOOR_BYTES_PER_TOKEN`]).
pub fn floor_tokens(bytes: u64) -> u64 {
    bytes / FLOOR_BYTES_PER_TOKEN
}

/// The most a call can cost, USD: `prompt_tokens` in and `max_tokens` out at
/// `price`.
pub fn max_estimate(price: Price, prompt_tokens: u64, max_tokens: u64) -> f64 {
    (prompt_tokens as f64 * price.input_per_m + max_tokens as f64 * price.output_per_m)
        / 1_000_000.0
}

/// Whether a call estimated at `estimate` USD may reserve it under `cap`
/// when `spent` is spent and `reserved` is held by other calls (USD): the
/// cap not yet reached, and not passed with this estimate. No cap: always.
pub fn admits(cap: Option<f64>, spent: f64, reserved: f64, estimate: f64) -> bool {
    match cap {
        None => true,
        Some(cap) => {
            let committed = spent + reserved;
            committed < cap && committed + estimate <= cap
        }
    }
}

/// Why a reservation was refused, for the operator and the trace: which cap
/// (`per-day` or `per-request`), and the figures.
pub fn refusal(which: &str, cap: f64, spent: f64, reserved: f64, estimate: f64) -> String {
    format!(
        "{which} hard cap ${cap:.4} reached: ${spent:.4} spent and ${reserved:.4} reserved by calls in flight, \
         and this call may cost up to ${estimate:.4}"
    )
}

/// What a settled call is charged, USD: the larger of the cost of the
/// reported usage and the host's recomputation (a `NaN` counts as nothing,
/// never as more).
pub fn settled_usd(reported: f64, recomputed: f64) -> f64 {
    let ok = |x: f64| if x.is_finite() && x > 0.0 { x } else { 0.0 };
    ok(reported).max(ok(recomputed))
}

/// How long a reservation for a call with a deadline of `deadline_ms` is
/// held before it expires, ms.
pub fn reservation_ttl_ms(deadline_ms: u64) -> u64 {
    deadline_ms.saturating_add(RESERVATION_MARGIN_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimates_are_from_above_and_floors_from_below() {
        // 4 000 bytes of English: about 1 000 tokens; estimated 1 334 + 4.
        assert_eq!(estimate_prompt_tokens(4000, 1), 1338);
        assert_eq!(estimate_prompt_tokens(0, 0), 0);
        assert_eq!(floor_tokens(4000), 666);
        assert!(floor_tokens(4000) < 1000 && 1000 < estimate_prompt_tokens(4000, 1));
        let p = Price {
            input_per_m: 3.0,
            output_per_m: 15.0,
        };
        let e = max_estimate(p, 1_000_000, 1_000_000);
        assert!((e - 18.0).abs() < 1e-12);
        assert_eq!(estimate_prompt_tokens(u64::MAX, u64::MAX), u64::MAX);
    }

    #[test]
    fn admission_never_commits_past_the_cap() {
        assert!(admits(None, 1e9, 1e9, 1e9));
        assert!(admits(Some(1.0), 0.0, 0.0, 1.0), "exactly the cap");
        assert!(!admits(Some(1.0), 0.0, 0.0, 1.01));
        assert!(!admits(Some(1.0), 0.5, 0.4, 0.2), "reservations count");
        assert!(admits(Some(1.0), 0.5, 0.3, 0.2));
        assert!(!admits(Some(1.0), 1.0, 0.0, 0.0), "reached at equality");
        assert!(!admits(Some(0.0), 0.0, 0.0, 0.0));
        // Whatever the order of N concurrent admissions, what is committed
        // (spent + reserved) never passes the cap.
        let cap = 1.0;
        let mut reserved = 0.0;
        let mut made = 0;
        for _ in 0..100 {
            if admits(Some(cap), 0.25, reserved, 0.07) {
                reserved += 0.07;
                made += 1;
            }
        }
        assert_eq!(made, 10);
        assert!(0.25 + reserved <= cap);
        let why = refusal("per-day", 1.0, 0.25, 0.7, 0.07);
        assert!(
            why.contains("per-day hard cap $1.0000") && why.contains("$0.0700"),
            "{why}"
        );
    }

    #[test]
    fn settlement_takes_the_larger_and_ignores_nonsense() {
        assert_eq!(settled_usd(0.2, 0.1), 0.2);
        assert_eq!(settled_usd(0.1, 0.2), 0.2);
        assert_eq!(settled_usd(f64::NAN, 0.2), 0.2);
        assert_eq!(settled_usd(-5.0, f64::INFINITY), 0.0);
        assert_eq!(reservation_ttl_ms(120_000), 180_000);
        assert_eq!(reservation_ttl_ms(u64::MAX), u64::MAX);
    }
}
