//! `tokens`: named tokens, stored as the SHA-256 of their secret, shared by
//! every host (a token made or revoked on one host authenticates, or stops
//! authenticating, on all of them at their next check). Each write appends
//! a `TOKEN` record (saga id `token:<name>`; the role and who acted, never
//! the hash) to the one hash-chained log in the same transaction, as the
//! SQLite store does.

use super::super::StoreError;
use super::super::access::{ActiveToken, TokenOpError, TokenRow, TokenStore};
use super::log::log_record;
use super::{Conn, PgStore, execute, get, query, query_opt};
use crate::clock::now_rfc3339;
use crate::decode::{self, TOKEN_COLUMNS as COLUMNS};
use crate::records;
use async_trait::async_trait;
use capsaga_core::principal::Role;

async fn one(c: &Conn, name: &str) -> Result<Option<TokenRow>, StoreError> {
    query_opt(
        c,
        &format!("SELECT {COLUMNS} FROM tokens WHERE name = $1"),
        &[&name],
    )
    .await?
    .as_ref()
    .map(decode::token)
    .transpose()
}

#[async_trait]
impl TokenStore for PgStore {
    async fn create_token(
        &self,
        name: &str,
        role: Role,
        secret_sha256: &[u8; 32],
        by: &str,
    ) -> Result<TokenRow, TokenOpError> {
        let at = now_rfc3339();
        let shown = name.to_owned();
        let (name, by, hash) = (name.to_owned(), by.to_owned(), hex::encode(secret_sha256));
        let out = self
            .write(move |c| {
                Box::pin(async move {
                    // The unique name and hash decide between hosts racing
                    // for one name: the loser inserts nothing.
                    let n = execute(
                        c,
                        "INSERT INTO tokens (name, role, secret_sha256, created_at, created_by) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
                        &[&name, &role.as_str(), &hash, &at, &by],
                    )
                    .await?;
                    if n == 0 {
                        return Ok(None);
                    }
                    log_record(c, &records::token_created(&name, role, &by), &at).await?;
                    one(c, &name).await
                })
            })
            .await?;
        out.ok_or(TokenOpError::NameTaken(shown))
    }

    async fn revoke_token(&self, name: &str, by: &str) -> Result<TokenRow, TokenOpError> {
        let at = now_rfc3339();
        let (n, by) = (name.to_owned(), by.to_owned());
        let found: Result<TokenRow, Option<TokenRow>> = self
            .write(move |c| {
                Box::pin(async move {
                    let moved = execute(
                        c,
                        "UPDATE tokens SET revoked_at = $2, revoked_by = $3 WHERE name = $1 AND revoked_at IS NULL",
                        &[&n, &at, &by],
                    )
                    .await?;
                    if moved == 0 {
                        return Ok(Err(one(c, &n).await?));
                    }
                    log_record(c, &records::token_revoked(&n, &by), &at).await?;
                    Ok(one(c, &n).await?.ok_or(None))
                })
            })
            .await?;
        found.map_err(|e| match e {
            None => TokenOpError::NotFound(name.to_string()),
            Some(_) => TokenOpError::AlreadyRevoked(name.to_string()),
        })
    }

    async fn tokens(&self) -> Result<Vec<TokenRow>, StoreError> {
        let c = self.conn().await?;
        let rows = query(
            &c,
            &format!("SELECT {COLUMNS} FROM tokens ORDER BY name"),
            &[],
        )
        .await?;
        rows.iter().map(decode::token).collect()
    }

    async fn active_tokens(&self) -> Result<Vec<ActiveToken>, StoreError> {
        let c = self.conn().await?;
        let rows = query(&c, decode::ACTIVE_TOKENS, &[]).await?;
        rows.iter().map(decode::active_token).collect()
    }

    async fn any_token_ever(&self) -> Result<bool, StoreError> {
        let c = self.conn().await?;
        let rows = query(&c, "SELECT EXISTS (SELECT 1 FROM tokens)", &[]).await?;
        rows.first().map_or(Ok(false), |r| get(r, 0))
    }
}
