//! The engine's error type.

use recall_indexer::IndexerError;

/// Everything a call can fail with. Bad input is reported before anything is
/// written; storage errors carry the underlying cause as `source`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An argument is malformed (empty, too long, out of range, path-like …).
    #[error("invalid {field}: {reason}")]
    InvalidInput {
        /// Which argument.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The kind is not one of the closed set (§2).
    #[error(
        "unknown kind `{0}` (expected pitfall, convention, note, session_outcome, preference, fact or episode)"
    )]
    UnknownKind(String),
    /// Content longer than the limit after redaction.
    #[error("content is {len} bytes; the limit is {max}")]
    ContentTooLong {
        /// Its length in bytes.
        len: usize,
        /// The configured limit.
        max: usize,
    },
    /// No memory with that id or title in this tenant.
    #[error("no memory `{key}` in tenant `{tenant}`")]
    NotFound {
        /// The tenant searched.
        tenant: String,
        /// The id or title asked for.
        key: String,
    },
    /// Another active memory of the tenant already has this title.
    #[error("title `{title}` is already used by memory {id}")]
    TitleTaken {
        /// The title.
        title: String,
        /// The memory that holds it.
        id: uuid::Uuid,
    },
    /// The operation does not apply to the memory in its current state.
    #[error("memory {id}: {reason}")]
    Conflict {
        /// The memory.
        id: uuid::Uuid,
        /// Why the operation does not apply.
        reason: String,
    },
    /// A model directory was named (by `setting`) but holds no model.
    #[error("{setting} is {dir}, which holds no model.onnx (run scripts/setup.sh, or unset it)")]
    ModelNotFound {
        /// The directory named.
        dir: std::path::PathBuf,
        /// What named it (`RECALL_MODEL_DIR`).
        setting: &'static str,
    },
    /// Storage, index or embedding failure below the engine.
    #[error(transparent)]
    Storage(#[from] IndexerError),
    /// A language model plugged into consolidation failed, or answered
    /// outside its schema; nothing of its answer was applied.
    #[error("the language model: {reason}")]
    Model {
        /// What went wrong.
        reason: String,
    },
    /// A background task died.
    #[error("internal task failed: {0}")]
    Task(String),
}

impl Error {
    pub(crate) fn not_found(tenant: &str, key: impl ToString) -> Error {
        Error::NotFound {
            tenant: tenant.to_string(),
            key: key.to_string(),
        }
    }

    pub(crate) fn invalid(field: &'static str, reason: impl Into<String>) -> Error {
        Error::InvalidInput {
            field,
            reason: reason.into(),
        }
    }
}

/// Result alias for the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;
