//! Failover across providers (seed 003, "Orden de proveedores y respaldo"):
//! for each call, the attempt order and the allowlists of
//! `capsaga_core::providers::attempt_order`; each provider is retried on a
//! retriable failure (429, 5xx, timeouts) with exponential backoff, honouring
//! `Retry-After` up to `max_backoff_ms` (a longer wait moves on to the next
//! provider at once); any other failure moves on too. Nothing allowed is a
//! [`ProviderError::NoAllowedProvider`], raised before anything is sent.
//! Under a budget ([`Provider::complete_metered`]) every try is reserved
//! and settled on its own: a try the budget refuses is not sent, and ends
//! the call with [`ProviderError::Budget`].

use super::meter::Meter;
use super::provider::{Attempt, ChatRequest, ChatResponse, Provider, ProviderError};
use capsaga_core::providers::{RetrySettings, RouteInput, attempt_order};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// The request's own routing wishes (from the CLI or an API caller): it can
/// prefer providers and narrow the allowlist, never widen it.
#[derive(Debug, Clone, Default)]
pub struct RequestRoute {
    /// Providers to try first.
    pub preferred: Vec<String>,
    /// The request's allowlist (`None`: no restriction of its own).
    pub allowed: Option<Vec<String>>,
}

/// The failover router: a [`Provider`] over several.
pub struct Router {
    /// Configured providers, in declaration order.
    providers: Vec<(String, Arc<dyn Provider>)>,
    role_orders: BTreeMap<String, Vec<String>>,
    global_order: Vec<String>,
    /// Operator's and environment's allowlists.
    operator_allowlists: Vec<Option<Vec<String>>>,
    request: RequestRoute,
    retry: RetrySettings,
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Router")
            .field(
                "providers",
                &self.providers.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .field("global_order", &self.global_order)
            .finish()
    }
}

impl Router {
    /// A router over `providers` (configured ones, in declaration order).
    pub fn new(
        providers: Vec<(String, Arc<dyn Provider>)>,
        role_orders: BTreeMap<String, Vec<String>>,
        global_order: Vec<String>,
        operator_allowlists: Vec<Option<Vec<String>>>,
        request: RequestRoute,
        retry: RetrySettings,
    ) -> Router {
        Router {
            providers,
            role_orders,
            global_order,
            operator_allowlists,
            request,
            retry,
        }
    }

    /// Names of the configured providers.
    pub fn configured(&self) -> Vec<String> {
        self.providers.iter().map(|(n, _)| n.clone()).collect()
    }

    /// The providers a call of `role` would try, in order.
    ///
    /// # Errors
    /// [`ProviderError::NoAllowedProvider`].
    pub fn order(&self, role: Option<&str>) -> Result<Vec<String>, ProviderError> {
        let configured = self.configured();
        let mut allowlists: Vec<Option<&[String]>> = self
            .operator_allowlists
            .iter()
            .map(|a| a.as_deref())
            .collect();
        allowlists.push(self.request.allowed.as_deref());
        Ok(attempt_order(&RouteInput {
            configured: &configured,
            role_order: role
                .and_then(|r| self.role_orders.get(r))
                .map(Vec::as_slice),
            preferred: &self.request.preferred,
            global_order: &self.global_order,
            allowlists,
        })?)
    }

    fn backoff(&self, retry: u32, retry_after: Option<u64>) -> Option<Duration> {
        let ms = match retry_after {
            Some(ms) if ms > self.retry.max_backoff_ms => return None,
            Some(ms) => ms,
            None => self
                .retry
                .backoff_ms
                .saturating_mul(1u64 << retry.min(20))
                .min(self.retry.max_backoff_ms),
        };
        Some(Duration::from_millis(ms))
    }
}

impl Router {
    /// The attempts of one call: each provider in order, each retried on a
    /// retriable failure; with a `meter`, every try reserves first (a
    /// refusal ends the call there, nothing more sent) and is settled
    /// after.
    async fn attempts(
        &self,
        request: &ChatRequest,
        meter: Option<&Meter<'_>>,
    ) -> Result<ChatResponse, ProviderError> {
        let order = self.order(request.role.as_deref())?;
        let mut attempts: Vec<Attempt> = Vec::new();
        for name in &order {
            let Some((_, p)) = self.providers.iter().find(|(n, _)| n == name) else {
                continue;
            };
            let model = p.model_for(request.tier);
            let mut retry = 0u32;
            loop {
                let ticket = match meter {
                    Some(m) => Some(m.reserve(name, &model, request).await?),
                    None => None,
                };
                let res = p.complete(request).await;
                if let (Some(m), Some(t)) = (meter, ticket) {
                    match &res {
                        Ok(a) => m.settle(t, Some(a), Default::default()).await,
                        Err(e) => m.settle(t, None, e.billed()).await,
                    }
                }
                match res {
                    Ok(mut resp) => {
                        attempts.push(Attempt {
                            provider: name.clone(),
                            model: resp.model.clone(),
                            status: Some(200),
                            error: None,
                            kind: None,
                            usage: Default::default(),
                        });
                        resp.attempts = attempts;
                        return Ok(resp);
                    }
                    Err(e) => {
                        let (status, retriable, retry_after, usage) = match &e {
                            ProviderError::Failed {
                                status,
                                retriable,
                                retry_after_ms,
                                usage,
                                ..
                            } => (*status, *retriable, *retry_after_ms, *usage),
                            _ => (None, false, None, Default::default()),
                        };
                        tracing::warn!(provider = %name, retry, "model call failed: {e}");
                        attempts.push(Attempt {
                            provider: name.clone(),
                            model: model.clone(),
                            status,
                            error: Some(e.to_string()),
                            kind: e.kind(),
                            usage,
                        });
                        if retriable
                            && retry < self.retry.retries
                            && let Some(wait) = self.backoff(retry, retry_after)
                        {
                            tokio::time::sleep(wait).await;
                            retry += 1;
                            continue;
                        }
                        break;
                    }
                }
            }
        }
        Err(ProviderError::AllFailed(attempts))
    }
}

#[async_trait::async_trait]
impl Provider for Router {
    fn name(&self) -> &str {
        "router"
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
        self.attempts(request, None).await
    }

    async fn complete_metered(
        &self,
        request: &ChatRequest,
        meter: &Meter<'_>,
    ) -> Result<ChatResponse, ProviderError> {
        self.attempts(request, Some(meter)).await
    }
}
