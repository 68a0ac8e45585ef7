//! What providers report, learnt (issue 45, item 7): a reservation is the
//! host's maximum estimate of a call ([`super::reserve`]), but a provider
//! (or a proxy in front of it) can report, and bill, much more than the
//! host can estimate from what it sent: hidden system prompts, cache
//! writes, reasoning, or plain over-reporting. Admission then holds only
//! for the estimates, and N concurrent calls each pass the day's hard cap
//! by their overrun.
//!
//! So every settled call records how far its charge went past its
//! estimate, per side, for the provider and the model asked
//! ([`observed`]: the charge of each side, at the higher of the rates of
//! the model asked and the model that answered and counting the host's
//! floors, over the estimate of that side), and later reservations of that
//! provider and model are scaled by the largest ratio seen per side
//! ([`scaled`], never below the estimate). The store keeps the ratios per
//! UTC day; the largest of the last [`LEARN_DAYS`] days is used, so a
//! ratio is forgotten a month after the provider last reported it (a
//! provider that reports honestly again is trusted again, and one
//! erroneous report does not block a model for good), and each ratio is at
//! most [`MAX_RATIO`].
//!
//! **What remains.** A call reserved before any report of its provider and
//! model has been settled (in the window) is admitted on its unscaled
//! estimate: if the provider then reports k times the estimate, that call
//! passes its reservation by (k − 1) × its estimate (less than what the
//! next calls reserve). No host can know a provider's over-reporting before
//! it has seen one report; the host's meter lets one such call at a time
//! through per process (`capsaga_host::agent::first_report`), so hosts
//! sharing a store each send one. Once a report is settled, the spend of
//! later calls passes the cap by at most what a provider reports beyond
//! the largest ratio it reported before (nothing, for a provider that
//! over-reports consistently; every call in flight, for one that suddenly
//! reports more than it ever did). A side whose estimate is free (a price of zero) teaches
//! nothing: a free model asked, answered by a priced one, is charged the
//! priced rate at settlement but was reserved at zero.

/// Days of reports whose largest ratio scales a reservation.
pub const LEARN_DAYS: u64 = 30;

/// The largest ratio kept (a report beyond it is recorded as this): a
/// reservation scaled by it is refused by any sensible cap anyway.
pub const MAX_RATIO: f64 = 1.0e6;

/// How far a provider's charges went past the host's estimates, per side
/// (charged over estimated, USD). `0.0` on a side: nothing learnt there.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Ratios {
    /// Input (prompt) side.
    pub input: f64,
    /// Output (completion) side.
    pub output: f64,
}

impl Ratios {
    /// Whether anything was learnt (a side above zero: some report of the
    /// provider and model was settled with a charge).
    pub fn known(&self) -> bool {
        self.input > 0.0 || self.output > 0.0
    }

    /// The larger of `self` and `other`, per side.
    pub fn max(self, other: Ratios) -> Ratios {
        Ratios {
            input: self.input.max(other.input),
            output: self.output.max(other.output),
        }
    }
}

/// One side's ratio: `charged / estimated` when the estimate is positive
/// and both are finite, at most [`MAX_RATIO`]; else `0.0` (nothing learnt).
fn side(estimated: f64, charged: f64) -> f64 {
    if !(estimated.is_finite() && estimated > 0.0 && charged.is_finite() && charged > 0.0) {
        return 0.0;
    }
    (charged / estimated).min(MAX_RATIO)
}

/// The ratios one settled call shows: what each side was charged (USD)
/// over what the reservation estimated for it (USD).
pub fn observed(estimated: (f64, f64), charged: (f64, f64)) -> Ratios {
    Ratios {
        input: side(estimated.0, charged.0),
        output: side(estimated.1, charged.1),
    }
}

/// The reservation of a call estimated at `estimated` (input, output USD)
/// once `learnt` is known: each side scaled by its ratio when that is
/// above one, never below the estimate (a provider that reports less is
/// still reserved the estimate).
pub fn scaled(estimated: (f64, f64), learnt: Ratios) -> f64 {
    let factor = |r: f64| if r.is_finite() && r > 1.0 { r } else { 1.0 };
    estimated.0 * factor(learnt.input) + estimated.1 * factor(learnt.output)
}

/// What a call was charged beyond its reservation, USD (`0.0` when it
/// stayed within).
pub fn overrun(reserved: f64, charged: f64) -> f64 {
    let d = charged - reserved;
    if d.is_finite() && d > 0.0 { d } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_are_per_side_and_only_ever_raise_a_reservation() {
        let r = observed((0.01, 0.10), (0.03, 0.10));
        assert!((r.input - 3.0).abs() < 1e-12 && (r.output - 1.0).abs() < 1e-12);
        // Scaled: the input side three times, the output side as estimated.
        assert!((scaled((0.02, 0.10), r) - 0.16).abs() < 1e-12);
        // A provider reporting less is still reserved the whole estimate.
        let less = observed((0.01, 0.10), (0.001, 0.01));
        assert!((scaled((0.02, 0.10), less) - 0.12).abs() < 1e-12);
        assert!((scaled((0.02, 0.10), Ratios::default()) - 0.12).abs() < 1e-12);
        // The larger per side.
        let m = r.max(Ratios {
            input: 2.0,
            output: 10.0,
        });
        assert_eq!((m.input, m.output), (3.0, 10.0));
    }

    #[test]
    fn nonsense_teaches_nothing_and_a_ratio_is_bounded() {
        let r = observed((0.0, f64::NAN), (5.0, 5.0));
        assert_eq!(
            r,
            Ratios::default(),
            "a free or unknown side learns nothing"
        );
        let r = observed((1e-12, 1.0), (1e12, f64::INFINITY));
        assert_eq!(r.input, MAX_RATIO);
        assert_eq!(r.output, 0.0);
        let r = observed((1.0, 1.0), (-1.0, 0.0));
        assert_eq!(r, Ratios::default());
        assert_eq!(
            scaled(
                (1.0, 1.0),
                Ratios {
                    input: f64::NAN,
                    output: -3.0
                }
            ),
            2.0
        );
        assert!((overrun(0.1, 0.3) - 0.2).abs() < 1e-12);
        assert_eq!(overrun(0.3, 0.1), 0.0);
        assert_eq!(overrun(0.3, f64::NAN), 0.0);
    }
}
