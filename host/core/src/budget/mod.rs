//! Cost accounting and budget caps (seed 000 §6 "Budget runtime", seed 003
//! "Contabilidad de costos y presupuestos"). Pure: the host keeps the
//! counters (SQLite) and asks [`check`] before each model call.
//!
//! Prices live in one table, in USD per million tokens (a JSON file, shipped
//! as `model_prices.json`, overridable with `[budget] prices = "file"`):
//!
//! ```json
//! { "default": { "input_per_m": 3.0, "output_per_m": 15.0 },
//!   "models": { "claude-sonnet-4-5": { "input_per_m": 3.0, "output_per_m": 15.0 },
//!               "scripted": { "input_per_m": 0, "output_per_m": 0 } } }
//! ```
//!
//! A model is looked up exactly, then by the longest table name that is a
//! prefix of it followed by `-` (`gpt-4o-2024-08-06` → `gpt-4o`); a model not
//! in the table is charged the default rate (the host warns once).
//!
//! ```toml
//! [budget]
//! prices = "model_prices.json"  # relative to capsaga.toml
//! request_soft_usd = 0.50       # past this in one turn: the cheaper tier
//! request_hard_usd = 1.00       # past this in one turn: no more model calls (budget_hit)
//! day_soft_usd = 2.0            # per UTC day, all turns, survives restarts
//! day_hard_usd = 5.0
//! ```
//!
//! A cap is reached when the spend is at or above it. Hard caps are
//! enforced by reservation ([`reserve`]): before each model call its
//! maximum estimate is reserved (refused, with nothing sent, when it would
//! pass a hard cap counting the spend and every reservation in flight), and
//! after it the reservation is settled to the larger of the reported cost
//! and the host's recomputation. Soft caps choose the tier from the spend
//! (and what is reserved) before the call ([`check`]). A provider that
//! reports more than the host estimated makes later reservations of that
//! provider and model larger ([`learn`]).

pub mod learn;
pub mod reserve;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The `[budget]` section.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetSection {
    /// Price table file (relative to the policy file); default: the built-in
    /// table.
    pub prices: Option<String>,
    /// Per-request (one agent turn) soft cap, USD.
    pub request_soft_usd: Option<f64>,
    /// Per-request hard cap, USD.
    pub request_hard_usd: Option<f64>,
    /// Per-day (UTC) soft cap, USD.
    pub day_soft_usd: Option<f64>,
    /// Per-day hard cap, USD.
    pub day_hard_usd: Option<f64>,
}

impl BudgetSection {
    /// The caps.
    pub fn caps(&self) -> Caps {
        Caps {
            request_soft_usd: self.request_soft_usd,
            request_hard_usd: self.request_hard_usd,
            day_soft_usd: self.day_soft_usd,
            day_hard_usd: self.day_hard_usd,
        }
    }

    /// Check the caps are finite and not negative.
    ///
    /// # Errors
    /// [`BudgetError::BadCap`].
    pub fn check(&self) -> Result<(), BudgetError> {
        for (name, v) in [
            ("request_soft_usd", self.request_soft_usd),
            ("request_hard_usd", self.request_hard_usd),
            ("day_soft_usd", self.day_soft_usd),
            ("day_hard_usd", self.day_hard_usd),
        ] {
            if let Some(v) = v
                && !(v.is_finite() && v >= 0.0)
            {
                return Err(BudgetError::BadCap(name));
            }
        }
        Ok(())
    }
}

/// Why a budget setting or price table was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BudgetError {
    /// A cap that is negative or not a number.
    #[error("[budget] {0} must be a number of USD, zero or more")]
    BadCap(&'static str),
    /// The price table does not parse.
    #[error("price table: {0}")]
    Prices(String),
}

/// A price in USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Input (prompt) tokens, USD per million.
    pub input_per_m: f64,
    /// Output (response) tokens, USD per million.
    pub output_per_m: f64,
}

/// The price table.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PriceTable {
    /// A note for the reader of the file.
    #[serde(default, rename = "_comment", skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// Rate for models not in the table.
    pub default: Price,
    /// Rates by model name.
    #[serde(default)]
    pub models: BTreeMap<String, Price>,
}

/// The cost of one call.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Cost {
    /// USD.
    pub usd: f64,
    /// False when the default rate was used.
    pub known_model: bool,
}

impl PriceTable {
    /// Parse a table (strict JSON: duplicate keys refused).
    ///
    /// # Errors
    /// [`BudgetError::Prices`].
    pub fn parse(text: &str) -> Result<PriceTable, BudgetError> {
        let v = crate::json::parse_strict(text, 4 * 1024 * 1024)
            .map_err(|e| BudgetError::Prices(e.to_string()))?;
        let t: PriceTable =
            serde_json::from_value(v).map_err(|e| BudgetError::Prices(e.to_string()))?;
        for (name, p) in std::iter::once(("default", &t.default))
            .chain(t.models.iter().map(|(k, v)| (k.as_str(), v)))
        {
            for x in [p.input_per_m, p.output_per_m] {
                if !(x.is_finite() && x >= 0.0) {
                    return Err(BudgetError::Prices(format!(
                        "the price of `{}` must be a number, zero or more",
                        name.chars().take(60).collect::<String>()
                    )));
                }
            }
        }
        Ok(t)
    }

    /// The rate of `model` and whether the table knows it.
    pub fn price(&self, model: &str) -> (Price, bool) {
        if let Some(p) = self.models.get(model) {
            return (*p, true);
        }
        self.models
            .iter()
            .filter(|(k, _)| {
                model.len() > k.len() && model.starts_with(k.as_str()) && {
                    let rest = &model[k.len()..];
                    rest.starts_with('-') || rest.starts_with('@') || rest.starts_with(':')
                }
            })
            .max_by_key(|(k, _)| k.len())
            .map(|(_, p)| (*p, true))
            .unwrap_or((self.default, false))
    }

    /// The cost of a call of `model` with these token counts.
    pub fn cost(&self, model: &str, input_tokens: u64, output_tokens: u64) -> Cost {
        let (p, known_model) = self.price(model);
        let usd = (input_tokens as f64 * p.input_per_m + output_tokens as f64 * p.output_per_m)
            / 1_000_000.0;
        Cost { usd, known_model }
    }
}

/// The caps, USD (`None`: no cap).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Caps {
    /// Per-request soft cap.
    pub request_soft_usd: Option<f64>,
    /// Per-request hard cap.
    pub request_hard_usd: Option<f64>,
    /// Per-day soft cap.
    pub day_soft_usd: Option<f64>,
    /// Per-day hard cap.
    pub day_hard_usd: Option<f64>,
}

/// What the budget allows for the next model call.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum BudgetState {
    /// Under every cap: the normal tier.
    Normal,
    /// A soft cap is reached: the cheaper tier.
    Soft {
        /// Which cap, and the spend.
        reason: String,
    },
    /// A hard cap is reached: no model call.
    Hard {
        /// Which cap, and the spend.
        reason: String,
    },
}

/// Decide the next call given what this request and this day have spent
/// (USD). Hard caps win over soft ones; a cap is reached at equality.
pub fn check(caps: &Caps, request_spent: f64, day_spent: f64) -> BudgetState {
    let reached = |cap: Option<f64>, spent: f64| cap.is_some_and(|c| spent >= c);
    if reached(caps.request_hard_usd, request_spent) {
        return BudgetState::Hard {
            reason: format!(
                "per-request hard cap ${:.4} reached (${request_spent:.4} spent in this request)",
                caps.request_hard_usd.unwrap_or_default()
            ),
        };
    }
    if reached(caps.day_hard_usd, day_spent) {
        return BudgetState::Hard {
            reason: format!(
                "per-day hard cap ${:.4} reached (${day_spent:.4} spent today, UTC)",
                caps.day_hard_usd.unwrap_or_default()
            ),
        };
    }
    if reached(caps.request_soft_usd, request_spent) {
        return BudgetState::Soft {
            reason: format!(
                "per-request soft cap ${:.4} reached (${request_spent:.4} spent in this request)",
                caps.request_soft_usd.unwrap_or_default()
            ),
        };
    }
    if reached(caps.day_soft_usd, day_spent) {
        return BudgetState::Soft {
            reason: format!(
                "per-day soft cap ${:.4} reached (${day_spent:.4} spent today, UTC)",
                caps.day_soft_usd.unwrap_or_default()
            ),
        };
    }
    BudgetState::Normal
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = r#"{"default":{"input_per_m":3,"output_per_m":15},
        "models":{"gpt-4o":{"input_per_m":2.5,"output_per_m":10},
                  "gpt-4o-mini":{"input_per_m":0.15,"output_per_m":0.6},
                  "scripted":{"input_per_m":0,"output_per_m":0}}}"#;

    #[test]
    fn prices_exact_prefix_default() {
        let t = PriceTable::parse(TABLE).unwrap();
        let c = t.cost("gpt-4o", 1_000_000, 1_000_000);
        assert_eq!((c.usd, c.known_model), (12.5, true));
        // Dated model ids use the longest matching name.
        assert_eq!(t.price("gpt-4o-mini-2024-07-18").0.input_per_m, 0.15);
        assert_eq!(t.price("gpt-4o-2024-08-06").0.input_per_m, 2.5);
        // Not a prefix at a `-` boundary: default.
        let c = t.cost("gpt-4omega", 1000, 0);
        assert!(!c.known_model);
        assert!((c.usd - 0.003).abs() < 1e-12);
        assert_eq!(t.cost("scripted", 5000, 5000).usd, 0.0);
    }

    #[test]
    fn bad_tables_refused() {
        assert!(PriceTable::parse(r#"{"default":{"input_per_m":1,"output_per_m":1},"default":{"input_per_m":0,"output_per_m":0}}"#).is_err());
        assert!(PriceTable::parse(r#"{"default":{"input_per_m":-1,"output_per_m":1}}"#).is_err());
        assert!(PriceTable::parse(r#"{"models":{}}"#).is_err());
        assert!(
            PriceTable::parse(r#"{"default":{"input_per_m":1,"output_per_m":1,"cached":0}}"#)
                .is_err()
        );
    }

    #[test]
    fn caps() {
        let caps = Caps {
            request_soft_usd: Some(0.5),
            request_hard_usd: Some(1.0),
            day_soft_usd: Some(2.0),
            day_hard_usd: Some(5.0),
        };
        assert_eq!(check(&caps, 0.0, 0.0), BudgetState::Normal);
        assert!(matches!(check(&caps, 0.5, 0.0), BudgetState::Soft { .. }));
        assert!(matches!(check(&caps, 0.1, 2.5), BudgetState::Soft { .. }));
        assert!(matches!(check(&caps, 1.0, 0.0), BudgetState::Hard { .. }));
        assert!(matches!(check(&caps, 0.6, 5.0), BudgetState::Hard { .. }));
        assert_eq!(check(&Caps::default(), 1e9, 1e9), BudgetState::Normal);
        let e = BudgetSection {
            day_hard_usd: Some(f64::NAN),
            ..Default::default()
        };
        assert!(e.check().is_err());
    }
}
