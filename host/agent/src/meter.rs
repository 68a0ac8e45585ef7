//! The meter of one request (an agent turn, its sub-questions included):
//! every model call reserves its maximum estimate before anything is sent
//! and settles it afterwards (seed 003; the rules are
//! `capsaga_core::budget::reserve`, the ledger is the store's
//! `BudgetStore`).
//!
//! Before each call ([`Meter::reserve`], called by the provider for each
//! try, `Provider::complete_metered` in `super::provider`):
//! 1. the estimate: the request's prompt tokens estimated from its bytes
//!    plus its `max_tokens`, at the price of the model asked (a local
//!    provider's model is free unless the policy's own table prices it),
//!    each side scaled by the largest ratio of charge to estimate this
//!    provider's reports for this model showed in the last
//!    `capsaga_core::budget::learn::LEARN_DAYS` days (read from the store;
//!    while nothing is learnt, one priced call of a provider and model at
//!    a time in this process, [`super::first_report`]);
//! 2. the per-request hard cap: this request's charges plus its
//!    reservations in flight plus the estimate (in memory: a request lives
//!    in one process);
//! 3. the per-day hard cap: the store reserves the estimate in one write
//!    transaction against the day's spend and every reservation in flight,
//!    of every process and host sharing the store.
//!
//! A refusal is [`ProviderError::Budget`]: nothing is sent. After the call
//! ([`Meter::settle`]) the reservation is replaced by the larger of the
//! cost of the usage the provider reported and the host's recomputation
//! (see [`Meter::settle`]), and what the charge showed of each side's
//! ratio to its estimate is recorded with it (the next reservations
//! learn it); each settled try becomes a [`Charge`], which the turn takes
//! ([`Meter::take`]) to write its trace.
//!
//! A try abandoned in flight (the turn's future dropped: a REST client
//! gone, a session closed, a task aborted by the kill switch) is charged
//! its whole reservation when its [`Ticket`] is dropped unsettled: the
//! request may have reached the provider and been billed, and an
//! abandoned try that cost nothing in the ledger would let a client that
//! disconnects after each request spend past the day's cap. A reservation
//! whose process dies expires after the try's deadline plus a minute.

use super::budget::Budget;
use super::chat::{ChatRequest, ChatResponse, ProviderError, Usage};
use super::first_report::{self, FirstReport};
use capsaga_core::budget::learn::{LEARN_DAYS, Ratios, observed, scaled};
use capsaga_core::budget::reserve::{
    admits, estimate_prompt_tokens, floor_tokens, refusal, reservation_ttl_ms, settled_usd,
};
use capsaga_store::clock::today;
use capsaga_store::{Learnt, NewReservation, Reserved, Store, StoreError};
use std::sync::{Arc, Mutex};

/// One settled try of a model call.
#[derive(Debug, Clone, PartialEq)]
pub struct Charge {
    /// The provider asked.
    pub provider: String,
    /// The model that answered (or was asked, for a failed try).
    pub model: String,
    /// The tokens the provider reported (billed), as recorded.
    pub usage: Usage,
    /// What it was charged, USD.
    pub usd: f64,
    /// True for the try that answered.
    pub answered: bool,
}

/// A reservation held for one try in flight. Settle it with
/// [`Meter::settle`]; dropped unsettled, it is charged its whole estimate
/// (see the module documentation).
pub struct Ticket {
    id: String,
    day: String,
    /// What is reserved (the estimate, scaled by what was learnt), USD.
    usd: f64,
    /// The estimate of each side before scaling (input, output), USD.
    estimate: (f64, f64),
    provider: String,
    model: String,
    prompt_bytes: u64,
    /// The ledger, while the ticket is unsettled; `None` once settled.
    ledger: Option<Arc<dyn Store>>,
    /// The first-report turn of its provider and model, when nothing was
    /// learnt of them (released with the ticket, after its settlement).
    _first: Option<FirstReport>,
}

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket")
            .field("id", &self.id)
            .field("day", &self.day)
            .field("usd", &self.usd)
            .field("provider", &self.provider)
            .field("model", &self.model)
            .field("settled", &self.ledger.is_none())
            .finish()
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let Some(store) = self.ledger.take() else {
            return;
        };
        let (id, day, usd) = (self.id.clone(), self.day.clone(), self.usd);
        tracing::warn!(
            reservation = %id,
            usd,
            "a model call was abandoned in flight: charged its whole estimate"
        );
        // Drop cannot wait: the settlement runs on the runtime the try ran
        // on. Without one (the runtime is shutting down) the reservation
        // expires instead, as a dead process's does.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                if let Err(e) = store.settle_spend(&id, &day, usd, 0, 0).await {
                    tracing::warn!(reservation = %id, error = %e, "abandoned reservation not settled: it expires");
                }
            });
        }
    }
}

#[derive(Debug, Default)]
struct State {
    request_spent: f64,
    request_reserved: f64,
    charges: Vec<Charge>,
    error: Option<StoreError>,
}

/// The meter of one request.
#[derive(Debug)]
pub struct Meter<'b> {
    budget: &'b Budget,
    ttl_ms: u64,
    state: Mutex<State>,
}

/// Bytes of what a request sends, and how many messages (system prompt,
/// conversation with its tool calls, tool definitions).
pub fn request_bytes(r: &ChatRequest) -> (u64, u64) {
    let messages: usize = r
        .messages
        .iter()
        .map(|m| {
            m.content.len()
                + m.tool_calls
                    .iter()
                    .map(|c| c.name.len() + c.arguments.len() + c.id.len())
                    .sum::<usize>()
        })
        .sum();
    let tools: usize = r
        .tools
        .iter()
        .map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len())
        .sum();
    (
        (r.system.len() + messages + tools) as u64,
        r.messages.len() as u64 + 1,
    )
}

/// Bytes of what an answer returned (text and tool calls).
fn answer_bytes(a: &ChatResponse) -> u64 {
    (a.text.len()
        + a.tool_calls
            .iter()
            .map(|c| c.name.len() + c.arguments.len())
            .sum::<usize>()) as u64
}

impl<'b> Meter<'b> {
    /// A meter for a new request under `budget`.
    pub fn new(budget: &'b Budget) -> Meter<'b> {
        Meter {
            budget,
            ttl_ms: reservation_ttl_ms(budget.try_timeout_ms),
            state: Mutex::new(State::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic elsewhere cannot leave the counters half-written: every
        // update below is a single assignment.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What this request has been charged so far, USD.
    pub fn request_spent(&self) -> f64 {
        self.lock().request_spent
    }

    /// What `provider`'s reports for `model` taught (the largest ratios of
    /// the learning window), and, when nothing was learnt yet and the call
    /// is priced, the first-report turn this call then holds
    /// ([`super::first_report`]: it waits while another call of the same
    /// provider and model holds it, then reads the store again).
    async fn learnt(
        &self,
        provider: &str,
        model: &str,
        estimate: (f64, f64),
    ) -> Result<(Ratios, Option<FirstReport>), ProviderError> {
        let since = capsaga_store::clock::days_ago(LEARN_DAYS - 1);
        let read = || async {
            match self
                .budget
                .store
                .usage_ratios(provider, model, &since)
                .await
            {
                Ok(r) => Ok(r),
                Err(e) => {
                    let why = format!("the budget ledger cannot be read: {e}");
                    self.lock().error.get_or_insert(e);
                    Err(ProviderError::Budget(why))
                }
            }
        };
        let learnt = read().await?;
        // A free call (or one whose estimate is not a number) passes no cap.
        let priced = estimate.0 + estimate.1 > 0.0;
        if learnt.known() || !priced {
            return Ok((learnt, None));
        }
        let turn = first_report::wait(provider, model).await;
        let learnt = read().await?;
        if learnt.known() {
            return Ok((learnt, None));
        }
        Ok((learnt, Some(turn)))
    }

    /// Reserve the maximum estimate of `request` sent to `model` of
    /// `provider` (see the module documentation).
    ///
    /// # Errors
    /// [`ProviderError::Budget`] when a hard cap refuses it (or the ledger
    /// cannot be written: the store's error is kept for [`Meter::take`]);
    /// nothing was reserved and nothing may be sent.
    pub async fn reserve(
        &self,
        provider: &str,
        model: &str,
        request: &ChatRequest,
    ) -> Result<Ticket, ProviderError> {
        let (bytes, messages) = request_bytes(request);
        let prompt = estimate_prompt_tokens(bytes, messages);
        let b = self.budget;
        let estimate = (
            b.cost_for(provider, model, prompt, 0).usd,
            b.cost_for(provider, model, 0, u64::from(request.max_tokens))
                .usd,
        );
        let (learnt, first) = self.learnt(provider, model, estimate).await?;
        let usd = scaled(estimate, learnt);
        let caps = self.budget.caps;
        {
            let mut st = self.lock();
            if !admits(
                caps.request_hard_usd,
                st.request_spent,
                st.request_reserved,
                usd,
            ) {
                return Err(ProviderError::Budget(refusal(
                    "per-request",
                    caps.request_hard_usd.unwrap_or_default(),
                    st.request_spent,
                    st.request_reserved,
                    usd,
                )));
            }
            st.request_reserved += usd;
        }
        let ticket = Ticket {
            id: uuid::Uuid::new_v4().to_string(),
            day: today(),
            usd,
            estimate,
            provider: provider.to_string(),
            model: model.to_string(),
            prompt_bytes: bytes,
            ledger: None,
            _first: first,
        };
        let holder = format!("{provider}/{model} pid {}", std::process::id());
        let made = self
            .budget
            .store
            .reserve_spend(&NewReservation {
                id: &ticket.id,
                day: &ticket.day,
                usd,
                day_hard_usd: caps.day_hard_usd,
                ttl_ms: self.ttl_ms,
                holder: &holder,
            })
            .await;
        let refused = match made {
            Ok(Reserved::Made) => {
                // From here on a dropped ticket is charged (not before: a
                // refused or failed reservation holds nothing).
                let mut ticket = ticket;
                ticket.ledger = Some(self.budget.store.clone());
                return Ok(ticket);
            }
            Ok(Reserved::Refused {
                spent_usd,
                reserved_usd,
            }) => refusal(
                "per-day",
                caps.day_hard_usd.unwrap_or_default(),
                spent_usd,
                reserved_usd,
                usd,
            ),
            Err(e) => {
                let why = format!("the budget ledger cannot be written: {e}");
                self.lock().error.get_or_insert(e);
                why
            }
        };
        self.lock().request_reserved -= usd;
        Err(ProviderError::Budget(refused))
    }

    /// Settle `ticket` with the outcome of its try: an answer, or a failure
    /// whose response reported `billed` tokens. A try that was charged
    /// something also records, per side, what it was charged over what its
    /// reservation estimated (`capsaga_core::budget::learn`): the next
    /// reservations of the same provider and model are scaled by it.
    ///
    /// An answer is charged the larger of the cost of the usage it
    /// reported (at the rate of the model it names) and the host's
    /// recomputation: each token count at least one token per
    /// `FLOOR_BYTES_PER_TOKEN` bytes of what was sent or received (a
    /// provider reporting no usage is not free), at the higher of the rates
    /// of the model asked and the model named. A failed try is charged the
    /// usage its response reported, if any. The reservation is replaced in
    /// the store in one transaction.
    pub async fn settle(&self, mut ticket: Ticket, answer: Option<&ChatResponse>, billed: Usage) {
        let b = self.budget;
        // Settled here, not by the drop guard (if this future is dropped
        // before the write below, the reservation expires).
        ticket.ledger = None;
        // Per side, what was charged (input, output), USD: the counts the
        // charge believes at the higher of the rates it uses.
        let (charge, store_usage, charged) = match answer {
            Some(a) => {
                let u = a.usage;
                let reported = b
                    .cost_for(&a.provider, &a.model, u.input_tokens, u.output_tokens)
                    .usd;
                let input = u.input_tokens.max(floor_tokens(ticket.prompt_bytes));
                let output = u.output_tokens.max(floor_tokens(answer_bytes(a)));
                let asked = if ticket.model.is_empty() {
                    a.model.as_str()
                } else {
                    ticket.model.as_str()
                };
                let recomputed = b
                    .cost_for(&a.provider, asked, input, output)
                    .usd
                    .max(b.cost_for(&a.provider, &a.model, input, output).usd);
                let side = |i: u64, o: u64| {
                    b.cost_for(&a.provider, asked, i, o)
                        .usd
                        .max(b.cost_for(&a.provider, &a.model, i, o).usd)
                };
                (
                    Charge {
                        provider: a.provider.clone(),
                        model: a.model.clone(),
                        usage: u,
                        usd: settled_usd(reported, recomputed),
                        answered: true,
                    },
                    u,
                    (side(input, 0), side(0, output)),
                )
            }
            None => {
                let cost = |i: u64, o: u64| b.cost_for(&ticket.provider, &ticket.model, i, o).usd;
                (
                    Charge {
                        provider: ticket.provider.clone(),
                        model: ticket.model.clone(),
                        usage: billed,
                        usd: settled_usd(cost(billed.input_tokens, billed.output_tokens), 0.0),
                        answered: false,
                    },
                    billed,
                    (cost(billed.input_tokens, 0), cost(0, billed.output_tokens)),
                )
            }
        };
        // What this report teaches the next reservations of this provider
        // and model (a try that reported nothing teaches nothing).
        let tokens = (store_usage.input_tokens, store_usage.output_tokens);
        let learnt = (charge.usd > 0.0).then(|| Learnt {
            provider: &ticket.provider,
            model: &ticket.model,
            reserved_usd: ticket.usd,
            ratios: observed(ticket.estimate, charged),
        });
        let settled = b
            .store
            .settle_spend_learnt(&ticket.id, &ticket.day, charge.usd, tokens, learnt.as_ref())
            .await;
        let mut st = self.lock();
        st.request_reserved -= ticket.usd;
        st.request_spent += charge.usd;
        st.charges.push(charge);
        if let Err(e) = settled {
            st.error.get_or_insert(e);
        }
    }

    /// The charges settled since the last call, in order.
    ///
    /// # Errors
    /// The first [`StoreError`] the ledger met since (a reservation not
    /// settled in the store expires on its own).
    pub fn take(&self) -> Result<Vec<Charge>, StoreError> {
        let mut st = self.lock();
        if let Some(e) = st.error.take() {
            return Err(e);
        }
        Ok(std::mem::take(&mut st.charges))
    }
}
