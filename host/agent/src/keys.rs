//! Provider keys an organisation brought, sealed in the state store under
//! `CAPSAGA_KEK` (seed 003; the envelope format is `capsaga_secrets::sealed`).
//!
//! - [`seal_and_store`]: what `capsaga keys add` and `PUT /v1/keys/{name}`
//!   do: check the name and the key, draw a data key and two nonces from
//!   the operating system, seal, store. Only the last four characters are
//!   ever shown again.
//! - [`with_sealed`]: before a turn selects its provider
//!   (`super::select`), each `[providers.*]` section naming
//!   `api_key_sealed` gets its key opened, or the reason it cannot be
//!   (`CAPSAGA_KEK` unset, another KEK, tampered ciphertext, no such key),
//!   which makes that provider *not configured* with the reason shown;
//!   never the key.
//!
//! The KEK is read from the process environment at each use and never
//! stored; the opened key lives in an [`ApiKey`] (printed `***`).

use super::http::ApiKey;
use super::select::Selection;
use capsaga_core::principal::Principal;
use capsaga_door::host::Host;
use capsaga_secrets::sealed::{self, Fresh, Kek, SealError};
use capsaga_store::{KeyRow, Store, StoreError};
use zeroize::Zeroizing;

/// The environment variable holding the key-encryption key.
pub const KEK_ENV: &str = "CAPSAGA_KEK";

/// Why a key could not be sealed, stored or opened.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// Sealing or opening failed (no KEK, another KEK, tampered, bad input).
    #[error(transparent)]
    Seal(#[from] SealError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No sealed key of that name.
    #[error("no sealed key `{0}` (add it with `capsaga keys add {0}`)")]
    NotFound(String),
    /// The operating system's random source failed.
    #[error("cannot draw random bytes: {0}")]
    Random(String),
}

/// The KEK from the process environment.
///
/// # Errors
/// [`SealError::NoKek`], [`SealError::BadKek`].
pub fn kek_from_env() -> Result<Kek, SealError> {
    let v = std::env::var(KEK_ENV).ok().map(Zeroizing::new);
    Kek::from_env_value(v.as_deref().map(String::as_str))
}

fn fresh() -> Result<Fresh, KeyError> {
    let mut dek = Zeroizing::new([0u8; sealed::KEY_BYTES]);
    let mut dek_nonce = [0u8; sealed::NONCE_BYTES];
    let mut nonce = [0u8; sealed::NONCE_BYTES];
    for b in [&mut dek[..], &mut dek_nonce[..], &mut nonce[..]] {
        getrandom::fill(b).map_err(|e| KeyError::Random(e.to_string()))?;
    }
    Ok(Fresh {
        dek,
        dek_nonce,
        nonce,
    })
}

/// Seal `secret` under `kek` as key `name` and store it (replacing one of
/// the same name), recorded as added by `by`.
///
/// # Errors
/// [`KeyError`]; nothing is stored then.
pub async fn seal_and_store(
    store: &dyn Store,
    kek: &Kek,
    name: &str,
    secret: &str,
    by: &Principal,
) -> Result<KeyRow, KeyError> {
    capsaga_telemetry::secrets::remember(secret);
    let s = sealed::seal(kek, name, secret, &fresh()?)?;
    Ok(store.put_key(name, &s, &by.to_string()).await?)
}

/// Open the sealed key `name` with `kek`.
///
/// # Errors
/// [`KeyError::NotFound`], [`KeyError::Seal`] (another KEK, tampered).
pub async fn open(store: &dyn Store, kek: &Kek, name: &str) -> Result<ApiKey, KeyError> {
    let s = store
        .sealed_key(name)
        .await?
        .ok_or_else(|| KeyError::NotFound(name.to_string()))?;
    let secret = sealed::open(kek, name, &s)?;
    Ok(ApiKey::new(secret.to_string()))
}

/// `sel` with the sealed keys the policy's providers name, opened (or the
/// reason each cannot be).
///
/// # Errors
/// [`StoreError`] only; a key that cannot be opened leaves its provider
/// not configured, with the reason.
pub async fn with_sealed(host: &Host, sel: Selection) -> Result<Selection, StoreError> {
    with_sealed_store(&host.config, &*host.store, sel).await
}

/// [`with_sealed`] for a command that has the policy and the store but no
/// host (`capsaga memory reflect`).
///
/// # Errors
/// [`StoreError`] only, as [`with_sealed`].
pub async fn with_sealed_store(
    config: &capsaga_door::config::Config,
    store: &dyn capsaga_store::Store,
    mut sel: Selection,
) -> Result<Selection, StoreError> {
    let named: Vec<(String, String)> = config
        .policy
        .providers
        .iter()
        .filter_map(|(p, s)| s.api_key_sealed.clone().map(|k| (p.clone(), k)))
        .collect();
    if named.is_empty() {
        return Ok(sel);
    }
    let kek = kek_from_env();
    for (provider, key) in named {
        let opened = match &kek {
            Err(e) => Err(e.to_string()),
            Ok(kek) => match open(store, kek, &key).await {
                Ok(k) => Ok(k),
                Err(KeyError::Store(e)) => return Err(e),
                Err(e) => Err(e.to_string()),
            },
        };
        if let Err(why) = &opened {
            // Shown in the selection's mode (`not configured: ...`); at
            // debug level here, as `/healthz` asks at every probe.
            tracing::debug!("provider `{provider}`: sealed key `{key}` not usable: {why}");
        }
        sel.sealed.insert(provider, opened);
    }
    Ok(sel)
}
