//! The `env` factor: `env:<NAME>` grants become environment variables of the
//! guest, with the value the operator wrote in `[env]` (nothing is inherited
//! from the host process's environment).

use capsaga_core::capability::Capability;
use capsaga_core::policy::Policy;
use std::collections::BTreeMap;
use wasmtime_wasi::WasiCtxBuilder;

/// The `[env]` values of the policy.
#[derive(Debug, Clone, Default)]
pub struct EnvFactor {
    values: BTreeMap<String, String>,
}

/// The variables of one tool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvBinding {
    /// Name → value, in grant order.
    pub vars: Vec<(String, String)>,
}

/// Phase 1: an `env:` grant needs a value in `[env]`.
///
/// # Errors
/// Why the grant is refused.
pub fn validate(policy: &Policy, grant: &Capability) -> Result<(), String> {
    match grant {
        Capability::Env { name } if !policy.env.contains_key(name) => Err(format!(
            "[env] has no `{name}` (values come from the policy, never from the host's environment)"
        )),
        _ => Ok(()),
    }
}

impl EnvFactor {
    /// Phase 1 at host start: keep the `[env]` values; those whose names
    /// name a secret (`API_TOKEN`, `DB_PASSWORD`, ...) are remembered as the
    /// host's secrets (`capsaga_telemetry::secrets`: never in a log, a span
    /// or the console).
    pub fn load(policy: &Policy) -> EnvFactor {
        capsaga_telemetry::secrets::remember_all(
            policy
                .env
                .iter()
                .filter(|(k, _)| capsaga_telemetry::content::secret_key(k))
                .map(|(_, v)| v.as_str()),
        );
        EnvFactor {
            values: policy.env.clone(),
        }
    }

    /// Phase 2: the values of the `env:` grants among `grants`.
    pub fn configure(&self, grants: &[Capability]) -> EnvBinding {
        EnvBinding {
            vars: grants
                .iter()
                .filter_map(|g| match g {
                    Capability::Env { name } => {
                        self.values.get(name).map(|v| (name.clone(), v.clone()))
                    }
                    _ => None,
                })
                .collect(),
        }
    }
}

/// Phase 3: set the variables in the call's WASI context.
pub fn bind(b: &EnvBinding, builder: &mut WasiCtxBuilder) {
    for (k, v) in &b.vars {
        builder.env(k, v);
    }
}
