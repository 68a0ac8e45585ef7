//! `provider_keys` ([`crate::logic::keys`]) on SQLite.

use super::super::StoreError;
use super::super::access::{KeyRow, KeyStore};
use super::SqliteStore;
use super::seam::Lite;
use crate::clock::now_rfc3339;
use crate::logic::keys;
use crate::seam::now;
use async_trait::async_trait;
use capsaga_secrets::sealed::Sealed;

#[async_trait]
impl KeyStore for SqliteStore {
    async fn put_key(&self, name: &str, sealed: &Sealed, by: &str) -> Result<KeyRow, StoreError> {
        let (name, s, by, at) = (
            name.to_owned(),
            sealed.clone(),
            by.to_owned(),
            now_rfc3339(),
        );
        self.write(move |tx| now(keys::put(&Lite::write(tx), &name, &s, &by, &at)))
            .await
    }

    async fn sealed_key(&self, name: &str) -> Result<Option<Sealed>, StoreError> {
        self.read(|c| now(keys::sealed(&Lite::read(c), name)))
    }

    async fn keys(&self) -> Result<Vec<KeyRow>, StoreError> {
        self.read(|c| now(keys::list(&Lite::read(c))))
    }

    async fn remove_key(&self, name: &str, by: &str) -> Result<bool, StoreError> {
        let (name, by, at) = (name.to_owned(), by.to_owned(), now_rfc3339());
        self.write(move |tx| now(keys::remove(&Lite::write(tx), &name, &by, &at)))
            .await
    }
}
