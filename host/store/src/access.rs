//! What the operator manages in the state store (issue 24): named tokens
//! and their roles ([`TokenStore`], table `tokens`), provider keys sealed
//! under `CAPSAGA_KEK` ([`KeyStore`], table `provider_keys`), and the kill
//! switch ([`SwitchStore`], table `host_switch`). Every write appends a
//! record to the hash-chained log in the same transaction (`TOKEN` with
//! saga id `token:<name>`, `KEY` with `key:<name>`, `SWITCH` with
//! `host:switch`), so `audit verify` sees them; no record holds a secret.
//!
//! A token is stored as the SHA-256 of its secret, never the secret; a
//! sealed key as its ciphertexts (`capsaga_secrets::sealed`) and last four
//! characters. The switch lives in the store so that every process on the
//! state (and every host sharing a store) sees it.

use super::StoreError;
use async_trait::async_trait;
use capsaga_core::pause::{Mode, Switch};
use capsaga_core::principal::Role;
use capsaga_secrets::sealed::Sealed;
use serde::Serialize;

/// One token as listed (its secret's hash is not part of it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TokenRow {
    /// Its name (`capsaga_core::principal::valid_token_name`).
    pub name: String,
    /// Its role.
    pub role: Role,
    /// RFC 3339.
    pub created_at: String,
    /// The principal that created it.
    pub created_by: String,
    /// When it was revoked (RFC 3339), if it was.
    pub revoked_at: Option<String>,
    /// The principal that revoked it.
    pub revoked_by: Option<String>,
}

/// A live token as the authentication layer reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveToken {
    /// Its name.
    pub name: String,
    /// Its role.
    pub role: Role,
    /// SHA-256 of its secret.
    pub secret_sha256: [u8; 32],
}

/// Why a token operation failed.
#[derive(Debug, thiserror::Error)]
pub enum TokenOpError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A token of that name exists, or existed (names are never reused: the
    /// sagas of a revoked token stay its own).
    #[error(
        "a token named `{0}` exists or was revoked (names are never reused): choose another name"
    )]
    NameTaken(String),
    /// No such token.
    #[error("no token named `{0}`")]
    NotFound(String),
    /// Already revoked.
    #[error("token `{0}` is already revoked")]
    AlreadyRevoked(String),
}

/// Named tokens (`tokens`).
#[async_trait]
pub trait TokenStore: Send + Sync {
    /// Record token `name` with `role` whose secret hashes to
    /// `secret_sha256`, created by `by`.
    ///
    /// # Errors
    /// [`TokenOpError::NameTaken`], or the store's.
    async fn create_token(
        &self,
        name: &str,
        role: Role,
        secret_sha256: &[u8; 32],
        by: &str,
    ) -> Result<TokenRow, TokenOpError>;

    /// Revoke token `name` (by `by`): from now on it authenticates nothing.
    ///
    /// # Errors
    /// [`TokenOpError::NotFound`], [`TokenOpError::AlreadyRevoked`], or the
    /// store's.
    async fn revoke_token(&self, name: &str, by: &str) -> Result<TokenRow, TokenOpError>;

    /// Every token, revoked ones included, by name.
    ///
    /// # Errors
    /// [`StoreError`].
    async fn tokens(&self) -> Result<Vec<TokenRow>, StoreError>;

    /// The tokens not revoked, with their hashes.
    ///
    /// # Errors
    /// [`StoreError`], including a stored hash that does not decode.
    async fn active_tokens(&self) -> Result<Vec<ActiveToken>, StoreError>;

    /// Whether any token was ever created (a server that had tokens never
    /// falls back to serving without one when they are all revoked).
    ///
    /// # Errors
    /// [`StoreError`].
    async fn any_token_ever(&self) -> Result<bool, StoreError>;
}

/// One sealed key as listed: never the key, only its last four characters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyRow {
    /// Its name (`capsaga_secrets::sealed::valid_key_name`).
    pub name: String,
    /// The key's last four characters.
    pub last4: String,
    /// The id of the KEK that sealed it (`capsaga_secrets::sealed::Kek::id`).
    pub kek_id: String,
    /// RFC 3339.
    pub created_at: String,
    /// The principal that added it.
    pub created_by: String,
}

/// Provider keys sealed under `CAPSAGA_KEK` (`provider_keys`).
#[async_trait]
pub trait KeyStore: Send + Sync {
    /// Store (or replace) the sealed key `name`, added by `by`.
    ///
    /// # Errors
    /// [`StoreError`].
    async fn put_key(&self, name: &str, sealed: &Sealed, by: &str) -> Result<KeyRow, StoreError>;

    /// The sealed key `name`, if any.
    ///
    /// # Errors
    /// [`StoreError`].
    async fn sealed_key(&self, name: &str) -> Result<Option<Sealed>, StoreError>;

    /// Every sealed key, by name (no key material).
    ///
    /// # Errors
    /// [`StoreError`].
    async fn keys(&self) -> Result<Vec<KeyRow>, StoreError>;

    /// Remove the sealed key `name` (by `by`); `false` when there was none.
    ///
    /// # Errors
    /// [`StoreError`].
    async fn remove_key(&self, name: &str, by: &str) -> Result<bool, StoreError>;
}

/// The kill switch (`host_switch`), shared by every process on the state.
#[async_trait]
pub trait SwitchStore: Send + Sync {
    /// The switch as stored (`running`, never set, when there is no row).
    ///
    /// # Errors
    /// [`StoreError`], including a stored mode that does not decode.
    async fn switch(&self) -> Result<Switch, StoreError>;

    /// Set the mode, by `by`, with an optional note.
    ///
    /// # Errors
    /// [`StoreError`].
    async fn set_switch(
        &self,
        mode: Mode,
        by: &str,
        note: Option<&str>,
    ) -> Result<Switch, StoreError>;
}
