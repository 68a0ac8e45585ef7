//! Spend counters and the price table of the running host (the pure rules
//! are in `capsaga_core::budget`).
//!
//! The per-day spend lives in the store (`BudgetStore`: one row per UTC
//! day, and the reservations of calls in flight), written in the same
//! write path as everything else, so it survives restarts and is shared by
//! concurrent processes on the same workspace. The per-request spend is the
//! turn's own total. Every model call is reserved and settled through a
//! [`super::meter::Meter`].

use capsaga_core::budget::{BudgetError, BudgetState, Caps, Cost, PriceTable, check};
use capsaga_door::config::Config;
use capsaga_store::clock::today;
use capsaga_store::{Store, StoreError};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::{Mutex, OnceLock};

/// The built-in price table (`host/agent/model_prices.json`).
pub const BUILTIN_PRICES: &str = include_str!("../model_prices.json");

/// Why the budget could not be used.
#[derive(Debug, thiserror::Error)]
pub enum BudgetLoadError {
    /// The price table file could not be read.
    #[error("cannot read price table {path}: {error}")]
    Read {
        /// The file.
        path: String,
        /// OS error.
        error: String,
    },
    /// The price table is invalid.
    #[error("{path}: {error}")]
    Invalid {
        /// The file.
        path: String,
        /// Why.
        error: BudgetError,
    },
    /// The counters could not be read or written.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Prices, caps and counters for one turn.
#[derive(Debug)]
pub struct Budget {
    /// The ledger (the day's spend and reservations).
    pub(super) store: Arc<dyn Store>,
    /// One model request's deadline (`[agent] timeout_ms`), ms: how long a
    /// reservation is held beyond it before it expires.
    pub try_timeout_ms: u64,
    /// The price table.
    pub prices: PriceTable,
    /// The caps.
    pub caps: Caps,
    /// Whether the price table is the policy's own (`[budget] prices` or
    /// `CAPSAGA_PRICES`) rather than the built-in one.
    pub policy_prices: bool,
    /// Local providers: keyless or scripted
    /// ([`capsaga_core::providers::ProviderSection::is_local`]).
    pub local: BTreeSet<String>,
}

/// Warn once per process about a model the price table does not know.
fn warn_unknown_model(model: &str) {
    static SEEN: OnceLock<Mutex<BTreeSet<String>>> = OnceLock::new();
    let seen = SEEN.get_or_init(|| Mutex::new(BTreeSet::new()));
    if let Ok(mut s) = seen.lock()
        && s.insert(model.to_string())
    {
        tracing::warn!(
            model,
            "model not in the price table: charged at the table's default rate"
        );
    }
}

impl Budget {
    /// Load the price table (`[budget] prices`, else `CAPSAGA_PRICES`, else
    /// the built-in one) and the caps.
    ///
    /// # Errors
    /// [`BudgetLoadError`].
    pub fn open(config: &Config, store: Arc<dyn Store>) -> Result<Budget, BudgetLoadError> {
        let path = config
            .policy
            .budget
            .prices
            .as_deref()
            .map(|p| config.resolve(p))
            .or_else(|| std::env::var_os("CAPSAGA_PRICES").map(Into::into));
        let policy_prices = path.is_some();
        let prices = match path {
            None => {
                PriceTable::parse(BUILTIN_PRICES).map_err(|error| BudgetLoadError::Invalid {
                    path: "built-in model_prices.json".into(),
                    error,
                })?
            }
            Some(p) => {
                let text = std::fs::read_to_string(&p).map_err(|e| BudgetLoadError::Read {
                    path: p.display().to_string(),
                    error: e.to_string(),
                })?;
                PriceTable::parse(&text).map_err(|error| BudgetLoadError::Invalid {
                    path: p.display().to_string(),
                    error,
                })?
            }
        };
        Ok(Budget {
            store,
            try_timeout_ms: config.policy.agent.retry_settings().timeout_ms,
            prices,
            caps: config.policy.budget.caps(),
            policy_prices,
            local: config
                .policy
                .providers
                .iter()
                .filter(|(_, p)| p.is_local())
                .map(|(n, _)| n.clone())
                .collect(),
        })
    }

    /// What today (UTC) has spent, USD.
    ///
    /// # Errors
    /// [`StoreError`].
    pub async fn day_spent(&self) -> Result<f64, StoreError> {
        self.store.day_spent(&today()).await
    }

    /// The budget state for the next call of a request that has spent
    /// `request_spent` USD: the day counts its spend and the reservations
    /// of calls in flight (the hard caps themselves are enforced by
    /// reservation, [`super::meter`]).
    ///
    /// # Errors
    /// [`StoreError`].
    pub async fn state(&self, request_spent: f64) -> Result<BudgetState, StoreError> {
        let day = today();
        let committed = self.store.day_spent(&day).await? + self.store.day_reserved(&day).await?;
        Ok(check(&self.caps, request_spent, committed))
    }

    /// The cost of a call (warning once for a model the table lacks).
    pub fn cost(&self, model: &str, input_tokens: u64, output_tokens: u64) -> Cost {
        let c = self.prices.cost(model, input_tokens, output_tokens);
        if !c.known_model {
            warn_unknown_model(model);
        }
        c
    }

    /// The cost of a call of `model` answered by the provider named
    /// `provider`. A local (keyless or scripted) provider's model is free unless the
    /// policy's own price table names it (the built-in table and any default
    /// rate never apply to it); any other model is priced by [`Budget::cost`].
    pub fn cost_for(
        &self,
        provider: &str,
        model: &str,
        input_tokens: u64,
        output_tokens: u64,
    ) -> Cost {
        if !self.local.contains(provider) {
            return self.cost(model, input_tokens, output_tokens);
        }
        if self.policy_prices && self.prices.price(model).1 {
            return self.prices.cost(model, input_tokens, output_tokens);
        }
        Cost {
            usd: 0.0,
            known_model: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_table_parses_and_scripted_is_free() {
        let t = PriceTable::parse(BUILTIN_PRICES).unwrap();
        assert_eq!(t.cost("scripted", 1000, 1000).usd, 0.0);
        assert!(t.price("claude-sonnet-4-5").1);
    }
}
