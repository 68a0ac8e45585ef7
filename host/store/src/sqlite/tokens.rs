//! `tokens`: named tokens, stored as the SHA-256 of their secret. Each
//! write appends a `TOKEN` record (saga id `token:<name>`; the role and who
//! acted, never the hash) to the hash-chained log in the same transaction.

use super::super::StoreError;
use super::super::access::{ActiveToken, TokenOpError, TokenRow, TokenStore};
use super::Cached;
use super::SqliteStore;
use super::log::log_record;
use super::{all, first};
use crate::clock::now_rfc3339;
use crate::decode::{self, TOKEN_COLUMNS as COLUMNS};
use crate::records;
use async_trait::async_trait;
use capsaga_core::principal::Role;
use rusqlite::params;

fn one(c: &rusqlite::Connection, name: &str) -> Result<Option<TokenRow>, StoreError> {
    first(
        c,
        &format!("SELECT {COLUMNS} FROM tokens WHERE name = ?1"),
        params![name],
        |r| decode::token(r),
    )
}

#[async_trait]
impl TokenStore for SqliteStore {
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
            .write(move |tx| {
                let taken: bool = tx.row(
                    "SELECT EXISTS(SELECT 1 FROM tokens WHERE name = ?1 OR secret_sha256 = ?2)",
                    params![name, hash],
                    |r| r.get(0),
                )?;
                if taken {
                    return Ok(None);
                }
                tx.exec(
                    "INSERT INTO tokens (name, role, secret_sha256, created_at, created_by) VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![name, role.as_str(), hash, at, by],
                )?;
                log_record(tx, &records::token_created(&name, role, &by), &at)?;
                one(tx, &name)
            })
            .await?;
        out.ok_or(TokenOpError::NameTaken(shown))
    }

    async fn revoke_token(&self, name: &str, by: &str) -> Result<TokenRow, TokenOpError> {
        let at = now_rfc3339();
        let (n, by) = (name.to_owned(), by.to_owned());
        let found: Result<TokenRow, Option<TokenRow>> = self
            .write(move |tx| {
                let Some(row) = one(tx, &n)? else {
                    return Ok(Err(None));
                };
                if row.revoked_at.is_some() {
                    return Ok(Err(Some(row)));
                }
                tx.exec(
                    "UPDATE tokens SET revoked_at = ?2, revoked_by = ?3 WHERE name = ?1 AND revoked_at IS NULL",
                    params![n, at, by],
                )?;
                log_record(tx, &records::token_revoked(&n, &by), &at)?;
                Ok(one(tx, &n)?.ok_or(None))
            })
            .await?;
        found.map_err(|e| match e {
            None => TokenOpError::NotFound(name.to_string()),
            Some(_) => TokenOpError::AlreadyRevoked(name.to_string()),
        })
    }

    async fn tokens(&self) -> Result<Vec<TokenRow>, StoreError> {
        self.read(|c| {
            all(
                c,
                &format!("SELECT {COLUMNS} FROM tokens ORDER BY name"),
                [],
                |r| decode::token(r),
            )
        })
    }

    async fn active_tokens(&self) -> Result<Vec<ActiveToken>, StoreError> {
        self.read(|c| all(c, decode::ACTIVE_TOKENS, [], |r| decode::active_token(r)))
    }

    async fn any_token_ever(&self) -> Result<bool, StoreError> {
        self.read(|c| Ok(c.row("SELECT EXISTS(SELECT 1 FROM tokens)", [], |r| r.get(0))?))
    }
}
