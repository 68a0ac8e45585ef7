//! [`NeuronStore`]: agent-written tools (neurons), every version kept,
//! content-addressed, with its provenance and its life (see
//! `capsaga_core::neuron`).

use super::StoreError;
use async_trait::async_trait;
use capsaga_core::meta::RawToolMeta;
use capsaga_core::neuron::Status;
use capsaga_core::neuron::fitness::CallRecord;
use serde::Serialize;
use serde_json::Value;

/// One stored version of a neuron.
#[derive(Debug, Clone, Serialize)]
pub struct NeuronRow {
    /// Its name.
    pub name: String,
    /// 1, 2, ... per name, in order of submission.
    pub version: u32,
    /// `capsaga_core::neuron::identity` (lowercase hex): what the WAL pins.
    pub identity: String,
    /// SHA-256 of the runner component it was tested with.
    pub runner_hash: String,
    /// Where it is in its life.
    pub status: Status,
    /// The meta the runner returns (its `version` is [`NeuronRow::version`]).
    pub meta: RawToolMeta,
    /// Python source.
    pub source: String,
    /// The examples as submitted (JSON array).
    pub examples: Value,
    /// The last report of its examples (JSON), once run.
    pub report: Option<Value>,
    /// Capabilities the operator granted (a subset of `meta.capabilities`).
    pub granted: Vec<String>,
    /// Provenance: the saga of the `neuron_create` step.
    pub saga_id: Option<String>,
    /// Provenance: that step's position.
    pub step_seq: Option<u64>,
    /// Provenance: the trace of the turn (found by its saga), once saved.
    pub trace_id: Option<String>,
    /// Provenance: the model of that turn, when known.
    pub model: Option<String>,
    /// Who made the last decision (`cli:alice`, `host:auto_activate_pure`,
    /// `host:retire_below`, ...).
    pub decided_by: Option<String>,
    /// Why (operator's note, or the host's reason).
    pub note: Option<String>,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
}

/// A version about to be stored (status `proposed`).
#[derive(Debug, Clone)]
pub struct NewNeuron<'a> {
    /// Its identity.
    pub identity: &'a str,
    /// The runner's hash.
    pub runner_hash: &'a str,
    /// Its meta (`version` is replaced by the number the store assigns).
    pub meta: &'a RawToolMeta,
    /// Python source.
    pub source: &'a str,
    /// Its examples (JSON array).
    pub examples: &'a Value,
    /// The report of its examples, when they were run before storing.
    pub report: Option<&'a Value>,
    /// The saga of the `neuron_create` step, if any.
    pub saga_id: Option<&'a str>,
    /// That step's position.
    pub step_seq: Option<u64>,
}

/// A change of status.
#[derive(Debug, Clone)]
pub struct Transition<'a> {
    /// The neuron.
    pub name: &'a str,
    /// Its version.
    pub version: u32,
    /// The new status (must be allowed by `Status::can_become`).
    pub to: Status,
    /// Who decides.
    pub by: &'a str,
    /// Why.
    pub note: Option<&'a str>,
    /// The grants, when activating.
    pub granted: Option<&'a [String]>,
    /// The examples' report, when setting it.
    pub report: Option<&'a Value>,
}

/// What removing a pending version did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removed {
    /// It was pending and is gone.
    Removed,
    /// No version with that identity (already removed).
    Absent,
    /// It is no longer pending (approved, retired, rejected): kept.
    Kept(Status),
}

/// Why a neuron operation failed.
#[derive(Debug, thiserror::Error)]
pub enum NeuronOpError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No such neuron or version.
    #[error("no neuron `{0}`")]
    NotFound(String),
    /// The change is not allowed from the version's status.
    #[error("neuron `{name}` version {version} is {from}: it cannot become {to}")]
    Refused {
        /// The neuron.
        name: String,
        /// Its version.
        version: u32,
        /// Its status.
        from: Status,
        /// The status asked for.
        to: Status,
    },
}

/// Neurons (`neurons`). Every write also appends a `NEURON` record to the
/// hash-chained log (saga id `neuron:<name>`), in the same transaction, so
/// the life of every version is in the audited log.
#[async_trait]
pub trait NeuronStore: Send + Sync {
    /// Store a new version as `proposed`, numbered after the name's last
    /// one; when a version with the same identity exists, return it
    /// unchanged instead (`false`).
    ///
    /// # Errors
    /// [`StoreError`].
    async fn propose_neuron(&self, n: &NewNeuron<'_>) -> Result<(NeuronRow, bool), StoreError>;

    /// Change a version's status (and its grants or report). Activating a
    /// version retires the name's other active version in the same
    /// transaction.
    ///
    /// # Errors
    /// [`NeuronOpError::NotFound`], [`NeuronOpError::Refused`] or a store
    /// error.
    async fn transition_neuron(&self, t: &Transition<'_>) -> Result<NeuronRow, NeuronOpError>;

    /// Remove the version with `identity` if it is still pending (the
    /// compensation of its `neuron_create` step).
    ///
    /// # Errors
    /// [`StoreError`].
    async fn remove_pending_neuron(&self, identity: &str, by: &str) -> Result<Removed, StoreError>;

    /// Every version (of `name`, or of all neurons), by name then version.
    ///
    /// # Errors
    /// [`StoreError`].
    async fn neurons(&self, name: Option<&str>) -> Result<Vec<NeuronRow>, StoreError>;

    /// One version of `name` (the newest when `version` is None).
    ///
    /// # Errors
    /// [`StoreError`].
    async fn neuron(
        &self,
        name: &str,
        version: Option<u32>,
    ) -> Result<Option<NeuronRow>, StoreError>;

    /// The version with this identity.
    ///
    /// # Errors
    /// [`StoreError`].
    async fn neuron_by_identity(&self, identity: &str) -> Result<Option<NeuronRow>, StoreError>;

    /// The finished calls logged for the tool identity `identity` (saga
    /// steps pinning it), for its fitness.
    ///
    /// # Errors
    /// [`StoreError`].
    async fn calls_of(&self, identity: &str) -> Result<Vec<CallRecord>, StoreError>;
}
