//! recall: an embedded semantic recall engine for AI agents' long-term memory.
//!
//! Agents write short memories (pitfalls, conventions, notes, preferences,
//! facts, episodes, session outcomes); later sessions ask what matters now and
//! get a small ranked set, each hit with the breakdown of its score.
//!
//! # Brief overview
//! - [`Engine`]: open a data directory, [`Engine::remember`] /
//!   [`Engine::remember_many`], [`Engine::recall`] (a [`RecallBuilder`] ending
//!   in `execute().await`), [`Engine::confirm`], [`Engine::supersede`],
//!   [`Engine::forget`], [`Engine::get`], [`Engine::history`], [`Engine::list`].
//! - [`NewMemory`] / [`Memory`]: the memory model; [`Remembered`] says whether a
//!   write was stored (with near neighbours) or deduplicated into an existing memory.
//! - [`Config`]: data directory, embedder ([`ModelSource`]), every tunable of
//!   the write path ([`WriteConfig`]) and the scorer ([`ScoringConfig`]).
//! - [`Breakdown`]: why a hit ranked where it did; the formula is in the `score` module's
//!   header (`engine/src/score.rs`), each factor a public function ([`relevance`], [`decay_multiplier`] …).
//! - Safety (§7): [`ReadPolicy`] (which banks a caller reads), [`Redactor`]
//!   (secrets replaced before storage), [`Screen`] (injection quarantined,
//!   [`Engine::release`]d after review), [`Engine::erase`] (physical
//!   right-to-erasure), [`Engine::audit`] (who did what, ids and hashes only).
//! - Lifecycle: [`Engine::end_session`] (citations, outcomes), [`Engine::mark_drift`],
//!   [`Engine::promote`], [`Engine::backfill`], [`Engine::briefing`],
//!   [`Engine::review_queue`], [`Engine::knowledge_map`].
//!
//! Storage is LanceDB (source of truth) behind a write-ahead log, BM25 is
//! tantivy, embeddings are all-MiniLM-L6-v2 run locally (see `recall-indexer`).
//!
//! ```
//! use recall::{Config, Engine, Kind, ModelSource, NewMemory, Remembered, Trust};
//! # tokio::runtime::Runtime::new()?.block_on(async {
//! let dir = tempfile::tempdir()?;
//! let engine = Engine::open(Config::new(dir.path()).model(ModelSource::None)).await?;
//! let first = engine
//!     .remember(NewMemory::new("acme", "repo:api", Kind::Pitfall, "The gateway strips headers over 8 KB").trust(Trust::User).element("ApiGateway"))
//!     .await?;
//! // The same text again confirms the first memory instead of storing a copy.
//! let again = engine
//!     .remember(NewMemory::new("acme", "repo:api", Kind::Pitfall, "the gateway strips headers over 8 KB!").trust(Trust::User))
//!     .await?;
//! assert!(matches!(again, Remembered::Deduplicated { id, .. } if id == first.id()));
//! let result = engine.recall("acme", "gateway headers").read(["repo:api"]).execute().await?;
//! assert_eq!(result.hits.len(), 1);
//! assert_eq!(result.hits[0].memory.confirmations, 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

#[cfg(feature = "mimalloc")]
pub mod allocator;
mod background;
mod briefing;
mod clock;
mod config;
mod consolidation;
mod derived;
mod engine;
mod erasure;
mod error;
mod event;
mod footprint;
mod import;
mod lifecycle;
mod links;
mod memory;
mod model;
mod names;
mod policy;
mod proposals;
mod rank;
mod recall_path;
mod redact;
mod review;
mod score;
mod screen;
mod sentences;
mod state;
mod updates;
mod validate;
mod write_policy;

pub use background::Background;
pub use briefing::{BRIEFING_HEADER, briefing_line};
pub use clock::{Clock, FixedClock, SystemClock};
pub use config::{
    Band, Bm25Normalization, Config, KindWeights, LexicalSupport, LiftBand, ModelSource,
    QuestionEvidence, ScoringConfig, WriteConfig,
};
pub use consolidation::{
    Consolidate, Consolidation, ConsolidationBatch, Consolidator, DefaultConsolidator,
    LanguageModel, ModelConsolidator, ModelFuture, ModelRequest, Pair, Proposal, ProposalOutcome,
    reads_as_change,
};
pub use engine::{Engine, Status};
pub use erasure::{EraseScope, Erased};
pub use error::{Error, Result};
pub use footprint::MemoryUse;
pub use import::{IMPORT_BATCH, parse_import_line};
pub use lifecycle::{Cited, EndSession, SessionEnded};
pub use links::parse_links;
pub use memory::{
    Kind, Link, Memory, NewMemory, ProposalStatus, Proposed, Remembered, Similar, Source, Trust,
};
pub use model::{MODEL_DIR_VAR, default_model_dirs, find_model_dir};
pub use names::{asks_for_advice, named_words};
pub use policy::{BankMode, ProposalPolicy, ReadPolicy};
pub use proposals::PendingProposal;
pub use rank::{Hit, RecallResult};
pub use recall_path::RecallBuilder;
pub use redact::{DefaultRedactor, Redaction, Redactor};
pub use review::{ElementSummary, Ignored, KnowledgeMap, ReviewQueue, SimilarPair};
pub use score::{
    Breakdown, Explanation, PartCosines, decay_multiplier, drift_multiplier, effective_confidence,
    evidence_raise, is_evidence, lexical_share, names_unknown, normalize_bm25, relevance,
    usage_multiplier,
};
pub use screen::{DefaultScreen, Screen, ScreenMatch};
pub use sentences::{MAX_SENTENCES, is_question, sentences};
pub use validate::scope_name as validate_scope_name;

pub use recall_indexer::{
    AuditEntry, AuditOp, Durability, Embedder, FastEmbedder, HashEmbedder, IndexerError, Remote,
    ScanConfig,
};
#[cfg(feature = "s3")]
pub use recall_indexer::{Member, Members, validate_node_id};
