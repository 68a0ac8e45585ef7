//! `provider_keys` ([`crate::logic::keys`]) on PostgreSQL, shared by every
//! host (each host needs the same KEK to open them).

use super::super::StoreError;
use super::super::access::{KeyRow, KeyStore};
use super::PgStore;
use super::seam::Pg;
use crate::clock::now_rfc3339;
use crate::logic::keys;
use async_trait::async_trait;
use capsaga_secrets::sealed::Sealed;

#[async_trait]
impl KeyStore for PgStore {
    async fn put_key(&self, name: &str, sealed: &Sealed, by: &str) -> Result<KeyRow, StoreError> {
        let (name, s, by, at) = (
            name.to_owned(),
            sealed.clone(),
            by.to_owned(),
            now_rfc3339(),
        );
        self.write(move |c| Box::pin(async move { keys::put(&Pg(c), &name, &s, &by, &at).await }))
            .await
    }

    async fn sealed_key(&self, name: &str) -> Result<Option<Sealed>, StoreError> {
        keys::sealed(&Pg(&*self.conn().await?), name).await
    }

    async fn keys(&self) -> Result<Vec<KeyRow>, StoreError> {
        keys::list(&Pg(&*self.conn().await?)).await
    }

    async fn remove_key(&self, name: &str, by: &str) -> Result<bool, StoreError> {
        let (name, by, at) = (name.to_owned(), by.to_owned(), now_rfc3339());
        self.write(move |c| Box::pin(async move { keys::remove(&Pg(c), &name, &by, &at).await }))
            .await
    }
}
