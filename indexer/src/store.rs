//! The durable store: write-ahead log in front of the LanceDB tables, with the
//! tantivy index kept in step.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::audit::{AuditEntry, AuditLog};
use crate::erasure::EraseSelector;
use crate::error::{IndexerError, Result};
use crate::lexical::{LexicalHit, LexicalIndex};
use crate::log_payload;
use crate::remote::Remote;
use crate::rows::{EventRow, MemoryRow, Record, VectorRow};
use crate::table::Tables;

mod log;
mod merge;
mod open;
use log::{Log, Sealed};

/// What a successful write guarantees, named so the guarantee is written
/// down where callers look. Every write a caller is told about is
/// [`Durability::Immediate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Durability {
    /// The write is in the write-ahead log and fsynced before the call
    /// returns: a crash or `kill -9` right after loses nothing. Records reach
    /// the LanceDB tables in batches ([`StoreOptions::flush_every`]), written
    /// by a background task while new writes go to a fresh log; the sealed
    /// log being flushed is deleted only once its records are in the tables,
    /// and both logs are replayed at open, so the tables plus the logs
    /// always hold every acknowledged write.
    #[default]
    Immediate,
    /// The write is in the write-ahead log before the call returns but not
    /// fsynced: a `kill -9` right after loses nothing (the OS holds the
    /// bytes), a power loss or OS crash may lose it until the next
    /// [`Durability::Immediate`] write, the next flush of the log or the
    /// store's close fsyncs the log. For records no caller was promised
    /// (the engine's impressions: that a recall dealt a memory in a
    /// session). Order is kept: a record written after it with
    /// `Immediate` makes it durable too.
    Logged,
}

/// Records a background flush waits for by default ([`StoreOptions::flush_every`]):
/// as many as compaction puts in one table fragment, so a flush of a bulk
/// write is a finished fragment that no compaction rewrites, and the BM25
/// index commits (one new segment per indexing thread) once per flush.
///
/// A million-memory import (`recall-bench scale`, 2 cores, alternating
/// runs) with 8,192 ran at 18.7k and 20.4k memories/s; with 65,536 at
/// 23.7k and 26.4k, with 19 % less CPU. In two later rounds 32,768 ran at
/// 25.4–25.5k and 131,072 at 25.6–25.8k, against 26.3–26.7k for 65,536. The price is memory and
/// replay: up to five times this many records (the sealed log being
/// flushed, and up to four times this in the live log while that flush
/// runs) wait in memory and in the logs, about 2 KB each at 384
/// dimensions, and a crash replays them into the tables at the next open.
pub const DEFAULT_FLUSH_EVERY: usize = crate::table::COMPACTED_FRAGMENT_ROWS;

/// How a [`Store`] is opened.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// The data directory (tables in `tables/`, BM25 index in `lexical/`, log in
    /// `wal.log`, audit log in `audit.jsonl`, a pending erasure in `ERASING`).
    /// With [`StoreOptions::remote`] it holds only the lock, the BM25 index,
    /// the audit log and what the engine derives: a cache.
    pub dir: PathBuf,
    /// Tables and log on object storage instead of in `dir` (cargo feature
    /// `s3`; see [`Remote`]). Default none.
    pub remote: Option<Remote>,
    /// Vector width of the `memories` table.
    pub dim: usize,
    /// Records buffered in the log before a background flush writes them to
    /// the tables. Default [`DEFAULT_FLUSH_EVERY`].
    pub flush_every: usize,
    /// Table flushes between background compactions of small fragments. Default 16.
    pub compact_every: usize,
    /// Memory rows read from the tables at open come without their
    /// vectors (the `vector` column is not read), for a caller that keeps
    /// them elsewhere and reads the few it lacks with
    /// [`Store::each_memory_vector`]. Rows from the log keep theirs. Default
    /// false.
    pub elide_vectors: bool,
}

impl StoreOptions {
    /// Defaults for a data directory and vector width.
    pub fn new(dir: impl Into<PathBuf>, dim: usize) -> StoreOptions {
        StoreOptions {
            dir: dir.into(),
            remote: None,
            dim,
            flush_every: DEFAULT_FLUSH_EVERY,
            compact_every: 16,
            elide_vectors: false,
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
    /// part of every query term), with the tenant's own statistics. Raw
    /// tantivy scores.
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
    /// would earn in a document of average length, with `tenant`'s
    /// statistics: Σ idf(t) (a term the tenant never used counts as having
    /// document frequency 1). The ceiling the `attainable` normalization
    /// divides by.
    pub fn attainable(&self, tenant: &str, text: &str) -> Result<f32> {
        self.index.attainable(tenant, text)
    }

    /// Whether a memory of `tenant` in one of `banks` that the index holds
    /// mentions `word` (lowercased and stemmed as BM25 reads it; a stop
    /// word counts as mentioned). The index holds forgotten and superseded
    /// memories too, until they are erased: they count, so the answer errs
    /// towards "mentioned".
    pub fn mentions(&self, tenant: &str, banks: &[&str], word: &str) -> Result<bool> {
        self.index.mentions(tenant, banks, word)
    }

    /// How many of `tenant`'s indexed documents hold each of `text`'s terms
    /// (after analysis: lowercased, stemmed), summed over its distinct
    /// terms. Deleted documents count until their segment is merged, so
    /// after an erasure this is 0 for any term only the erased texts had.
    pub fn doc_freq(&self, tenant: &str, text: &str) -> Result<u64> {
        self.index.doc_freq(tenant, text)
    }
}

/// The durable store. One writer at a time (`&mut self`); searching goes
/// through [`LexicalSearcher`].
pub struct Store {
    /// Why the store refuses writes, when it opened read-only (see
    /// [`IndexerError::ReadOnly`]).
    read_only: Option<String>,
    /// An erasure that stopped part-way, and why the store refuses writes
    /// until a reopen finishes it.
    unfinished: Option<(EraseSelector, String)>,
    options: StoreOptions,
    tables: Tables,
    log: Log,
    lexical: Arc<LexicalIndex>,
    pending: Vec<Record>,
    in_flight: Option<InFlight>,
    next_seq: u64,
    flushes: usize,
    compacting: Arc<AtomicBool>,
    audit: AuditLog,
    /// Held open for its advisory lock: one writer per data directory. A
    /// background flush holds it too, so a reopen waits for the flush.
    lock: Arc<std::fs::File>,
    /// [`Store::release`] was called: no more writes.
    released: bool,
}

/// A flush of the sealed log to the tables.
struct InFlight {
    records: Arc<Vec<Record>>,
    sealed: Arc<Sealed>,
    /// None once it failed: the records still wait for the tables.
    task: Option<tokio::task::JoinHandle<Result<()>>>,
}

impl Store {
    /// Why the store is read-only, if it is: it opened while its log could
    /// not be replayed into the tables (see [`IndexerError::ReadOnly`]).
    /// Also after a failed fsync of the log or the audit log: the store
    /// keeps serving reads and refuses writes until it is reopened.
    pub fn read_only(&self) -> Option<&str> {
        self.read_only
            .as_deref()
            .or_else(|| self.unfinished.as_ref().map(|(_, reason)| reason.as_str()))
            .or_else(|| self.log.broken())
            .or_else(|| self.audit.broken())
            .or_else(|| self.lexical.failed())
    }

    fn writable(&self) -> Result<()> {
        if self.released {
            return Err(IndexerError::Closed { what: "store" });
        }
        match self.read_only() {
            Some(reason) => Err(IndexerError::ReadOnly {
                reason: reason.to_string(),
            }),
            None => self.log.still_writer(),
        }
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
    pub async fn append(&mut self, records: Vec<Record>) -> Result<Vec<Record>> {
        self.append_with(records, Durability::Immediate).await
    }

    /// [`Store::append`] with the guarantee named: [`Durability::Logged`]
    /// skips the fsync.
    pub async fn append_with(
        &mut self,
        records: Vec<Record>,
        durability: Durability,
    ) -> Result<Vec<Record>> {
        let (records, audited) = self.append_audited(records, &[], durability).await?;
        audited?;
        Ok(records)
    }

    /// [`Store::append_with`] and [`Store::audit`] in one: the audit
    /// entries are written beside the records (the audit file's fsync
    /// beside the log's; on object storage the two PUTs at once). `Err`:
    /// the records were not logged (on object storage: or whether they
    /// landed is unknown, the reopen decides). `Ok((records, audited))`:
    /// the records are logged; `audited` is the audit file's outcome, and
    /// if it failed the call is not to be acknowledged (the caller still
    /// applies the records, which a reopen will show) and the store
    /// refuses writes until it is reopened.
    pub async fn append_audited(
        &mut self,
        mut records: Vec<Record>,
        audit: &[AuditEntry],
        durability: Durability,
    ) -> Result<(Vec<Record>, Result<()>)> {
        self.writable()?;
        let sync = durability == Durability::Immediate;
        for record in &mut records {
            record.set_seq(self.next_seq);
            self.next_seq += 1;
        }
        // The log writes vectors apart from the JSON of the rest: moved out
        // for the encoding, so it copies none.
        let vectors = log_payload::take_vectors(&mut records);
        let (logged, analyzed) = {
            let memories: Vec<&MemoryRow> = records
                .iter()
                .filter_map(|r| match r {
                    Record::Memory(m) => Some(m),
                    Record::Event(_) | Record::Vector(_) => None,
                })
                .collect();
            // The log's fsync and the index's analysis do not depend on each
            // other: they run side by side. Documents enter the index only
            // once the log holds their records.
            let lexical = &self.lexical;
            let first_seq = records.first().map_or(self.next_seq, Record::seq);
            // A directory's audit file is fsynced beside the log; on object
            // storage the log writes the entries' object with its own.
            let in_bucket = self.log.audits_in_bucket();
            let file = &mut self.audit;
            let (bucket, beside_file): (&[AuditEntry], &[AuditEntry]) = if in_bucket {
                (audit, &[])
            } else {
                (&[], audit)
            };
            self.log
                .append((&records, &vectors), first_seq, sync, bucket, || {
                    let filed = if beside_file.is_empty() {
                        Ok(())
                    } else {
                        file.append(beside_file)
                    };
                    (lexical.documents(&memories), filed)
                })
                .await
        };
        log_payload::restore_vectors(&mut records, vectors);
        logged?;
        let (analyzed, filed) = analyzed;
        if let Err(e) = analyzed.and_then(|documents| self.lexical.add_documents(documents)) {
            // The write is durable; the index is caught up from the tables at the next open.
            tracing::error!(error = %e, "lexical index rejected a document");
        }
        self.pending.extend(records.iter().cloned());
        if self.pending.len() >= self.options.flush_every
            && let Err(e) = self.flush_in_background().await
        {
            tracing::warn!(error = %e, "flushing the log to the tables failed; will retry");
        }
        Ok((records, filed))
    }

    /// Seals the log and starts writing its records to the tables in a
    /// background task; writes go on into a fresh log meanwhile. If the
    /// previous background flush is still running, this waits for it only
    /// once the new log holds four times [`StoreOptions::flush_every`].
    async fn flush_in_background(&mut self) -> Result<()> {
        if let Some(in_flight) = &self.in_flight {
            let running = in_flight.task.as_ref().is_some_and(|t| !t.is_finished());
            if running && self.pending.len() < 4 * self.options.flush_every {
                return Ok(());
            }
            self.settle().await?;
        }
        let sealed = Arc::new(self.log.seal()?);
        let records = Arc::new(std::mem::take(&mut self.pending));
        let (tables, lexical, lock) =
            (self.tables.clone(), self.lexical.clone(), self.lock.clone());
        let (batch, sealing) = (records.clone(), sealed.clone());
        let task = tokio::spawn(async move {
            let _lock = lock;
            write_sealed(&tables, &lexical, &batch, &sealing).await
        });
        self.in_flight = Some(InFlight {
            records,
            sealed,
            task: Some(task),
        });
        self.flushed();
        Ok(())
    }

    /// Waits for the background flush; if it failed, writes its records to
    /// the tables here.
    async fn settle(&mut self) -> Result<()> {
        let Some(mut in_flight) = self.in_flight.take() else {
            return Ok(());
        };
        let outcome = match in_flight.task.take() {
            Some(task) => task.await.unwrap_or_else(|e| {
                Err(IndexerError::Background {
                    task: "flush",
                    detail: e.to_string(),
                })
            }),
            None => Err(IndexerError::Background {
                task: "flush",
                detail: "it failed before; its records stay in the log".into(),
            }),
        };
        let Err(e) = outcome else {
            return Ok(());
        };
        tracing::warn!(error = %e, "background flush failed; retrying it now");
        let retried = write_sealed(
            &self.tables,
            &self.lexical,
            &in_flight.records,
            &in_flight.sealed,
        )
        .await;
        if retried.is_err() {
            self.in_flight = Some(in_flight);
        }
        retried
    }

    /// Moves everything in the logs into the tables (waiting for a
    /// background flush), empties the log and commits the BM25 index.
    pub async fn flush(&mut self) -> Result<()> {
        self.settle().await?;
        if self.pending.is_empty() {
            return Ok(());
        }
        self.writable()?;
        self.tables.append(&self.pending).await?;
        self.lexical.commit()?;
        self.log.reset().await?;
        self.pending.clear();
        self.flushed();
        Ok(())
    }

    /// Counts a flush and now and then compacts the tables in the background.
    fn flushed(&mut self) {
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
    }

    /// Returns once no background table compaction is running.
    async fn compacted(&self) {
        while self.compacting.load(Ordering::Acquire) {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    /// Waits for the background work that earlier writes started: a table
    /// compaction, and the BM25 index's segment merges (committing what
    /// it holds first). Nothing needs this for correctness; timings that
    /// must not share the cores with that work do.
    pub async fn wait_for_maintenance(&self) -> Result<()> {
        self.compacted().await;
        self.lexical.wait_for_merges()
    }

    /// Stops writing: waits for a background flush, then gives up what makes
    /// this process the store's writer (the lease of a store on object
    /// storage, so another process takes over at once instead of after the
    /// lease expires). Writes are refused afterwards; reads go on. Nothing
    /// is lost: the log holds what the tables do not.
    pub async fn release(&mut self) -> Result<()> {
        if let Err(e) = self.settle().await {
            tracing::warn!(error = %e, "a flush failed before the release; its records stay in the log");
        }
        self.released = true;
        self.log.release().await
    }

    /// Flushes and compacts; call before dropping for a tidy directory (not
    /// needed for safety: the log covers everything acknowledged).
    pub async fn close(mut self) -> Result<()> {
        self.flush().await?;
        self.tables.compact().await?;
        self.log.release().await
    }

    /// Erases what `selector` covers from every file the store keeps (§6):
    /// the log is flushed into the tables first, so no copy stays in it;
    /// then the LanceDB rows are deleted, their fragments rewritten and old
    /// table versions removed; then the BM25 documents are deleted and their
    /// segments merged away. Returns the ids of the erased memory rows.
    ///
    /// Crash-safe: the selector is recorded in an intent file first and an
    /// interrupted erasure is finished by the next [`Store::open`].
    ///
    /// If it fails once the intent is durable, the store refuses writes
    /// ([`IndexerError::ReadOnly`]) and [`Store::unfinished_erase`] names
    /// what must no longer be served; the next open finishes it.
    pub async fn erase(&mut self, selector: &EraseSelector) -> Result<Vec<String>> {
        self.writable()?;
        self.flush().await?;
        // A background compaction commits table versions of its own; the
        // purge must not race it.
        self.compacted().await;
        let selector = self.tables.resolve(selector).await?;
        if let Err(e) = self.log.write_intent(&selector).await {
            // Written in part, or written and not fsynced: gone, or the next
            // open would run an erasure this call reports as failed.
            if let Err(cleared) = self.log.clear_intent().await {
                self.unfinished = Some((
                    selector,
                    format!(
                        "an erasure's intent could not be written ({e}) nor removed ({cleared}); \
                         reopening the store finishes the erasure"
                    ),
                ));
            }
            return Err(e);
        }
        let erased = async {
            let ids = self.tables.erase(&selector).await?;
            self.lexical.erase(&selector)?;
            self.log.clear_intent().await?;
            Ok(ids)
        }
        .await;
        if let Err(e) = &erased {
            tracing::error!(error = %e, "an erasure stopped part-way; the next open finishes it");
            self.unfinished = Some((
                selector,
                format!("an erasure stopped part-way ({e}); reopening the store finishes it"),
            ));
        }
        erased
    }

    /// The erasure that stopped part-way in this session, if one did: its
    /// records must not be served (see [`Store::records_outside`]).
    pub fn unfinished_erase(&self) -> Option<&EraseSelector> {
        self.unfinished.as_ref().map(|(selector, _)| selector)
    }

    /// Every record the tables and the log hold that `selector` does not
    /// cover, in sequence order, without writing anything (the store may be
    /// read-only). What the engine serves after an erasure stopped part-way.
    pub async fn records_outside(&self, selector: &EraseSelector) -> Result<Vec<Record>> {
        let (mut memories, mut events, mut vectors) = load(&self.tables).await?;
        let waiting = self.in_flight.iter().flat_map(|f| f.records.iter());
        for record in waiting.chain(&self.pending).cloned() {
            match record {
                Record::Memory(m) => memories.push(m),
                Record::Event(e) => events.push(e),
                Record::Vector(v) => vectors.push(v),
            }
        }
        // The memories it covers, by id: their events and vectors go too,
        // also where the memory row itself is already deleted.
        let tenant = selector.tenant();
        let mut erased: HashSet<String> = match selector {
            EraseSelector::Memories { ids, .. } => ids.iter().cloned().collect(),
            EraseSelector::Bank { .. } | EraseSelector::Tenant { .. } => HashSet::new(),
        };
        erased.extend(
            memories
                .iter()
                .filter(|m| match selector {
                    EraseSelector::Bank { bank, .. } => m.tenant == tenant && &m.bank == bank,
                    EraseSelector::Memories { .. } | EraseSelector::Tenant { .. } => false,
                })
                .map(|m| m.id.clone()),
        );
        let whole_tenant = matches!(selector, EraseSelector::Tenant { .. });
        let gone = |t: &str, id: &str| t == tenant && (whole_tenant || erased.contains(id));
        memories.retain(|m| !gone(&m.tenant, &m.id));
        events.retain(|e| !gone(&e.tenant, &e.memory_id));
        vectors.retain(|v| !gone(&v.tenant, &v.memory_id));
        memories.sort_by_key(|m| m.seq);
        events.sort_by_key(|e| e.seq);
        vectors.sort_by_key(|v| v.seq);
        memories.dedup_by_key(|m| m.seq);
        events.dedup_by_key(|e| e.seq);
        vectors.dedup_by_key(|v| v.seq);
        Ok(merged(memories, events, vectors))
    }

    /// Every record in the store, in sequence order (flushes the log first).
    /// The engine rebuilds its state from this after an erasure.
    pub async fn load_all(&mut self) -> Result<Vec<Record>> {
        self.flush().await?;
        let (memories, events, vectors) = load(&self.tables).await?;
        Ok(merged(memories, events, vectors))
    }

    /// Appends entries to the audit log: fsynced to the directory's
    /// `audit.jsonl`, or, on object storage, one object in the bucket
    /// (`remote/audit_objects.rs`) written before this returns. (A write's
    /// entries go with its records: [`Store::append_audited`].)
    pub async fn audit(&mut self, entries: &[AuditEntry]) -> Result<()> {
        self.writable()?;
        if !self.log.audits_in_bucket() {
            return self.audit.append(entries);
        }
        if entries.is_empty() {
            return Ok(());
        }
        self.log.append_audit(entries, self.next_seq).await
    }

    /// The audit log's entries about `tenant`, oldest first.
    pub async fn audit_entries(&self, tenant: &str) -> Result<Vec<AuditEntry>> {
        match self.log.read_audit(tenant).await? {
            Some(entries) => Ok(entries),
            None => self.audit.read(tenant),
        }
    }

    /// Records acknowledged but not yet in the tables (a background flush
    /// counts until it has finished).
    pub fn pending(&self) -> usize {
        self.pending.len() + self.in_flight.as_ref().map_or(0, |f| f.records.len())
    }

    /// Bytes in the write-ahead log.
    pub fn wal_bytes(&self) -> u64 {
        self.log.len()
    }

    /// Hands `each` the vectors of the memories whose sequence numbers
    /// are `seqs`, for those that have one in the tables, as `(seq,
    /// vector)`, a table batch at a time: the rows an open with
    /// [`StoreOptions::elide_vectors`] handed over without them and the
    /// caller could not find elsewhere. Reads the memories table from the
    /// lowest of `seqs` on.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use recall_indexer::{Store, StoreOptions};
    /// let dir = tempfile::tempdir().unwrap();
    /// let (store, _) = Store::open(StoreOptions::new(dir.path(), 4)).await.unwrap();
    /// let mut found = 0;
    /// store.each_memory_vector(&[1, 2], |_, _| found += 1).await.unwrap();
    /// assert_eq!(found, 0);
    /// # });
    /// ```
    pub async fn each_memory_vector(
        &self,
        seqs: &[u64],
        each: impl FnMut(u64, Vec<f32>),
    ) -> Result<()> {
        self.tables.each_memory_vector(seqs, each).await
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.options.dir
    }
}

/// Writes a sealed log's records to the tables, commits the BM25 index and
/// deletes the sealed log: the work of one background flush.
async fn write_sealed(
    tables: &Tables,
    lexical: &LexicalIndex,
    records: &[Record],
    sealed: &Sealed,
) -> Result<()> {
    sealed.still_writer()?;
    tables.append(records).await?;
    lexical.commit()?;
    sealed.remove().await
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wal::SEALED;

    fn event(n: u64) -> Record {
        Record::Event(EventRow {
            seq: 0,
            tenant: "t".into(),
            memory_id: format!("m{n}"),
            op: "confirm".into(),
            at_ms: n as i64,
            arg: None,
        })
    }

    fn seqs(records: &[Record]) -> Vec<u64> {
        records.iter().map(Record::seq).collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn background_flushes_and_a_left_over_sealed_log_lose_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut options = StoreOptions::new(dir.path(), 4);
        options.flush_every = 3;
        {
            let (mut store, _) = Store::open(options.clone()).await.unwrap();
            for n in 0..20 {
                store.append(vec![event(n)]).await.unwrap();
            }
            // Dropped while a background flush may still run: the reopen
            // waits for its lock.
        }
        let (mut store, recovered) = Store::open(options.clone()).await.unwrap();
        assert_eq!(seqs(&recovered.records), (1..=20).collect::<Vec<_>>());
        assert_eq!(store.pending(), 0);

        // A crash after sealing, before the sealed records reached the tables.
        for n in 20..25 {
            store.append(vec![event(n)]).await.unwrap();
        }
        store.settle().await.unwrap();
        assert!(store.pending() > 0, "some records are only in the log");
        std::fs::rename(dir.path().join("wal.log"), dir.path().join(SEALED)).unwrap();
        drop(store);
        let (_, recovered) = Store::open(options).await.unwrap();
        assert_eq!(seqs(&recovered.records), (1..=25).collect::<Vec<_>>());
        assert!(!dir.path().join(SEALED).exists());
    }
}
