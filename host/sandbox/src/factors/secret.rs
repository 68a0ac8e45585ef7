//! The `secret` factor: `secret:<name>@<host>` grants make the host inject
//! the named credential as a header on requests to `<host>` (HTTPS only);
//! the guest never sees it, and every secret value is redacted from
//! responses. Values are read once at host start, from the policy or from
//! the environment variable it names (and nothing else from the
//! environment).

use super::FactorError;
use capsaga_core::capability::Capability;
use capsaga_core::policy::{Policy, SecretSource, SecretString};
use capsaga_secrets::redact::Redactor;
use std::collections::BTreeMap;

/// A secret ready to send.
pub struct ResolvedSecret {
    /// The header that carries it.
    pub header: http::HeaderName,
    /// Prefix and value, marked sensitive.
    pub value: http::HeaderValue,
    raw: SecretString,
}

/// The operator's secrets, by name.
#[derive(Default)]
pub struct SecretFactor {
    secrets: BTreeMap<String, ResolvedSecret>,
}

impl std::fmt::Debug for SecretFactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretFactor")
            .field("secrets", &self.secrets.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Phase 1: a `secret:` grant names a `[secrets.<name>]` section.
///
/// # Errors
/// Why the grant is refused.
pub fn validate(policy: &Policy, grant: &Capability) -> Result<(), String> {
    match grant {
        Capability::Secret { name, .. } if !policy.secrets.contains_key(name) => {
            Err(format!("there is no [secrets.{name}] section"))
        }
        _ => Ok(()),
    }
}

impl SecretFactor {
    /// Phase 1 at host start: resolve every secret's value and header.
    ///
    /// # Errors
    /// [`FactorError::SecretEnv`] or [`FactorError::SecretValue`]; messages
    /// name the secret and the variable, never a value.
    pub fn load(policy: &Policy) -> Result<SecretFactor, FactorError> {
        let mut secrets = BTreeMap::new();
        for (name, spec) in &policy.secrets {
            let raw = match &spec.source {
                SecretSource::Value(v) => v.clone(),
                SecretSource::Env(var) => {
                    std::env::var(var).map(SecretString::new).map_err(|_| {
                        FactorError::SecretEnv {
                            name: name.clone(),
                            var: var.clone(),
                        }
                    })?
                }
            };
            // Never in a log, a span, a metric or the console.
            capsaga_telemetry::secrets::remember(raw.expose());
            let bad = || FactorError::SecretValue { name: name.clone() };
            if raw.expose().is_empty() || !capsaga_core::policy::is_header_value(raw.expose()) {
                return Err(bad());
            }
            let mut value =
                http::HeaderValue::from_str(&format!("{}{}", spec.prefix, raw.expose()))
                    .map_err(|_| bad())?;
            value.set_sensitive(true);
            let header = http::HeaderName::from_bytes(spec.header.as_bytes()).map_err(|_| bad())?;
            secrets.insert(name.clone(), ResolvedSecret { header, value, raw });
        }
        Ok(SecretFactor { secrets })
    }

    /// The secret named `name`, if the operator configured one.
    pub fn get(&self, name: &str) -> Option<&ResolvedSecret> {
        self.secrets.get(name)
    }

    /// A redactor of every secret value (whatever the call was granted).
    pub fn redactor(&self) -> Redactor {
        Redactor::new(self.secrets.values().map(|s| s.raw.expose().as_bytes()))
    }
}
