//! The model provider abstraction: one trait every provider implements
//! (scripted, OpenAI-compatible, Anthropic), over the provider-neutral chat
//! records of [`super::chat`] (re-exported here).

pub use super::chat::{
    Attempt, ChatRequest, ChatResponse, FailureKind, FinishReason, Message, ProviderError, Role,
    Tier, ToolCall, ToolChoice, ToolSpec, Usage,
};

/// A model provider.
#[async_trait::async_trait]
pub trait Provider: Send + Sync {
    /// The provider's name, e.g. `scripted`, `openai`, `anthropic`.
    fn name(&self) -> &str;

    /// The model a request of `tier` goes to (for the trace and attempts).
    fn model_for(&self, tier: Tier) -> String {
        let _ = tier;
        String::new()
    }

    /// One chat completion with native tool calling.
    ///
    /// # Errors
    /// [`ProviderError`].
    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ProviderError>;

    /// [`Provider::complete`] under a budget: every try (every request
    /// sent) reserves its maximum estimate with `meter` first and is
    /// settled after. This default makes one try; a provider that makes
    /// several (the failover router) meters each.
    ///
    /// # Errors
    /// [`ProviderError::Budget`] when the reservation is refused (nothing
    /// sent), else [`Provider::complete`]'s.
    async fn complete_metered(
        &self,
        request: &ChatRequest,
        meter: &super::meter::Meter<'_>,
    ) -> Result<ChatResponse, ProviderError> {
        let ticket = meter
            .reserve(self.name(), &self.model_for(request.tier), request)
            .await?;
        let res = self.complete(request).await;
        match &res {
            Ok(a) => meter.settle(ticket, Some(a), Usage::default()).await,
            Err(e) => meter.settle(ticket, None, e.billed()).await,
        }
        res
    }
}
