//! `provider_keys`: provider keys sealed under `CAPSAGA_KEK`
//! (`capsaga_core::sealed`), shared by every host (each host needs the same
//! KEK to open them): the wrapped data key and the ciphertext, the KEK's id
//! and the last four characters, never the key. Each write appends a `KEY`
//! record (saga id `key:<name>`; who acted and the last four, nothing
//! sealed) to the one hash-chained log in the same transaction.

use super::super::StoreError;
use super::super::access::{KeyRow, KeyStore};
use super::log::log_record;
use super::{PgStore, execute, query, query_opt};
use crate::clock::now_rfc3339;
use crate::decode::{self, KEY_COLUMNS, SEALED_COLUMNS};
use crate::records;
use async_trait::async_trait;
use capsaga_core::sealed::Sealed;

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
                log_record(c, &records::key_sealed(&name, &s, &by), &at).await?;
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
            &format!("SELECT {SEALED_COLUMNS} FROM provider_keys WHERE name = $1"),
            &[&name],
        )
        .await?;
        row.as_ref().map(decode::sealed).transpose()
    }

    async fn keys(&self) -> Result<Vec<KeyRow>, StoreError> {
        let c = self.conn().await?;
        let rows = query(
            &c,
            &format!("SELECT {KEY_COLUMNS} FROM provider_keys ORDER BY name"),
            &[],
        )
        .await?;
        rows.iter().map(decode::key).collect()
    }

    async fn remove_key(&self, name: &str, by: &str) -> Result<bool, StoreError> {
        let at = now_rfc3339();
        let (name, by) = (name.to_owned(), by.to_owned());
        self.write(move |c| {
            Box::pin(async move {
                let n = execute(c, "DELETE FROM provider_keys WHERE name = $1", &[&name]).await?;
                if n > 0 {
                    log_record(c, &records::key_removed(&name, &by), &at).await?;
                }
                Ok(n > 0)
            })
        })
        .await
    }
}
