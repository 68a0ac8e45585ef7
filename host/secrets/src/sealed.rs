//! Provider keys brought by an organisation, sealed (seed 003: "se sella
//! con AES-256-GCM bajo una clave envuelta por CONNECTIONS_KEK ... ninguna
//! respuesta de la API la devuelve salvo sus últimos cuatro caracteres";
//! issue 24 item 9).
//!
//! Envelope encryption with AES-256-GCM (NIST SP 800-38D; RustCrypto's
//! `aes-gcm`), 96-bit random nonces:
//!
//! - each key gets its own random 256-bit data key (DEK); the secret is
//!   encrypted under the DEK with associated data `capsaga:key:v1:<name>`;
//! - the DEK is wrapped (encrypted) under the key-encryption key (KEK) with
//!   associated data `capsaga:dek:v1:<name>`;
//! - the KEK comes from the environment (`CAPSAGA_KEK`: 32 bytes as 64 hex
//!   digits or as base64, padded or not, standard or URL-safe alphabet) and
//!   is never stored; the store keeps the KEK's id (a hash: which KEK
//!   sealed it, so a wrong KEK is told apart from tampered data), the two
//!   ciphertexts and the last four characters of the secret.
//!
//! The associated data binds a sealed key to its name: a row copied under
//! another name does not open. Changing the KEK means re-wrapping each DEK
//! (the secrets' ciphertexts stay). Failures are typed ([`SealError`]) and
//! never include key material. Pure: the caller draws the DEK and the
//! nonces from the operating system's random source.

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::Engine;
use sha2::{Digest, Sha256};
use zeroize::{Zeroize, Zeroizing};

/// Bytes of a nonce.
pub const NONCE_BYTES: usize = 12;
/// Bytes of an AES-256 key (the KEK and each DEK).
pub const KEY_BYTES: usize = 32;
/// Bytes of a GCM tag.
pub const TAG_BYTES: usize = 16;
/// The envelope format recorded with each key.
pub const FORMAT: &str = "aes-256-gcm-envelope-v1";
/// Shortest secret accepted, bytes (its last four characters are shown).
pub const MIN_SECRET_BYTES: usize = 12;
/// Longest secret accepted, bytes.
pub const MAX_SECRET_BYTES: usize = 4096;

/// Why a key could not be sealed or opened. No variant carries key
/// material.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// `CAPSAGA_KEK` is not set.
    #[error(
        "CAPSAGA_KEK is not set: sealed provider keys need the key-encryption key (32 bytes as 64 hex digits or base64)"
    )]
    NoKek,
    /// `CAPSAGA_KEK` does not decode to 32 bytes.
    #[error("CAPSAGA_KEK is malformed: {0} (expected 32 bytes as 64 hex digits or base64)")]
    BadKek(&'static str),
    /// The key was sealed under another KEK.
    #[error(
        "sealed key `{name}` was sealed under another key-encryption key (id {sealed_with}; CAPSAGA_KEK has id {current}): set the KEK it was sealed with, or add the key again"
    )]
    WrongKek {
        /// The key's name.
        name: String,
        /// The id of the KEK that sealed it.
        sealed_with: String,
        /// The id of the KEK given.
        current: String,
    },
    /// The ciphertext does not authenticate (edited, truncated, moved to
    /// another name, or sealed under another KEK with the same id).
    #[error(
        "sealed key `{0}` does not authenticate: its stored ciphertext was altered or copied from another key; it cannot be used (add it again)"
    )]
    Tampered(String),
    /// The secret is not acceptable.
    #[error("the key is not acceptable: {0}")]
    BadSecret(&'static str),
    /// The key's name is not acceptable.
    #[error(
        "`{0}` is not a valid key name (1 to 64 lower-case letters, digits, `_` and `-`, starting with a letter or digit)"
    )]
    BadName(String),
    /// The cipher refused (a length beyond its limits).
    #[error("the cipher refused the input")]
    Cipher,
}

/// The key-encryption key. Wiped from memory when dropped; never printed.
pub struct Kek(Zeroizing<[u8; KEY_BYTES]>);

impl std::fmt::Debug for Kek {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Kek(id {})", self.id())
    }
}

impl Kek {
    /// Parse `CAPSAGA_KEK`'s value (surrounding whitespace ignored): 64 hex
    /// digits, or base64 (standard or URL-safe, padded or not) of exactly
    /// 32 bytes.
    ///
    /// # Errors
    /// [`SealError::BadKek`].
    pub fn parse(text: &str) -> Result<Kek, SealError> {
        let t = text.trim();
        if t.is_empty() {
            return Err(SealError::NoKek);
        }
        let mut bytes: Zeroizing<Vec<u8>> = if t.len() == 64
            && t.bytes().all(|b| b.is_ascii_hexdigit())
        {
            Zeroizing::new(hex::decode(t).map_err(|_| SealError::BadKek("not hex"))?)
        } else {
            let engines = [
                base64::engine::general_purpose::STANDARD_NO_PAD_INDIFFERENT,
                base64::engine::general_purpose::URL_SAFE_NO_PAD_INDIFFERENT,
            ];
            let decoded = engines.iter().find_map(|e| e.decode(t).ok());
            Zeroizing::new(decoded.ok_or(SealError::BadKek("neither 64 hex digits nor base64"))?)
        };
        if bytes.len() != KEY_BYTES {
            bytes.zeroize();
            return Err(SealError::BadKek("it does not decode to 32 bytes"));
        }
        let mut k = Zeroizing::new([0u8; KEY_BYTES]);
        k.copy_from_slice(&bytes);
        if k.iter().all(|b| *b == 0) {
            return Err(SealError::BadKek("all zero"));
        }
        Ok(Kek(k))
    }

    /// The KEK from an environment value (`None`: not set).
    ///
    /// # Errors
    /// [`SealError::NoKek`], [`SealError::BadKek`].
    pub fn from_env_value(value: Option<&str>) -> Result<Kek, SealError> {
        Kek::parse(value.ok_or(SealError::NoKek)?)
    }

    /// The KEK's id: the first 16 hex digits of SHA-256 over a fixed label
    /// and the key (which KEK sealed a key; reveals nothing usable).
    pub fn id(&self) -> String {
        let mut h = Sha256::new();
        h.update(b"capsaga kek id v1\0");
        h.update(&self.0[..]);
        hex::encode(&h.finalize()[..8])
    }

    /// A 32-byte key for `purpose`, derived from the KEK: SHA-256 over a
    /// fixed label, the purpose and the key. Every host holding the same
    /// KEK derives the same key (what several hosts sharing a store need
    /// for a secret they must all hold, e.g. the MCP `requestState` key);
    /// keys of two purposes, or of two KEKs, are unrelated. Since the KEK
    /// is 32 uniformly random bytes, one hash under a domain-separating
    /// label is a sound derivation (the construction of [`Kek::id`], with
    /// another label, so no derived key is related to a published id).
    pub fn derive_key(&self, purpose: &str) -> Zeroizing<[u8; KEY_BYTES]> {
        let mut h = Sha256::new();
        h.update(b"capsaga kek derive v1\0");
        h.update(purpose.as_bytes());
        h.update(b"\0");
        h.update(&self.0[..]);
        let mut out = Zeroizing::new([0u8; KEY_BYTES]);
        out.copy_from_slice(&h.finalize());
        out
    }

    fn cipher(&self) -> Aes256Gcm {
        Aes256Gcm::new(&(*self.0).into())
    }
}

/// A sealed key as stored (no secret in clear).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    /// [`FORMAT`].
    pub format: String,
    /// [`Kek::id`] of the KEK that wrapped the DEK.
    pub kek_id: String,
    /// The DEK under the KEK: nonce ‖ ciphertext ‖ tag.
    pub wrapped_dek: Vec<u8>,
    /// The secret under the DEK: nonce ‖ ciphertext ‖ tag.
    pub ciphertext: Vec<u8>,
    /// The secret's last four characters (what is ever shown of it).
    pub last4: String,
}

/// Fresh randomness for one sealing, drawn by the caller.
pub struct Fresh {
    /// The data key.
    pub dek: Zeroizing<[u8; KEY_BYTES]>,
    /// The nonce wrapping the DEK.
    pub dek_nonce: [u8; NONCE_BYTES],
    /// The nonce encrypting the secret.
    pub nonce: [u8; NONCE_BYTES],
}

/// Whether `name` may name a sealed key: 1 to 64 bytes of lower-case ASCII
/// letters, digits, `_` and `-`, starting with a letter or digit.
pub fn valid_key_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && (name.as_bytes()[0].is_ascii_lowercase() || name.as_bytes()[0].is_ascii_digit())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// Check a secret before sealing: [`MIN_SECRET_BYTES`] to
/// [`MAX_SECRET_BYTES`] printable ASCII characters without spaces (it goes
/// into an HTTP header).
///
/// # Errors
/// [`SealError::BadSecret`].
pub fn check_secret(secret: &str) -> Result<(), SealError> {
    if secret.len() < MIN_SECRET_BYTES {
        return Err(SealError::BadSecret(
            "shorter than 12 characters (its last four are shown)",
        ));
    }
    if secret.len() > MAX_SECRET_BYTES {
        return Err(SealError::BadSecret("longer than 4096 bytes"));
    }
    if !secret.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(SealError::BadSecret(
            "only printable ASCII without spaces or control characters (it is sent in an HTTP header)",
        ));
    }
    Ok(())
}

/// The last four characters of `secret` (what listings show).
pub fn last4(secret: &str) -> String {
    let n = secret.chars().count();
    secret.chars().skip(n.saturating_sub(4)).collect()
}

fn aad(kind: &str, name: &str) -> Vec<u8> {
    format!("capsaga:{kind}:v1:{name}").into_bytes()
}

fn encrypt(
    cipher: &Aes256Gcm,
    nonce: &[u8; NONCE_BYTES],
    msg: &[u8],
    aad: &[u8],
) -> Result<Vec<u8>, SealError> {
    let n = Nonce::from(*nonce);
    let ct = cipher
        .encrypt(&n, Payload { msg, aad })
        .map_err(|_| SealError::Cipher)?;
    let mut out = Vec::with_capacity(NONCE_BYTES + ct.len());
    out.extend_from_slice(nonce);
    out.extend_from_slice(&ct);
    Ok(out)
}

fn decrypt(cipher: &Aes256Gcm, sealed: &[u8], aad: &[u8]) -> Option<Zeroizing<Vec<u8>>> {
    if sealed.len() < NONCE_BYTES + TAG_BYTES {
        return None;
    }
    let (nonce, ct) = sealed.split_at(NONCE_BYTES);
    let nonce: [u8; NONCE_BYTES] = nonce.try_into().ok()?;
    cipher
        .decrypt(&Nonce::from(nonce), Payload { msg: ct, aad })
        .ok()
        .map(Zeroizing::new)
}

/// Seal `secret` as key `name` under `kek`, with `fresh` randomness.
///
/// # Errors
/// [`SealError::BadName`], [`SealError::BadSecret`], [`SealError::Cipher`].
pub fn seal(kek: &Kek, name: &str, secret: &str, fresh: &Fresh) -> Result<Sealed, SealError> {
    if !valid_key_name(name) {
        return Err(SealError::BadName(name.chars().take(64).collect()));
    }
    check_secret(secret)?;
    let dek_cipher = Aes256Gcm::new(&(*fresh.dek).into());
    let ciphertext = encrypt(
        &dek_cipher,
        &fresh.nonce,
        secret.as_bytes(),
        &aad("key", name),
    )?;
    let wrapped_dek = encrypt(
        &kek.cipher(),
        &fresh.dek_nonce,
        &fresh.dek[..],
        &aad("dek", name),
    )?;
    Ok(Sealed {
        format: FORMAT.into(),
        kek_id: kek.id(),
        wrapped_dek,
        ciphertext,
        last4: last4(secret),
    })
}

/// Open key `name` sealed as `sealed` with `kek`: the secret, wiped from
/// memory when dropped.
///
/// # Errors
/// [`SealError::WrongKek`] when another KEK sealed it,
/// [`SealError::Tampered`] when it does not authenticate (or decodes to
/// something that is not an acceptable secret).
pub fn open(kek: &Kek, name: &str, sealed: &Sealed) -> Result<Zeroizing<String>, SealError> {
    let current = kek.id();
    if sealed.kek_id != current {
        return Err(SealError::WrongKek {
            name: name.to_string(),
            sealed_with: sealed.kek_id.chars().take(32).collect(),
            current,
        });
    }
    let tampered = || SealError::Tampered(name.to_string());
    if sealed.format != FORMAT {
        return Err(tampered());
    }
    let dek =
        decrypt(&kek.cipher(), &sealed.wrapped_dek, &aad("dek", name)).ok_or_else(tampered)?;
    let dek: [u8; KEY_BYTES] = dek.as_slice().try_into().map_err(|_| tampered())?;
    let dek = Zeroizing::new(dek);
    let plain = decrypt(
        &Aes256Gcm::new(&(*dek).into()),
        &sealed.ciphertext,
        &aad("key", name),
    )
    .ok_or_else(tampered)?;
    let text = String::from_utf8(plain.to_vec()).map_err(|_| tampered())?;
    let text = Zeroizing::new(text);
    check_secret(&text).map_err(|_| tampered())?;
    if last4(&text) != sealed.last4 {
        return Err(tampered());
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEK_HEX: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

    #[test]
    fn derived_keys_are_stable_and_unrelated_across_purposes_and_keks() {
        let k = Kek::parse(KEK_HEX).unwrap();
        let again = Kek::parse(KEK_HEX).unwrap();
        let other = Kek::parse(&"11".repeat(32)).unwrap();
        let a = k.derive_key("mcp requestState");
        assert_eq!(
            *a,
            *again.derive_key("mcp requestState"),
            "same KEK, same key"
        );
        assert_ne!(*a, *k.derive_key("something else"), "purposes separated");
        assert_ne!(*a, *other.derive_key("mcp requestState"), "KEKs separated");
        assert_ne!(&a[..], &hex::decode(KEK_HEX).unwrap()[..], "not the KEK");
        // A purpose is not confused with a longer one that shares a prefix.
        assert_ne!(*k.derive_key("ab"), *k.derive_key("a\0b"));
    }

    fn fresh(seed: u8) -> Fresh {
        Fresh {
            dek: Zeroizing::new([seed; KEY_BYTES]),
            dek_nonce: [seed.wrapping_add(1); NONCE_BYTES],
            nonce: [seed.wrapping_add(2); NONCE_BYTES],
        }
    }

    #[test]
    fn kek_encodings() {
        let hex = Kek::parse(KEK_HEX).unwrap();
        let b64 = base64::engine::general_purpose::STANDARD.encode(hex::decode(KEK_HEX).unwrap());
        assert_eq!(Kek::parse(&b64).unwrap().id(), hex.id());
        assert_eq!(
            Kek::parse(b64.trim_end_matches('=')).unwrap().id(),
            hex.id()
        );
        let url = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode([0xfbu8; 32]);
        assert!(Kek::parse(&url).is_ok(), "{url}");
        assert!(matches!(Kek::parse(" "), Err(SealError::NoKek)));
        for bad in [&KEK_HEX[..62], "zz", &"0".repeat(64), "aGVsbG8="] {
            assert!(
                matches!(Kek::parse(bad), Err(SealError::BadKek(_))),
                "{bad}"
            );
        }
        assert!(
            !format!("{hex:?}").contains("0001"),
            "the Debug form hides the key"
        );
    }

    #[test]
    fn round_trip_and_only_the_last_four_shown() {
        let kek = Kek::parse(KEK_HEX).unwrap();
        let secret = "sk-ant-api03-abcdefghijklmnop-WXYZ";
        let s = seal(&kek, "org-anthropic", secret, &fresh(7)).unwrap();
        assert_eq!(s.last4, "WXYZ");
        assert_eq!(s.format, FORMAT);
        let all = [s.wrapped_dek.as_slice(), s.ciphertext.as_slice()].concat();
        assert!(
            !all.windows(8)
                .any(|w| secret.as_bytes().windows(8).any(|x| x == w)),
            "no run of the secret in the stored bytes"
        );
        assert_eq!(open(&kek, "org-anthropic", &s).unwrap().as_str(), secret);
    }

    #[test]
    fn wrong_kek_tampering_and_renaming_are_refused() {
        let kek = Kek::parse(KEK_HEX).unwrap();
        let other = Kek::parse(&"ab".repeat(32)).unwrap();
        let secret = "sk-live-0123456789abcdef";
        let s = seal(&kek, "org", secret, &fresh(3)).unwrap();
        let e = open(&other, "org", &s).unwrap_err();
        assert!(matches!(e, SealError::WrongKek { .. }), "{e}");
        assert!(!e.to_string().contains(secret));
        // Every single-byte change of either ciphertext is caught.
        for field in 0..2 {
            let len = if field == 0 {
                s.wrapped_dek.len()
            } else {
                s.ciphertext.len()
            };
            for i in 0..len {
                let mut t = s.clone();
                let v = if field == 0 {
                    &mut t.wrapped_dek
                } else {
                    &mut t.ciphertext
                };
                v[i] ^= 0x01;
                assert_eq!(
                    open(&kek, "org", &t),
                    Err(SealError::Tampered("org".into()))
                );
            }
        }
        let mut short = s.clone();
        short.ciphertext.truncate(20);
        assert!(matches!(
            open(&kek, "org", &short),
            Err(SealError::Tampered(_))
        ));
        // Moved to another name: the associated data differs.
        assert!(matches!(
            open(&kek, "org2", &s),
            Err(SealError::Tampered(_))
        ));
        // The shown last four edited: refused too.
        let mut l4 = s.clone();
        l4.last4 = "0000".into();
        assert!(matches!(
            open(&kek, "org", &l4),
            Err(SealError::Tampered(_))
        ));
        // A forged id with the wrong KEK still does not open.
        let mut forged = s.clone();
        forged.kek_id = other.id();
        assert!(matches!(
            open(&other, "org", &forged),
            Err(SealError::Tampered(_))
        ));
    }

    #[test]
    fn names_and_secrets_are_checked() {
        let kek = Kek::parse(KEK_HEX).unwrap();
        for bad in ["", "Org", "-x", "a b", "a/b", &"a".repeat(65)] {
            assert!(
                matches!(
                    seal(&kek, bad, "0123456789abcdef", &fresh(1)),
                    Err(SealError::BadName(_))
                ),
                "{bad}"
            );
        }
        for bad in [
            "short",
            "with space 0123456",
            "tab\t0123456789",
            &"x".repeat(5000),
        ] {
            assert!(
                matches!(
                    seal(&kek, "k", bad, &fresh(1)),
                    Err(SealError::BadSecret(_))
                ),
                "{bad:.20}"
            );
        }
        assert_eq!(last4("abcdefghijkl"), "ijkl");
    }
}
