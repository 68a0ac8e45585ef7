//! The operator's decisions on neuron versions (`capsaga neurons
//! approve|reject|retire`, the console): the agent never grants, the
//! operator grants at most what a version requested, explicitly (all of it,
//! or a subset they chose), and only a tested version waiting for them can
//! be activated.

use crate::store::{NeuronOpError, NeuronRow, Store, Transition};
use capsaga_core::capability::Capability;
use capsaga_core::grant::granted_subset;
use capsaga_core::neuron::Status;
use capsaga_core::policy::expand_home;

/// Why a decision was refused.
#[derive(Debug, thiserror::Error)]
pub enum DecisionError {
    /// The store refused or failed.
    #[error(transparent)]
    Store(#[from] NeuronOpError),
    /// A `--grant` did not parse or is not concrete.
    #[error("grant `{grant}`: {why}")]
    BadGrant {
        /// As given.
        grant: String,
        /// Why.
        why: String,
    },
    /// The grants do not match what the version requested.
    #[error("{0}")]
    Grants(String),
}

fn store_err(e: crate::store::StoreError) -> DecisionError {
    DecisionError::Store(NeuronOpError::Store(e))
}

/// The version a decision is about: `version`, or the newest of `name`.
///
/// # Errors
/// [`NeuronOpError::NotFound`].
pub async fn version_of(
    store: &dyn Store,
    name: &str,
    version: Option<u32>,
) -> Result<NeuronRow, DecisionError> {
    store
        .neuron(name, version)
        .await
        .map_err(store_err)?
        .ok_or_else(|| {
            DecisionError::Store(NeuronOpError::NotFound(match version {
                Some(v) => format!("{name} version {v}"),
                None => name.to_string(),
            }))
        })
}

/// How much of a version's request the operator's grants must cover.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coverage {
    /// Every requested capability (`capsaga neurons approve` without
    /// `--partial`): a forgotten `--grant` is an error, not a silently
    /// weaker tool.
    All,
    /// Any subset (the console's form, `--partial`): what is left out is
    /// withheld and does not exist inside the neuron's sandbox.
    Subset,
}

/// Parse the operator's grants (`~` expanded with the policy's home) and
/// check them against what `row` requested: nothing it did not request,
/// every grant concrete, and with [`Coverage::All`] every requested
/// capability covered. Returns the effective grants (each narrowed to what
/// was requested: a write grant for a read request is stored as read),
/// sorted.
///
/// # Errors
/// [`DecisionError::BadGrant`] or [`DecisionError::Grants`].
pub fn check_grants(
    row: &NeuronRow,
    grants: &[String],
    home: &str,
    coverage: Coverage,
) -> Result<Vec<String>, DecisionError> {
    let mut parsed = Vec::new();
    for g in grants {
        let bad = |why: String| DecisionError::BadGrant {
            grant: g.clone(),
            why,
        };
        let cap = Capability::parse(g).map_err(|e| bad(e.to_string()))?;
        let cap = expand_home(cap, home).map_err(|e| bad(e.to_string()))?;
        if !cap.is_concrete() {
            return Err(bad("name a directory or a host, not `*`".into()));
        }
        parsed.push(cap);
    }
    let requested = requested(row);
    let refused = |e: String| {
        DecisionError::Grants(format!(
            "{e}; version {} requested: {}",
            row.version,
            if row.meta.capabilities.is_empty() {
                "nothing".to_string()
            } else {
                row.meta.capabilities.join(", ")
            }
        ))
    };
    let (effective, withheld) =
        granted_subset(&row.name, &requested, &parsed).map_err(|e| refused(e.to_string()))?;
    if coverage == Coverage::All && !withheld.is_empty() {
        return Err(refused(format!(
            "no grant for {} (grant it, or approve a subset with --partial)",
            withheld.join(", ")
        )));
    }
    Ok(effective.iter().map(ToString::to_string).collect())
}

fn requested(row: &NeuronRow) -> Vec<Capability> {
    row.meta
        .capabilities
        .iter()
        .filter_map(|c| Capability::parse(c).ok())
        .collect()
}

/// What `row` requested that its grants (`row.granted`) do not cover, as
/// the version wrote it: empty unless it was approved with a subset.
pub fn withheld(row: &NeuronRow) -> Vec<String> {
    let granted: Vec<Capability> = row
        .granted
        .iter()
        .filter_map(|g| Capability::parse(g).ok())
        .collect();
    granted_subset(&row.name, &requested(row), &granted)
        .map(|(_, withheld)| withheld)
        .unwrap_or_default()
}

/// Activate a version waiting for the operator with `grants` (checked by
/// [`check_grants`] for `coverage`), retiring the name's earlier active
/// version.
///
/// # Errors
/// [`DecisionError`].
pub async fn approve(
    store: &dyn Store,
    home: &str,
    row: &NeuronRow,
    grants: &[String],
    coverage: Coverage,
    by: &str,
    note: Option<&str>,
) -> Result<NeuronRow, DecisionError> {
    let granted = check_grants(row, grants, home, coverage)?;
    Ok(store
        .transition_neuron(&Transition {
            name: &row.name,
            version: row.version,
            to: Status::Active,
            by,
            note,
            granted: Some(&granted),
            report: None,
        })
        .await?)
}

/// Reject or retire a version (`to` is [`Status::Rejected`] or
/// [`Status::Retired`]).
///
/// # Errors
/// [`DecisionError`].
pub async fn decide(
    store: &dyn Store,
    row: &NeuronRow,
    to: Status,
    by: &str,
    note: Option<&str>,
) -> Result<NeuronRow, DecisionError> {
    Ok(store
        .transition_neuron(&Transition {
            name: &row.name,
            version: row.version,
            to,
            by,
            note,
            granted: None,
            report: None,
        })
        .await?)
}
