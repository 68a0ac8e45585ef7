//! `tokens`: named tokens and their roles (the SHA-256 of each secret,
//! never the secret). Each change appends a `TOKEN` record (saga id
//! `token:<name>`) to the hash-chained log in the same transaction. A
//! name, or a secret, is taken once: the table's unique keys decide
//! between writers racing for one (the loser inserts nothing).

use crate::StoreError;
use crate::access::{ActiveToken, TokenOpError, TokenRow};
use crate::decode::{self, Cells, TOKEN_COLUMNS as COLUMNS};
use crate::records;
use crate::seam::{Tx, first};
use capsaga_core::principal::Role;

async fn one<X: Tx>(tx: &X, name: &str) -> Result<Option<TokenRow>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM tokens WHERE name = $1");
    first(tx, &sql, &[name.into()])
        .await?
        .as_ref()
        .map(decode::token)
        .transpose()
}

/// Create the token `name` of `role` whose secret hashes to `hash` (hex),
/// by `by` at `at`; logged.
///
/// # Errors
/// The dialect's; inside, [`TokenOpError::NameTaken`] when the name or the
/// secret is taken.
pub(crate) async fn create<X: Tx>(
    tx: &X,
    name: &str,
    role: Role,
    hash: &str,
    by: &str,
    at: &str,
) -> Result<Result<TokenRow, TokenOpError>, StoreError> {
    let n = tx
        .exec(
            "INSERT INTO tokens (name, role, secret_sha256, created_at, created_by) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
            &[name.into(), role.as_str().into(), hash.into(), at.into(), by.into()],
        )
        .await?;
    let taken = || TokenOpError::NameTaken(name.to_string());
    if n == 0 {
        return Ok(Err(taken()));
    }
    tx.log(&records::token_created(name, role, by), at).await?;
    Ok(one(tx, name).await?.ok_or_else(taken))
}

/// Revoke the token `name` by `by` at `at`; logged.
///
/// # Errors
/// The dialect's; inside, [`TokenOpError::NotFound`] or
/// [`TokenOpError::AlreadyRevoked`].
pub(crate) async fn revoke<X: Tx>(
    tx: &X,
    name: &str,
    by: &str,
    at: &str,
) -> Result<Result<TokenRow, TokenOpError>, StoreError> {
    let moved = tx
        .exec(
            "UPDATE tokens SET revoked_at = $2, revoked_by = $3 WHERE name = $1 AND revoked_at IS NULL",
            &[name.into(), at.into(), by.into()],
        )
        .await?;
    let missing = || TokenOpError::NotFound(name.to_string());
    if moved == 0 {
        return Ok(Err(match one(tx, name).await? {
            None => missing(),
            Some(_) => TokenOpError::AlreadyRevoked(name.to_string()),
        }));
    }
    tx.log(&records::token_revoked(name, by), at).await?;
    Ok(one(tx, name).await?.ok_or_else(missing))
}

/// Every token, by name.
///
/// # Errors
/// The dialect's.
pub(crate) async fn list<X: Tx>(tx: &X) -> Result<Vec<TokenRow>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM tokens ORDER BY name");
    tx.rows(&sql, &[])
        .await?
        .iter()
        .map(decode::token)
        .collect()
}

/// The tokens not revoked, with their secrets' hashes.
///
/// # Errors
/// The dialect's; [`StoreError::Decode`] for a bad role or hash.
pub(crate) async fn active<X: Tx>(tx: &X) -> Result<Vec<ActiveToken>, StoreError> {
    let rows = tx.rows(decode::ACTIVE_TOKENS, &[]).await?;
    rows.iter().map(decode::active_token).collect()
}

/// Whether any token was ever created (revoked ones count).
///
/// # Errors
/// The dialect's.
pub(crate) async fn any_ever<X: Tx>(tx: &X) -> Result<bool, StoreError> {
    let row = first(tx, "SELECT EXISTS (SELECT 1 FROM tokens)", &[]).await?;
    row.map_or(Ok(false), |r| r.cell(0))
}
