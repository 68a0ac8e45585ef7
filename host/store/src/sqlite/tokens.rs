//! `tokens` ([`crate::logic::tokens`]) on SQLite.

use super::super::StoreError;
use super::super::access::{ActiveToken, TokenOpError, TokenRow, TokenStore};
use super::SqliteStore;
use super::seam::Lite;
use crate::clock::now_rfc3339;
use crate::logic::tokens;
use crate::seam::now;
use async_trait::async_trait;
use capsaga_core::principal::Role;

#[async_trait]
impl TokenStore for SqliteStore {
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
        self.write(move |tx| now(tokens::create(&Lite::write(tx), &n, role, &hash, &by, &at)))
            .await?
    }

    async fn revoke_token(&self, name: &str, by: &str) -> Result<TokenRow, TokenOpError> {
        let (n, by, at) = (name.to_owned(), by.to_owned(), now_rfc3339());
        self.write(move |tx| now(tokens::revoke(&Lite::write(tx), &n, &by, &at)))
            .await?
    }

    async fn tokens(&self) -> Result<Vec<TokenRow>, StoreError> {
        self.read(|c| now(tokens::list(&Lite::read(c))))
    }

    async fn active_tokens(&self) -> Result<Vec<ActiveToken>, StoreError> {
        self.read(|c| now(tokens::active(&Lite::read(c))))
    }

    async fn any_token_ever(&self) -> Result<bool, StoreError> {
        self.read(|c| now(tokens::any_ever(&Lite::read(c))))
    }
}
