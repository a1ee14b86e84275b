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
    /// A batch or value is larger than the log's frame format can hold;
    /// nothing was written.
    #[error("{what} is too large: {len} bytes, at most {max}")]
    TooLarge {
        /// What was too large (`write-ahead log frame`, `vector`).
        what: &'static str,
        /// Its size.
        len: u64,
        /// The largest allowed.
        max: u64,
    },
    /// A lock was poisoned by a thread that panicked while holding it; the
    /// structure it guards may be half-updated, so the store must be reopened.
    #[error("the {what} lock was poisoned by a panic; reopen the store")]
    Poisoned {
        /// What the lock guards.
        what: &'static str,
    },
    /// A background task (the log flush) panicked or failed earlier; its
    /// writes stay in the log and are replayed at the next open.
    #[error("background {task} failed: {detail}")]
    Background {
        /// Which task.
        task: &'static str,
        /// What happened to it.
        detail: String,
    },
    /// A path the tables are addressed by is not valid UTF-8.
    #[error("{path} is not valid UTF-8 (LanceDB addresses tables by a UTF-8 URI)")]
    NonUtf8Path {
        /// The path.
        path: PathBuf,
    },
    /// The store was closed and is being reopened; the call can be retried
    /// on the reopened store.
    #[error("the {what} is closed (reopen the store)")]
    Closed {
        /// What is closed.
        what: &'static str,
    },
    /// The store is read-only until it is reopened: it opened while the log
    /// could not be replayed into the tables (most often a full disk); or
    /// since then an fsync of the log or the audit log failed (the data it
    /// was meant to make durable cannot be trusted to a retry), a BM25
    /// index commit failed, or an erasure stopped part-way. Reads serve
    /// everything acknowledged (and nothing an unfinished erasure covers);
    /// a reopen reads back what is on disk and finishes the erasure.
    #[error("the store is read-only until it is reopened: {reason}")]
    ReadOnly {
        /// What failed.
        reason: String,
    },
    /// Another engine (this process or another) has the data directory open.
    #[error("{path} is in use by another recall engine (one writer per data directory)")]
    Locked {
        /// The lock file.
        path: PathBuf,
    },
    /// A node id (`recall serve --node-id`) is not 1 to 64 characters of
    /// `A-Z a-z 0-9 . _ -` (it names an object and a directory).
    #[error("invalid node id {node:?}: use 1 to 64 characters of A-Z a-z 0-9 . _ -")]
    InvalidNodeId {
        /// The id as given.
        node: String,
    },
    /// A remote location ([`crate::Remote`]) is malformed or its options
    /// are not understood; nothing was opened.
    #[error("invalid storage location {uri}: {reason}")]
    InvalidRemote {
        /// The location as given.
        uri: String,
        /// What is wrong with it.
        reason: String,
    },
    /// This build cannot do what was asked (a cargo feature is off).
    #[error("{what} needs recall built with the cargo feature `{feature}`")]
    FeatureMissing {
        /// What was asked.
        what: &'static str,
        /// The feature that provides it.
        feature: &'static str,
    },
    /// Object storage failed (after object_store's own retries with
    /// backoff): the request, the object and the error.
    #[error("object storage error: {operation} {location}: {detail}")]
    ObjectStore {
        /// `put`, `get`, `list` or `delete`.
        operation: &'static str,
        /// The object (or prefix).
        location: String,
        /// The error object_store reported.
        detail: String,
    },
    /// Another writer wrote the log object this store meant to write: two
    /// processes are writing one store. Nothing of this call was written;
    /// the store refuses writes until it is reopened (which reads what the
    /// other writer wrote).
    #[error("another writer holds this store: {location} already exists")]
    WriterConflict {
        /// The log object that already existed.
        location: String,
    },
    /// Another process holds the writer's lease of this store on object
    /// storage and did not give it up within the wait.
    #[error(
        "another recall process ({holder}) writes this store; its lease expires in {expires_in_ms} ms"
    )]
    LeaseHeld {
        /// Who holds it.
        holder: String,
        /// The recall node that holds it, when a node does
        /// ([`crate::Remote::node`]).
        node: Option<String>,
        /// How long until another process may take it over.
        expires_in_ms: u64,
    },
    /// This process no longer holds the store's lease (it lapsed, or
    /// another process took it over): nothing more is written, and a
    /// write in flight was not acknowledged. Reopen to take it again.
    #[error("this process lost the store's writer lease: {reason}")]
    LeaseLost {
        /// What happened.
        reason: String,
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
    /// The store was written with a model of another width than the one
    /// it is opened with: its vectors and the new ones cannot be compared.
    #[error(
        "this store's vectors are {store} wide and the model's {model}: it was written with \
         another model; open it with that one (RECALL_MODEL_DIR, or Config::model)"
    )]
    ModelMismatch {
        /// The width of the store's vectors.
        store: usize,
        /// The width of the model's.
        model: usize,
    },
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
