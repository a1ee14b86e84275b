//! Storage and indexes for recall.
//!
//! - [`Store`]: the durable store. A write-ahead log ([`Durability`]) in front
//!   of two LanceDB tables, `memories` (one immutable row per memory, vector as
//!   `FixedSizeList<Float32, dim>`), `events` (every later change) and
//!   `vectors` (embeddings backfilled after the fact), with a
//!   tantivy BM25 index ([`LexicalSearcher`]) derived from them and caught up
//!   or rebuilt at open.
//! - [`Store::erase`] with an [`EraseSelector`]: physical right-to-erasure
//!   across the log, the tables (old versions pruned) and the BM25 segments,
//!   finished at the next open if a crash interrupts it; [`AuditEntry`] lines
//!   in the append-only audit log (ids and hashes, never content).
//! - [`VectorSet`]: one tenant's vectors in memory and the nearest-neighbour
//!   scan of the hot recall path (exact, or sign codes + exact re-scoring).
//! - [`Embedder`]: text → vector; [`FastEmbedder`] runs all-MiniLM-L6-v2
//!   locally, [`HashEmbedder`] is a deterministic stand-in for tests.
//!
//! ```
//! use recall_indexer::{MemoryRow, Record, Store, StoreOptions};
//! # tokio::runtime::Runtime::new()?.block_on(async {
//! let dir = tempfile::tempdir()?;
//! let (mut store, recovered) = Store::open(StoreOptions::new(dir.path(), 4)).await?;
//! assert!(recovered.records.is_empty());
//! let row = MemoryRow {
//!     seq: 0, id: "m1".into(), tenant: "acme".into(), bank: "org".into(),
//!     kind: "note".into(), title: None, content: "deploys run at noon".into(),
//!     elements: vec![], source: "explicit".into(), trust: "user".into(),
//!     agent: None, session_id: None, confidence: 1.0, observed_at_ms: 0,
//!     created_at_ms: 0, expires_at_ms: None, supersedes: None,
//!     vector: Some(vec![1.0, 0.0, 0.0, 0.0]), sentences: vec![],
//! };
//! store.append(vec![Record::Memory(row)]).await?;
//! let hits = store.lexical().search("acme", &["org"], "deploy", 10)?;
//! assert_eq!(hits.len(), 1);
//! drop(store);
//! let (_, recovered) = Store::open(StoreOptions::new(dir.path(), 4)).await?;
//! assert_eq!(recovered.records.len(), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

mod audit;
mod blocks;
mod codes;
mod derived_file;
mod embedder;
mod erasure;
mod error;
#[cfg(feature = "faults")]
pub mod faults;
#[cfg(not(feature = "faults"))]
mod faults;
mod kernels;
mod lexical;
mod log_payload;
mod mapped;
mod near;
mod partitions;
mod remote;
mod rows;
#[cfg(feature = "s3-server")]
pub mod s3_server;
mod store;
mod table;
mod vectors;
mod wal;

pub use audit::{AuditEntry, AuditOp};
pub use derived_file::write_derived;
pub use embedder::{
    DEFAULT_DIM, Embedder, FastEmbedder, HashEmbedder, ORT_LIBRARY, embed_checked, normalized,
};
pub use erasure::EraseSelector;
pub use error::{IndexerError, Result};
pub use lexical::LexicalHit;
pub use mapped::{ROW_KEY_BYTES, RowKey};
pub use near::near_pairs;
pub use partitions::{SAVED_HEADER_BYTES, saved_partitions_rows};
pub use remote::Remote;
#[cfg(feature = "s3")]
pub use remote::{Member, Members, validate_node_id};
pub use rows::{EventRow, MemoryRow, Record, VectorRow};
pub use store::{DEFAULT_FLUSH_EVERY, Durability, LexicalSearcher, Recovered, Store, StoreOptions};
pub use vectors::{
    Hits, MappedBlocks, PartitionsResumed, Placement, ScanConfig, VectorBytes, VectorSet, dot,
};
