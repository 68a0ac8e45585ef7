//! The memory's errors, each with a kind the agent or the operator can act
//! on (the `error-kind` vocabulary of the tool world) and a hint.

use std::path::PathBuf;

/// What went wrong in memory.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// The embedding model's files are missing or unreadable.
    #[error(
        "embedding model: {path}: {reason} (run scripts/setup, or point [memory] model_dir at a directory holding all-MiniLM-L6-v2's model.safetensors and tokenizer.json)"
    )]
    Model {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The model ran but failed (a tensor operation, the tokenizer).
    #[error("embedding failed: {0}")]
    Embed(String),
    /// An embedding of the wrong length: the database was filled by another
    /// model, or a stored vector is damaged.
    #[error(
        "embedding dimension mismatch: {what} has {found} dimensions, the model gives {expected}"
    )]
    Dimension {
        /// What was checked (`the database`, `fact f-…`).
        what: String,
        /// What the embedder produces.
        expected: usize,
        /// What was found.
        found: usize,
    },
    /// The memory database is not capsaga's, or is damaged.
    #[error(
        "memory database {path}: {reason} (nothing was changed; move the file aside to start an empty memory)"
    )]
    Database {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A statement failed on a database that opened fine.
    #[error("memory database: {0}")]
    Sql(String),
    /// A required core memory file is missing (seed 004 `ensure_core`).
    #[error(
        "core memory: the required file {path} is missing or unreadable ({reason}); create it, or remove it from [memory] core_required"
    )]
    CoreMissing {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A file of the memory (MEMORY.md, an archive) could not be written.
    #[error("{path}: {reason}")]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// No fact, episode or proposal with that id.
    #[error("no {what} with id `{id}` in memory")]
    NotFound {
        /// `fact`, `episode` or `proposal`.
        what: &'static str,
        /// The id asked for.
        id: String,
    },
    /// The request is malformed (an empty fact, a text over the limit).
    #[error("{0}")]
    Invalid(String),
    /// The model that writes summaries and reflections failed.
    #[error("summariser: {0}")]
    Summarise(String),
}

impl MemoryError {
    /// The tool-world error kind: `invalid-args`, `not-found`,
    /// `external-error` (files, model, database) or `unknown`.
    pub fn kind(&self) -> &'static str {
        match self {
            MemoryError::Invalid(_) => "invalid-args",
            MemoryError::NotFound { .. } => "not-found",
            MemoryError::Model { .. }
            | MemoryError::Database { .. }
            | MemoryError::CoreMissing { .. }
            | MemoryError::File { .. }
            | MemoryError::Dimension { .. }
            | MemoryError::Summarise(_) => "external-error",
            MemoryError::Embed(_) | MemoryError::Sql(_) => "unknown",
        }
    }

    /// What the model should try next.
    pub fn llm_hint(&self) -> &'static str {
        match self {
            MemoryError::Invalid(_) => "fix the arguments as the message says and call again",
            MemoryError::NotFound { .. } => {
                "search memory first with memory_fetch to get valid ids"
            }
            _ => "memory is unavailable for now: go on without it and tell the user",
        }
    }
}

/// A result of the memory.
pub type Result<T, E = MemoryError> = std::result::Result<T, E>;
