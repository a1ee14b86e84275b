//! recall's benches and research runner (`recall-bench`).
//!
//! - [`eval`]: writes haystacks into fresh engines through the normal write
//!   path and scores rankers on their questions.
//! - [`sources`]: LongMemEval and LoCoMo files as haystacks.
//! - [`metrics`]: recall_any@k, recall_all@k, nDCG@k, MRR (SPEC §9).
//! - [`vector_cache`]: embeddings cached on disk by content hash.
//! - [`report`]: markdown, JSON, SVG plots.
//! - [`progress`]: progress bars on stderr.
//! - [`commands`]: the `recall-bench` command line and what each command runs.
//! - [`tunables`]: every scorer tunable by name, the table `sweep` reads.
//! - [`corpus_eval`]: the write-and-recall path on a seeded agent-memory
//!   corpus with known answers.
//! - [`consolidation_eval`]: the default consolidation pass on a corpus
//!   with known groups.
//! - [`scale`]: speed against corpus size; [`lean`]: its `--lean` run for
//!   sizes too large to hold twice (ten million memories).
//! - [`open_probe`]: a store `scale` built, opened and recalled from in a
//!   process of its own (open time and resident memory).
//! - [`peers`]: recall beside LanceDB, tantivy and the exact scan.
//! - [`speed`]: synthetic corpora in engines, for `scale` and criterion.
//! - [`storage`]: the engine on S3-compatible object storage beside a local
//!   directory, and failover.
//! - [`nodes`]: `recall serve` nodes sharing one S3 root: forwarding and
//!   failover.

pub mod commands;
pub mod consolidation_eval;
pub mod corpus_eval;
pub mod eval;
pub mod lean;
pub mod metrics;
pub mod nodes;
pub mod open_probe;
pub mod peers;
pub mod progress;
pub mod report;
pub mod scale;
pub mod sources;
pub mod speed;
pub mod storage;
pub mod tunables;
pub mod vector_cache;

pub use speed::{
    DIM, TENANT, banks, corpus, fill, open_engine, percentile, to_new, with_sentence_vectors,
};
