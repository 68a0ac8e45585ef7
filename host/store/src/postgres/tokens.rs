//! `tokens` ([`crate::logic::tokens`]) on PostgreSQL, shared by every host.

use super::super::StoreError;
use super::super::access::{ActiveToken, TokenOpError, TokenRow, TokenStore};
use super::PgStore;
use super::seam::Pg;
use crate::clock::now_rfc3339;
use crate::logic::tokens;
use async_trait::async_trait;
use capsaga_core::principal::Role;

#[async_trait]
impl TokenStore for PgStore {
    async fn create_token(
        &self,
        name: &str,
        role: Role,
        secret_sha256: &[u8; 32],
        by: &str,
    ) -> Result<TokenRow, TokenOpError> {
        let (n, by, hash, at) = (
            name.to_owned(),
            by.to_owned(),
            hex::encode(secret_sha256),
            now_rfc3339(),
        );
        self.write(move |c| {
            Box::pin(async move { tokens::create(&Pg(c), &n, role, &hash, &by, &at).await })
        })
        .await?
    }

    async fn revoke_token(&self, name: &str, by: &str) -> Result<TokenRow, TokenOpError> {
        let (n, by, at) = (name.to_owned(), by.to_owned(), now_rfc3339());
        self.write(move |c| Box::pin(async move { tokens::revoke(&Pg(c), &n, &by, &at).await }))
            .await?
    }

    async fn tokens(&self) -> Result<Vec<TokenRow>, StoreError> {
        tokens::list(&Pg(&*self.conn().await?)).await
    }

    async fn active_tokens(&self) -> Result<Vec<ActiveToken>, StoreError> {
        tokens::active(&Pg(&*self.conn().await?)).await
    }

    async fn any_token_ever(&self) -> Result<bool, StoreError> {
        tokens::any_ever(&Pg(&*self.conn().await?)).await
    }
}
