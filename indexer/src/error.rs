//! The indexer's error type.

use std::path::PathBuf;

/// Everything that can go wrong below the engine: files, LanceDB, tantivy, the model.
///
/// Not-found and corrupt are separate variants so callers can tell "nothing
/// there yet" from "something there is damaged" (the latter is never served).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IndexerError {
    /// A file operation failed; the path says which file.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// LanceDB (the source of truth) failed.
    #[error("LanceDB error on table `{table}`: {source}")]
    Lance {
        /// The table involved.
        table: String,
        /// The underlying error.
        source: Box<lancedb::Error>,
    },
    /// The tantivy BM25 index failed.
    #[error("tantivy error: {0}")]
    Tantivy(#[from] tantivy::TantivyError),
    /// Stored data is damaged: it is reported and never served.
    #[error("corrupt {what}: {detail}")]
    Corrupt {
        /// Which file or structure.
        what: String,
        /// What was wrong with it.
        detail: String,
    },
    /// Another engine (this process or another) has the data directory open.
    #[error("{path} is in use by another recall engine (one writer per data directory)")]
    Locked {
        /// The lock file.
        path: PathBuf,
    },
    /// The embedding model files are missing (run `scripts/setup.sh`).
    #[error("embedding model not found: {path} is missing (run scripts/setup.sh)")]
    ModelMissing {
        /// The missing file.
        path: PathBuf,
    },
    /// The embedder failed or returned an unusable vector.
    #[error("embedding failed: {0}")]
    Embedding(String),
}

impl IndexerError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> IndexerError {
        let path = path.into();
        move |source| IndexerError::Io { path, source }
    }

    pub(crate) fn lance(table: &str) -> impl FnOnce(lancedb::Error) -> IndexerError + '_ {
        move |source| IndexerError::Lance {
            table: table.to_string(),
            source: Box::new(source),
        }
    }

    pub(crate) fn corrupt(what: impl Into<String>, detail: impl Into<String>) -> IndexerError {
        IndexerError::Corrupt {
            what: what.into(),
            detail: detail.into(),
        }
    }
}

/// Result alias for the indexer.
pub type Result<T, E = IndexerError> = std::result::Result<T, E>;
