//! Neurons in the registry: an active version is a tool like any other
//! (its identity is the neuron's, its source the runner with its
//! definition, its grants what the operator approved); every version ever
//! loaded stays known by identity so that compensation runs exactly the
//! version a step ran with.

use super::{LoadError, LoadedTool, Registry, ToolBindings, ToolSource};
use crate::sandbox::neuron::{Runner, definition};
use crate::sandbox::{CacheOutcome, Prepared, Sandbox};
use crate::store::NeuronRow;
use capsaga_core::capability::Capability;
use capsaga_core::grant::{GrantError, dry_run_grants, granted_subset};
use capsaga_core::meta::{MetaError, ToolMeta};
use capsaga_core::policy::{ApprovalRule, Policy, ToolPolicy};
use capsaga_core::validate::ArgsValidator;
use std::path::PathBuf;
use std::sync::Arc;

impl Registry {
    /// The runner with `row`'s definition, remembered by identity.
    pub fn neuron_source(&self, runner: &Runner, row: &NeuronRow, policy: &Policy) -> Prepared {
        let def = definition(&row.meta, &row.source, policy.limits.output_bytes);
        let prepared = runner.neuron(def);
        if let Ok(mut m) = self.neurons.lock() {
            m.insert(row.identity.clone(), prepared.clone());
        }
        prepared
    }

    /// A neuron version known by identity (for compensation).
    pub(super) fn neuron_by_identity(&self, identity: &str) -> Option<Prepared> {
        self.neurons.lock().ok()?.get(identity).cloned()
    }

    /// Put the active version `row` in the catalog (replacing an earlier
    /// version of the same neuron). Its grants are `row.granted` checked
    /// against what it requested ([`granted_subset`]: never more, possibly less); its
    /// policy section is made from them, with the policy's default limits
    /// and autonomy; a neuron with side effects and no dry-run is high risk
    /// (every call needs a human), whatever it declared.
    ///
    /// # Errors
    /// [`LoadError::Meta`] for a malformed meta; [`LoadError::Name`] for a
    /// name refused by `capsaga_core::neuron::name::check` against the
    /// catalog now: a reserved name (`capsaga_*`, a built-in), or one that
    /// is or reads like another tool's or a policy section's.
    pub fn register_neuron(
        &self,
        sandbox: &Sandbox,
        policy: &Policy,
        runner: &Runner,
        row: &NeuronRow,
    ) -> Result<Arc<LoadedTool>, LoadError> {
        let path = PathBuf::from(format!("neuron:{}@{}", row.name, row.version));
        let meta_error = |error| LoadError::Meta {
            path: path.clone(),
            error,
        };
        let mut meta = ToolMeta::from_raw(row.meta.clone()).map_err(meta_error)?;
        if meta.has_side_effects && !meta.supports_dry_run {
            meta.risk = capsaga_core::meta::Risk::High;
        }
        let validator = ArgsValidator::new(&meta.name, &meta.args_schema).map_err(|e| {
            meta_error(MetaError::SchemaInvalid {
                tool: meta.name.clone(),
                error: e.to_string(),
            })
        })?;
        let granted: Vec<Capability> = row
            .granted
            .iter()
            .filter_map(|g| Capability::parse(g).ok())
            .collect();
        // What the operator granted, possibly a subset of the request
        // (checked when approved): what they withheld is not in the
        // sandbox, and nothing beyond the request ever is.
        let grants: Result<Vec<Capability>, GrantError> =
            granted_subset(&meta.name, &meta.capabilities, &granted).map(|(g, _)| g);
        let bindings = match &grants {
            Ok(g) => ToolBindings {
                execute: sandbox.factors().configure(g),
                dry_run: sandbox.factors().configure(&dry_run_grants(g)),
            },
            Err(_) => ToolBindings::default(),
        };
        let section = ToolPolicy {
            grants: grants.clone().unwrap_or_default(),
            limits: policy.limits,
            approval: ApprovalRule::Auto,
            deny: false,
            irreversible: false,
            autonomy: policy.autonomy,
        };
        let prepared = self.neuron_source(runner, row, policy);
        let loaded = Arc::new(LoadedTool {
            meta,
            hash: row.identity.clone(),
            path: path.clone(),
            source: ToolSource::Neuron(prepared),
            validator,
            grants,
            bindings,
            limits: policy.limits,
            compiled: CacheOutcome::Disabled,
            own_policy: Some(section),
        });
        let mut tools = self.tools.write().map_err(|_| LoadError::Poisoned)?;
        // The name rule again, against the catalog as it is now (it may
        // have changed since `neuron_create` checked it): the host's
        // reserved names, and no name reading like another tool or a
        // policy section (the neuron's own earlier version aside).
        let name = loaded.meta.name.as_str();
        let taken = tools
            .values()
            .filter(|t| !(t.meta.name == name && matches!(t.source, ToolSource::Neuron(_))))
            .map(|t| t.meta.name.as_str())
            .chain(policy.tools.keys().map(String::as_str));
        if let Err(error) = capsaga_core::neuron::name::check(name, taken) {
            return Err(LoadError::Name {
                path: loaded.path.clone(),
                error,
            });
        }
        tools.insert(loaded.meta.name.clone(), loaded.clone());
        Ok(loaded)
    }

    /// Take the neuron `name` out of the catalog (retired); compensation
    /// still finds its versions by identity.
    pub fn deregister_neuron(&self, name: &str) {
        if let Ok(mut tools) = self.tools.write()
            && tools
                .get(name)
                .is_some_and(|t| matches!(t.source, ToolSource::Neuron(_)))
        {
            tools.remove(name);
        }
    }
}

impl Registry {
    /// Register a host built-in under a policy section the host made for it
    /// (instead of the operator's `[tools.<name>]`): `neuron_create`.
    ///
    /// # Errors
    /// [`LoadError::Meta`] for a malformed meta or a name already taken.
    pub fn register_host_tool(
        &self,
        sandbox: &Sandbox,
        tool: Arc<dyn super::BuiltinTool>,
        section: ToolPolicy,
    ) -> Result<Arc<LoadedTool>, LoadError> {
        let raw = tool.meta();
        let path = PathBuf::from(format!("builtin:{}", raw.name));
        let meta_error = |error| LoadError::Meta {
            path: path.clone(),
            error,
        };
        let identity = super::builtin_identity(&raw);
        let meta = ToolMeta::from_raw(raw).map_err(meta_error)?;
        let validator = ArgsValidator::new(&meta.name, &meta.args_schema).map_err(|e| {
            meta_error(MetaError::SchemaInvalid {
                tool: meta.name.clone(),
                error: e.to_string(),
            })
        })?;
        let grants: Vec<Capability> = Vec::new();
        let loaded = Arc::new(LoadedTool {
            meta,
            hash: identity,
            path: path.clone(),
            source: ToolSource::Builtin(tool),
            validator,
            bindings: ToolBindings {
                execute: sandbox.factors().configure(&grants),
                dry_run: sandbox.factors().configure(&grants),
            },
            grants: Ok(grants),
            limits: section.limits,
            compiled: CacheOutcome::Disabled,
            own_policy: Some(section),
        });
        let mut tools = self.tools.write().map_err(|_| LoadError::Poisoned)?;
        if tools.contains_key(&loaded.meta.name) {
            return Err(meta_error(MetaError::BadName(format!(
                "{} (already taken)",
                loaded.meta.name
            ))));
        }
        tools.insert(loaded.meta.name.clone(), loaded.clone());
        Ok(loaded)
    }
}
