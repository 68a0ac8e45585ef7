//! `provider_keys`: provider keys sealed under `CAPSAGA_KEK`
//! (`capsaga_secrets::sealed`): the wrapped data key and the ciphertext, the
//! KEK's id and the last four characters, never the key. Each write
//! appends a `KEY` record (saga id `key:<name>`; who acted and the last
//! four, nothing sealed) to the hash-chained log in the same transaction.

use crate::StoreError;
use crate::access::KeyRow;
use crate::decode::{self, KEY_COLUMNS, SEALED_COLUMNS};
use crate::records;
use crate::seam::{Arg, Tx, first};
use capsaga_secrets::sealed::Sealed;

/// Store `s` as the key `name` (replacing one of that name), by `by`, at
/// `at`; logged.
///
/// # Errors
/// The dialect's.
pub(crate) async fn put<X: Tx>(
    tx: &X,
    name: &str,
    s: &Sealed,
    by: &str,
    at: &str,
) -> Result<KeyRow, StoreError> {
    tx.exec(
        "INSERT INTO provider_keys (name, format, kek_id, wrapped_dek, ciphertext, last4, created_at, created_by) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT (name) DO UPDATE SET format = excluded.format, kek_id = excluded.kek_id, wrapped_dek = excluded.wrapped_dek, ciphertext = excluded.ciphertext, last4 = excluded.last4, created_at = excluded.created_at, created_by = excluded.created_by",
        &[
            name.into(),
            (&s.format).into(),
            (&s.kek_id).into(),
            s.wrapped_dek.as_slice().into(),
            s.ciphertext.as_slice().into(),
            (&s.last4).into(),
            at.into(),
            by.into(),
        ],
    )
    .await?;
    tx.log(&records::key_sealed(name, s, by), at).await?;
    Ok(KeyRow {
        name: name.to_string(),
        last4: s.last4.clone(),
        kek_id: s.kek_id.clone(),
        created_at: at.to_string(),
        created_by: by.to_string(),
    })
}

/// The sealed key `name`, if stored.
///
/// # Errors
/// The dialect's.
pub(crate) async fn sealed<X: Tx>(tx: &X, name: &str) -> Result<Option<Sealed>, StoreError> {
    let sql = format!("SELECT {SEALED_COLUMNS} FROM provider_keys WHERE name = $1");
    first(tx, &sql, &[name.into()])
        .await?
        .as_ref()
        .map(decode::sealed)
        .transpose()
}

/// Every stored key, by name (nothing sealed).
///
/// # Errors
/// The dialect's.
pub(crate) async fn list<X: Tx>(tx: &X) -> Result<Vec<KeyRow>, StoreError> {
    let sql = format!("SELECT {KEY_COLUMNS} FROM provider_keys ORDER BY name");
    tx.rows(&sql, &[]).await?.iter().map(decode::key).collect()
}

/// Remove the key `name` by `by` at `at` (logged when there was one);
/// whether there was.
///
/// # Errors
/// The dialect's.
pub(crate) async fn remove<X: Tx>(
    tx: &X,
    name: &str,
    by: &str,
    at: &str,
) -> Result<bool, StoreError> {
    let n = tx
        .exec(
            "DELETE FROM provider_keys WHERE name = $1",
            &[Arg::from(name)],
        )
        .await?;
    if n > 0 {
        tx.log(&records::key_removed(name, by), at).await?;
    }
    Ok(n > 0)
}
