//! The durable store: write-ahead log in front of the LanceDB tables, with the
//! tantivy index kept in step.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::audit::{AuditEntry, AuditLog};
use crate::erase::{self, EraseSelector};
use crate::error::{IndexerError, Result};
use crate::lexical::{LexicalHit, LexicalIndex};
use crate::rows::{EventRow, MemoryRow, Record, VectorRow};
use crate::table::Tables;
use crate::wal::Wal;

/// What a successful write guarantees. recall has one level today; it is
/// named so the guarantee is written down where callers look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Durability {
    /// The write is in the write-ahead log and fsynced before the call
    /// returns: a crash or `kill -9` right after loses nothing. Records reach
    /// the LanceDB tables in batches ([`StoreOptions::flush_every`]) and the
    /// log is replayed at open, so the tables plus the log always hold every
    /// acknowledged write exactly once.
    #[default]
    Immediate,
}

/// How a [`Store`] is opened.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// The data directory (tables in `tables/`, BM25 index in `lexical/`, log in
    /// `wal.log`, audit log in `audit.jsonl`, a pending erasure in `ERASING`).
    pub dir: PathBuf,
    /// Vector width of the `memories` table.
    pub dim: usize,
    /// Records buffered in the log before they are written to the tables. Default 1,024.
    pub flush_every: usize,
    /// Table flushes between background compactions of small fragments. Default 16.
    pub compact_every: usize,
}

impl StoreOptions {
    /// Defaults for a data directory and vector width.
    pub fn new(dir: impl Into<PathBuf>, dim: usize) -> StoreOptions {
        StoreOptions {
            dir: dir.into(),
            dim,
            flush_every: 1024,
            compact_every: 16,
        }
    }
}

/// Everything the store held at open: every record, in sequence order. The
/// engine folds it into its in-memory state.
#[derive(Debug, Default)]
pub struct Recovered {
    /// Memories, events and backfilled vectors, ordered by sequence number.
    pub records: Vec<Record>,
    /// How many records came from the write-ahead log (written but not yet in the tables).
    pub replayed: usize,
}

/// Searches the BM25 index; cheap to clone and usable while the store writes.
#[derive(Clone)]
pub struct LexicalSearcher {
    index: Arc<LexicalIndex>,
}

impl LexicalSearcher {
    /// BM25 top `limit` of `text` within `tenant` and `banks` (the scope is
    /// part of the query). Raw tantivy scores.
    pub fn search(
        &self,
        tenant: &str,
        banks: &[&str],
        text: &str,
        limit: usize,
    ) -> Result<Vec<LexicalHit>> {
        self.index.search(tenant, banks, text, limit)
    }

    /// The BM25 score one occurrence of each of `text`'s distinct terms
    /// would earn in a document of average length: Σ idf(t) (a term no
    /// document has counts as having document frequency 1). The ceiling
    /// the `attainable` normalization divides by.
    pub fn attainable(&self, text: &str) -> Result<f32> {
        self.index.attainable(text)
    }
}

/// The durable store. One writer at a time (`&mut self`); searching goes
/// through [`LexicalSearcher`].
pub struct Store {
    options: StoreOptions,
    tables: Tables,
    wal: Wal,
    lexical: Arc<LexicalIndex>,
    pending: Vec<Record>,
    next_seq: u64,
    flushes: usize,
    compacting: Arc<AtomicBool>,
    audit: AuditLog,
    /// Held open for its advisory lock: one writer per data directory.
    _lock: std::fs::File,
}

impl Store {
    /// Opens (or creates) the store, replays the write-ahead log into the
    /// tables, and catches the BM25 index up with the tables (rebuilding it
    /// when it is damaged).
    pub async fn open(options: StoreOptions) -> Result<(Store, Recovered)> {
        let dir = options.dir.clone();
        std::fs::create_dir_all(&dir).map_err(IndexerError::io(&dir))?;
        let lock_path = dir.join("LOCK");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(IndexerError::io(&lock_path))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(IndexerError::Locked { path: lock_path });
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(IndexerError::io(&lock_path)(e)),
        }
        let uri = dir.join("tables");
        let uri = uri
            .to_str()
            .ok_or_else(|| IndexerError::corrupt("data directory", "path is not UTF-8"))?;
        let tables = Tables::open(uri, options.dim).await?;
        let (mut memories, mut events, mut vectors) = load(&tables).await?;
        let memories_upto = memories.last().map_or(0, |m| m.seq);
        let events_upto = events.last().map_or(0, |e| e.seq);
        let vectors_upto = vectors.last().map_or(0, |v| v.seq);

        // Each table's highest sequence number says which logged records it
        // already holds (a crash can fall between the table writes of a flush).
        let (mut wal, batches) = Wal::open(&dir.join("wal.log"))?;
        let mut replay = Vec::new();
        for record in batches.into_iter().flatten() {
            let missing = match &record {
                Record::Memory(m) => m.seq > memories_upto,
                Record::Event(e) => e.seq > events_upto,
                Record::Vector(v) => v.seq > vectors_upto,
            };
            if missing {
                replay.push(record);
            }
        }
        let replayed = replay.len();
        if replayed > 0 {
            tracing::info!(replayed, "replaying the write-ahead log into the tables");
            tables.append(&replay).await?;
        }
        wal.reset()?;
        for record in replay {
            match record {
                Record::Memory(m) => memories.push(m),
                Record::Event(e) => events.push(e),
                Record::Vector(v) => vectors.push(v),
            }
        }

        // An erasure a crash interrupted finishes before anything is served.
        let unfinished_erase = erase::read_intent(&dir)?;
        if let Some(selector) = &unfinished_erase {
            tracing::warn!(
                tenant = selector.tenant(),
                "finishing an interrupted erasure"
            );
            tables.erase(selector).await?;
            (memories, events, vectors) = load(&tables).await?;
        }

        let lexical = Arc::new(LexicalIndex::open(&dir.join("lexical"))?);
        if let Some(selector) = &unfinished_erase {
            lexical.erase(selector)?;
            erase::clear_intent(&dir)?;
        }
        let last_memory = memories.last().map_or(0, |m| m.seq);
        if lexical.indexed_seq()? > last_memory {
            tracing::warn!(path = %lexical.path().display(), "lexical index is ahead of the tables; rebuilding it");
            lexical.clear()?;
        }
        let from = lexical.indexed_seq()?;
        let missing: Vec<&MemoryRow> = memories.iter().filter(|m| m.seq > from).collect();
        if !missing.is_empty() {
            tracing::info!(documents = missing.len(), "catching the lexical index up");
            lexical.add(&missing)?;
            lexical.commit()?;
        }

        let records = merged(memories, events, vectors);
        let audit = AuditLog::open(&dir)?;
        let next_seq = 1 + records.last().map_or(0, Record::seq);
        Ok((
            Store {
                options,
                tables,
                wal,
                lexical,
                pending: Vec::new(),
                next_seq,
                flushes: 0,
                compacting: Arc::new(AtomicBool::new(false)),
                audit,
                _lock: lock,
            },
            Recovered { records, replayed },
        ))
    }

    /// A handle for BM25 searches that does not borrow the store.
    pub fn lexical(&self) -> LexicalSearcher {
        LexicalSearcher {
            index: self.lexical.clone(),
        }
    }

    /// Writes a batch durably ([`Durability::Immediate`]) and returns it with
    /// sequence numbers assigned. The batch is one log frame: after a crash it
    /// is there whole or (if this call did not return) not at all.
    pub async fn append(&mut self, mut records: Vec<Record>) -> Result<Vec<Record>> {
        for record in &mut records {
            record.set_seq(self.next_seq);
            self.next_seq += 1;
        }
        self.wal.append(&records)?;
        let memories: Vec<&MemoryRow> = records
            .iter()
            .filter_map(|r| match r {
                Record::Memory(m) => Some(m),
                Record::Event(_) | Record::Vector(_) => None,
            })
            .collect();
        if let Err(e) = self.lexical.add(&memories) {
            // The write is durable; the index is caught up from the tables at the next open.
            tracing::error!(error = %e, "lexical index rejected a document");
        }
        self.pending.extend(records.iter().cloned());
        if self.pending.len() >= self.options.flush_every
            && let Err(e) = self.flush().await
        {
            tracing::warn!(error = %e, "flushing the log to the tables failed; will retry");
        }
        Ok(records)
    }

    /// Moves everything in the log into the tables, empties the log, commits
    /// the BM25 index, and now and then compacts the tables.
    pub async fn flush(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        self.tables.append(&self.pending).await?;
        self.lexical.commit()?;
        self.wal.reset()?;
        self.pending.clear();
        self.flushes += 1;
        if self.options.compact_every > 0
            && self.flushes.is_multiple_of(self.options.compact_every)
            && !self.compacting.swap(true, Ordering::AcqRel)
        {
            // Compaction rewrites fragments only (LanceDB commits it as its
            // own version, compatible with concurrent appends); writers never wait for it.
            let tables = self.tables.clone();
            let compacting = self.compacting.clone();
            tokio::spawn(async move {
                if let Err(e) = tables.compact().await {
                    tracing::warn!(error = %e, "table compaction failed; will retry later");
                }
                compacting.store(false, Ordering::Release);
            });
        }
        Ok(())
    }

    /// Flushes and compacts; call before dropping for a tidy directory (not
    /// needed for safety: the log covers everything acknowledged).
    pub async fn close(mut self) -> Result<()> {
        self.flush().await?;
        self.tables.compact().await
    }

    /// Erases what `selector` covers from every file the store keeps (§6):
    /// the log is flushed into the tables first, so no copy stays in it;
    /// then the LanceDB rows are deleted, their fragments rewritten and old
    /// table versions removed; then the BM25 documents are deleted and their
    /// segments merged away. Returns the ids of the erased memory rows.
    ///
    /// Crash-safe: the selector is recorded in an intent file first and an
    /// interrupted erasure is finished by the next [`Store::open`].
    pub async fn erase(&mut self, selector: &EraseSelector) -> Result<Vec<String>> {
        self.flush().await?;
        // A background compaction commits table versions of its own; the
        // purge must not race it.
        while self.compacting.load(Ordering::Acquire) {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        erase::write_intent(&self.options.dir, selector)?;
        let ids = self.tables.erase(selector).await?;
        self.lexical.erase(selector)?;
        erase::clear_intent(&self.options.dir)?;
        Ok(ids)
    }

    /// Every record in the store, in sequence order (flushes the log first).
    /// The engine rebuilds its state from this after an erasure.
    pub async fn load_all(&mut self) -> Result<Vec<Record>> {
        self.flush().await?;
        let (memories, events, vectors) = load(&self.tables).await?;
        Ok(merged(memories, events, vectors))
    }

    /// Appends entries to the audit log, fsynced.
    pub fn audit(&mut self, entries: &[AuditEntry]) -> Result<()> {
        self.audit.append(entries)
    }

    /// The audit log's entries about `tenant`, oldest first.
    pub fn audit_entries(&self, tenant: &str) -> Result<Vec<AuditEntry>> {
        self.audit.read(tenant)
    }

    /// Records acknowledged but not yet in the tables.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Bytes in the write-ahead log.
    pub fn wal_bytes(&self) -> u64 {
        self.wal.len()
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.options.dir
    }
}

async fn load(tables: &Tables) -> Result<(Vec<MemoryRow>, Vec<EventRow>, Vec<VectorRow>)> {
    Ok((
        tables.load_memories().await?,
        tables.load_events().await?,
        tables.load_vectors().await?,
    ))
}

fn merged(memories: Vec<MemoryRow>, events: Vec<EventRow>, vectors: Vec<VectorRow>) -> Vec<Record> {
    let mut records: Vec<Record> = memories
        .into_iter()
        .map(Record::Memory)
        .chain(events.into_iter().map(Record::Event))
        .chain(vectors.into_iter().map(Record::Vector))
        .collect();
    records.sort_by_key(Record::seq);
    records
}
