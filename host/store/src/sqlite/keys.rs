//! `provider_keys`: provider keys sealed under `CAPSAGA_KEK`
//! (`capsaga_core::sealed`): the wrapped data key and the ciphertext, the
//! KEK's id and the last four characters, never the key. Each write
//! appends a `KEY` record (saga id `key:<name>`; who acted and the last
//! four, nothing sealed) to the hash-chained log in the same transaction.

use super::super::StoreError;
use super::super::access::{KeyRow, KeyStore};
use super::Cached;
use super::log::log_record;
use super::{SqliteStore, all, first};
use crate::clock::now_rfc3339;
use crate::decode::{self, KEY_COLUMNS, SEALED_COLUMNS};
use crate::records;
use async_trait::async_trait;
use capsaga_core::sealed::Sealed;
use rusqlite::params;

#[async_trait]
impl KeyStore for SqliteStore {
    async fn put_key(&self, name: &str, sealed: &Sealed, by: &str) -> Result<KeyRow, StoreError> {
        let at = now_rfc3339();
        let (name, by, s) = (name.to_owned(), by.to_owned(), sealed.clone());
        self.write(move |tx| {
            tx.exec(
                "INSERT INTO provider_keys (name, format, kek_id, wrapped_dek, ciphertext, last4, created_at, created_by) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                 ON CONFLICT(name) DO UPDATE SET format = excluded.format, kek_id = excluded.kek_id, wrapped_dek = excluded.wrapped_dek, ciphertext = excluded.ciphertext, last4 = excluded.last4, created_at = excluded.created_at, created_by = excluded.created_by",
                params![name, s.format, s.kek_id, s.wrapped_dek, s.ciphertext, s.last4, at, by],
            )?;
            log_record(tx, &records::key_sealed(&name, &s, &by), &at)?;
            Ok(KeyRow {
                name,
                last4: s.last4,
                kek_id: s.kek_id,
                created_at: at,
                created_by: by,
            })
        })
        .await
    }

    async fn sealed_key(&self, name: &str) -> Result<Option<Sealed>, StoreError> {
        self.read(|c| {
            first(
                c,
                &format!("SELECT {SEALED_COLUMNS} FROM provider_keys WHERE name = ?1"),
                params![name],
                |r| decode::sealed(r),
            )
        })
    }

    async fn keys(&self) -> Result<Vec<KeyRow>, StoreError> {
        self.read(|c| {
            all(
                c,
                &format!("SELECT {KEY_COLUMNS} FROM provider_keys ORDER BY name"),
                [],
                |r| decode::key(r),
            )
        })
    }

    async fn remove_key(&self, name: &str, by: &str) -> Result<bool, StoreError> {
        let at = now_rfc3339();
        let (name, by) = (name.to_owned(), by.to_owned());
        self.write(move |tx| {
            let n = tx.exec("DELETE FROM provider_keys WHERE name = ?1", params![name])?;
            if n > 0 {
                log_record(tx, &records::key_removed(&name, &by), &at)?;
            }
            Ok(n > 0)
        })
        .await
    }
}
