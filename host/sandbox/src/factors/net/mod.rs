//! The `net` capability, in one folder: `net:http[s]:<host>[:<port>]`
//! grants let the guest send HTTP requests through `wasi:http`, each one
//! checked by the net guard ([`hooks`]: the per-call slot, the `wasi:http`
//! hooks linked through `WasiHttpView`); this module is its factor: the
//! operator's `[net]` settings (limits, static hosts) and TLS roots, loaded
//! once, and the per-call binding.

pub mod hooks;

pub use hooks::{NetHooks, NetRecord, annotate_error};

use super::FactorError;
use super::secret::SecretFactor;
use capsaga_core::capability::Capability;
use capsaga_core::policy::{NetSettings, Policy};
use std::path::Path;
use std::sync::Arc;

/// The operator's outgoing-HTTP settings and TLS configuration.
pub struct NetFactor {
    settings: NetSettings,
    tls: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for NetFactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetFactor")
            .field("settings", &self.settings)
            .finish()
    }
}

fn tls_config(ca_pems: &[(String, Vec<u8>)]) -> Result<rustls::ClientConfig, FactorError> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    for (path, pem) in ca_pems {
        let mut n = 0;
        for cert in CertificateDer::pem_slice_iter(pem) {
            let cert = cert.map_err(|e| FactorError::CaFile {
                path: path.clone(),
                error: e.to_string(),
            })?;
            roots.add(cert).map_err(|e| FactorError::CaFile {
                path: path.clone(),
                error: e.to_string(),
            })?;
            n += 1;
        }
        if n == 0 {
            return Err(FactorError::CaFile {
                path: path.clone(),
                error: "no PEM certificate found".into(),
            });
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| FactorError::Tls(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Phase 1: a net grant is concrete (the policy check refuses `*`); nothing
/// else to check per grant.
///
/// # Errors
/// Why the grant is refused.
pub fn validate(grant: &Capability) -> Result<(), String> {
    if grant.is_concrete() {
        Ok(())
    } else {
        Err("a net grant must name a host".into())
    }
}

impl NetFactor {
    /// Default settings, the built-in web PKI roots, system resolver.
    pub fn none() -> NetFactor {
        NetFactor {
            settings: NetSettings::default(),
            // Not input-derived: the built-in roots with rustls's own ring
            // provider and default protocol versions always configure.
            tls: Arc::new(
                tls_config(&[])
                    .expect("rustls configures its ring provider with the web PKI roots"),
            ),
        }
    }

    /// Phase 1 at host start: the `[net]` settings and the extra root
    /// certificates (`ca_files`, relative to `base_dir`).
    ///
    /// # Errors
    /// [`FactorError::CaFile`] or [`FactorError::Tls`].
    pub fn load(policy: &Policy, base_dir: &Path) -> Result<NetFactor, FactorError> {
        let mut pems = Vec::new();
        for f in &policy.net.ca_files {
            let path = base_dir.join(f);
            let bytes = std::fs::read(&path).map_err(|e| FactorError::CaFile {
                path: path.display().to_string(),
                error: e.to_string(),
            })?;
            pems.push((path.display().to_string(), bytes));
        }
        Ok(NetFactor {
            settings: policy.net.clone(),
            tls: Arc::new(tls_config(&pems)?),
        })
    }

    /// The outgoing-HTTP settings.
    pub fn settings(&self) -> &NetSettings {
        &self.settings
    }

    /// The TLS client configuration (web PKI roots plus `ca_files`).
    pub fn tls(&self) -> &Arc<rustls::ClientConfig> {
        &self.tls
    }
}

/// Phase 3: the `wasi:http` hooks of one call with these net and secret
/// grants (the secret factor injects and redacts; see [`super::secret`]).
pub fn bind(
    net: &Arc<NetFactor>,
    secrets: &Arc<SecretFactor>,
    net_grants: &[Capability],
    secret_grants: &[Capability],
    dry_run: bool,
    deadline_ms: u64,
) -> NetHooks {
    let grants: Vec<Capability> = net_grants.iter().chain(secret_grants).cloned().collect();
    NetHooks::new(grants, dry_run, deadline_ms, net.clone(), secrets.clone())
}
