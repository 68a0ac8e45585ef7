//! `provider_keys`: provider keys sealed under `CAPSAGA_KEK`
//! (`capsaga_core::sealed`), shared by every host (each host needs the same
//! KEK to open them): the wrapped data key and the ciphertext, the KEK's id
//! and the last four characters, never the key. Each write appends a `KEY`
//! record (saga id `key:<name>`; who acted and the last four, nothing
//! sealed) to the one hash-chained log in the same transaction.

use super::super::StoreError;
use super::super::access::{KeyRow, KeyStore};
use super::log::append;
use super::{PgStore, execute, get, query, query_opt};
use crate::clock::now_rfc3339;
use async_trait::async_trait;
use capsaga_core::sealed::Sealed;
use serde_json::json;

#[async_trait]
impl KeyStore for PgStore {
    async fn put_key(&self, name: &str, sealed: &Sealed, by: &str) -> Result<KeyRow, StoreError> {
        let at = now_rfc3339();
        let (name, by, s) = (name.to_owned(), by.to_owned(), sealed.clone());
        self.write(move |c| {
            Box::pin(async move {
                execute(
                    c,
                    "INSERT INTO provider_keys (name, format, kek_id, wrapped_dek, ciphertext, last4, created_at, created_by) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                     ON CONFLICT (name) DO UPDATE SET format = excluded.format, kek_id = excluded.kek_id, wrapped_dek = excluded.wrapped_dek, ciphertext = excluded.ciphertext, last4 = excluded.last4, created_at = excluded.created_at, created_by = excluded.created_by",
                    &[&name, &s.format, &s.kek_id, &s.wrapped_dek, &s.ciphertext, &s.last4, &at, &by],
                )
                .await?;
                append(
                    c,
                    &format!("key:{name}"),
                    None,
                    "KEY",
                    &json!({"event": "sealed", "name": name, "last4": s.last4, "kek_id": s.kek_id, "by": by}),
                    &at,
                )
                .await?;
                Ok(KeyRow {
                    name,
                    last4: s.last4,
                    kek_id: s.kek_id,
                    created_at: at,
                    created_by: by,
                })
            })
        })
        .await
    }

    async fn sealed_key(&self, name: &str) -> Result<Option<Sealed>, StoreError> {
        let c = self.conn().await?;
        let row = query_opt(
            &c,
            "SELECT format, kek_id, wrapped_dek, ciphertext, last4 FROM provider_keys WHERE name = $1",
            &[&name],
        )
        .await?;
        row.map(|r| {
            Ok(Sealed {
                format: get(&r, 0)?,
                kek_id: get(&r, 1)?,
                wrapped_dek: get(&r, 2)?,
                ciphertext: get(&r, 3)?,
                last4: get(&r, 4)?,
            })
        })
        .transpose()
    }

    async fn keys(&self) -> Result<Vec<KeyRow>, StoreError> {
        let c = self.conn().await?;
        let rows = query(
            &c,
            "SELECT name, last4, kek_id, created_at, created_by FROM provider_keys ORDER BY name",
            &[],
        )
        .await?;
        rows.iter()
            .map(|r| {
                Ok(KeyRow {
                    name: get(r, 0)?,
                    last4: get(r, 1)?,
                    kek_id: get(r, 2)?,
                    created_at: get(r, 3)?,
                    created_by: get(r, 4)?,
                })
            })
            .collect()
    }

    async fn remove_key(&self, name: &str, by: &str) -> Result<bool, StoreError> {
        let at = now_rfc3339();
        let (name, by) = (name.to_owned(), by.to_owned());
        self.write(move |c| {
            Box::pin(async move {
                let n = execute(c, "DELETE FROM provider_keys WHERE name = $1", &[&name]).await?;
                if n > 0 {
                    append(
                        c,
                        &format!("key:{name}"),
                        None,
                        "KEY",
                        &json!({"event": "removed", "name": name, "by": by}),
                        &at,
                    )
                    .await?;
                }
                Ok(n > 0)
            })
        })
        .await
    }
}
