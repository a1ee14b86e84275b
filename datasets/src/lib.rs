//! Data for recall's evaluation and benches.
//!
//! - [`synthetic`]: seeded engineering corpora with clustered vectors for
//!   speed runs (10k … 1M memories without a model in the loop).
//! - [`corpus`]: seeded agent-memory corpora with known answers: tenants,
//!   banks, kinds and elements over a year, with controlled shares of
//!   exact repeats, paraphrases, knowledge updates and drifted elements,
//!   and queries naming their gold writes.
//! - [`longmemeval`]: the LongMemEval instance format (SPEC §9), loading the
//!   released files unchanged and writing generated ones.
//! - [`probes`]: a seeded generator of LongMemEval-style probes covering
//!   single-session-user, single-session-preference, multi-session,
//!   knowledge-update, temporal-reasoning and abstention (`_abs`).
//! - [`chat_probes`]: a second, independent probe generator (no template,
//!   filler, name or value in common with [`probes`]); its seed 11 is the
//!   held-out set no default is tuned on.
//! - [`locomo`]: the LoCoMo loader with the dataset README's cleaning
//!   rules, the train/test split by conversation ([`locomo::Split`]) and
//!   cross-conversation unanswerable questions.

pub mod chat_probes;
pub mod corpus;
pub mod locomo;
pub mod longmemeval;
pub mod probes;
pub mod synthetic;

pub use synthetic::{SyntheticCorpus, SyntheticMemory, near_copy, query_near, synthetic_corpus};

/// What can go wrong reading an evaluation file.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not in the expected format.
    #[error("{path}: {reason}")]
    Format {
        /// The file.
        path: String,
        /// What is wrong, with the offending field.
        reason: String,
    },
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, DatasetError>;

pub(crate) fn read(path: &std::path::Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|source| DatasetError::Io {
        path: path.display().to_string(),
        source,
    })
}

pub(crate) fn format_error(path: &std::path::Path, reason: impl std::fmt::Display) -> DatasetError {
    DatasetError::Format {
        path: path.display().to_string(),
        reason: reason.to_string(),
    }
}
