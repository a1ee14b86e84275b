//! The persisted shapes: memory rows (immutable once written) and events
//! (everything that changes afterwards).
//!
//! The indexer stores strings and numbers; what they mean (kinds, trust, the
//! scoring) is the engine's business.

use serde::{Deserialize, Serialize};

/// One memory as written to the `memories` table. Never rewritten: later
/// changes (confirmations, forgetting, supersession, usage, drift) are
/// [`EventRow`]s, so a recall never rewrites table rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryRow {
    /// Store-wide sequence number, assigned by [`crate::Store`]; also the
    /// lexical index's document key.
    pub seq: u64,
    /// UUID v7, as text.
    pub id: String,
    /// Hard partition.
    pub tenant: String,
    /// Scope inside the tenant.
    pub bank: String,
    /// Memory kind, as text.
    pub kind: String,
    /// Optional unique title.
    pub title: Option<String>,
    /// The (redacted) text.
    pub content: String,
    /// Things the memory is about.
    pub elements: Vec<String>,
    /// `explicit` or `inferred`.
    pub source: String,
    /// `user`, `agent`, `external` or `quarantined`.
    pub trust: String,
    /// Free provenance: the agent that wrote it.
    pub agent: Option<String>,
    /// Free provenance: the session it came from.
    pub session_id: Option<String>,
    /// Confidence in (0, 1].
    pub confidence: f32,
    /// When the fact was said (ms since the Unix epoch).
    pub observed_at_ms: i64,
    /// When it was written (ms since the Unix epoch).
    pub created_at_ms: i64,
    /// When it leaves recall, if ever (ms since the Unix epoch).
    pub expires_at_ms: Option<i64>,
    /// The id this memory supersedes, if any.
    pub supersedes: Option<String>,
    /// The content's embedding, when an embedder was configured.
    pub vector: Option<Vec<f32>>,
}

/// A change to an existing memory, appended to the `events` table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventRow {
    /// Store-wide sequence number, assigned by [`crate::Store`].
    pub seq: u64,
    /// The tenant of the memory it changes.
    pub tenant: String,
    /// The memory it changes.
    pub memory_id: String,
    /// What happened (`confirm`, `forget`, `superseded_by`, …; the engine defines them).
    pub op: String,
    /// When it happened (ms since the Unix epoch).
    pub at_ms: i64,
    /// An argument whose meaning depends on `op` (e.g. the superseding id).
    pub arg: Option<String>,
}

/// A vector computed after the memory was written (backfill, once an
/// embedder is configured for a store written without one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VectorRow {
    /// Store-wide sequence number, assigned by [`crate::Store`].
    pub seq: u64,
    /// The tenant of the memory.
    pub tenant: String,
    /// The memory it belongs to.
    pub memory_id: String,
    /// The embedding.
    pub vector: Vec<f32>,
}

/// One durable write: a new memory, an event, or a backfilled vector.
// Most records are memories, so boxing the large variant would only add an
// allocation per write.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Record {
    /// A new memory row.
    Memory(MemoryRow),
    /// A change to an existing memory.
    Event(EventRow),
    /// A backfilled vector.
    Vector(VectorRow),
}

impl Record {
    /// The record's sequence number.
    pub fn seq(&self) -> u64 {
        match self {
            Record::Memory(m) => m.seq,
            Record::Event(e) => e.seq,
            Record::Vector(v) => v.seq,
        }
    }

    pub(crate) fn set_seq(&mut self, seq: u64) {
        match self {
            Record::Memory(m) => m.seq = seq,
            Record::Event(e) => e.seq = seq,
            Record::Vector(v) => v.seq = seq,
        }
    }
}
