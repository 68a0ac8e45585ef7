//! Fitness of neuron versions from the log of their calls (every saga step
//! pins the identity it ran), and retirement below the policy's threshold
//! (`[neurons] retire_below`), recorded in the log and in the process log.

use crate::store::{NeuronRow, Store, StoreError, Transition};
use capsaga_core::neuron::Status;
use capsaga_core::neuron::fitness::{Fitness, fitness, should_retire};
use capsaga_core::policy::Policy;

/// Who the host records for an automatic retirement.
pub const RETIRE_BELOW: &str = "host:retire_below";

/// The fitness of one version.
///
/// # Errors
/// [`StoreError`].
pub async fn of(store: &dyn Store, row: &NeuronRow) -> Result<Fitness, StoreError> {
    Ok(fitness(&store.calls_of(&row.identity).await?))
}

/// Retire every active version whose fitness is below
/// `[neurons] retire_below`; returns the versions retired.
///
/// # Errors
/// [`StoreError`].
pub async fn retire_unfit(
    store: &dyn Store,
    policy: &Policy,
) -> Result<Vec<NeuronRow>, StoreError> {
    let Some(below) = policy.neurons.retire_below else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for row in store.neurons(None).await? {
        if row.status != Status::Active {
            continue;
        }
        let f = of(store, &row).await?;
        if !should_retire(&f, &below) {
            continue;
        }
        let note = format!(
            "success rate {:.2} over {} calls is below {:.2}",
            f.success_rate.unwrap_or(0.0),
            f.calls,
            below.success_rate
        );
        tracing::warn!(
            "neuron `{}` version {} retired: {note}",
            row.name,
            row.version
        );
        let t = Transition {
            name: &row.name,
            version: row.version,
            to: Status::Retired,
            by: RETIRE_BELOW,
            note: Some(&note),
            granted: None,
            report: None,
        };
        match store.transition_neuron(&t).await {
            Ok(r) => out.push(r),
            Err(crate::store::NeuronOpError::Store(e)) => return Err(e),
            Err(e) => tracing::warn!("{e}"),
        }
    }
    Ok(out)
}
