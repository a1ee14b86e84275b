//! Opening a store: the lock (or, on object storage, the lease), the
//! tables, the log's replay, an interrupted erasure finished, and the BM25
//! index caught up, with every record handed to the caller in sequence
//! order.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use super::log::Log;
use super::merge::Merge;
use super::{Recovered, Store, StoreOptions};
use crate::audit::AuditLog;
use crate::error::{IndexerError, Result};
use crate::lexical::LexicalIndex;
use crate::rows::{MemoryRow, Record};
use crate::table::Tables;

/// How long [`Store::open`] waits for the data directory's lock: a handle
/// dropped a moment ago may still be finishing its background flush.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

impl Store {
    /// Opens (or creates) the store, replays the write-ahead log into the
    /// tables, and catches the BM25 index up with the tables (rebuilding it
    /// when it is damaged). Every record comes back in [`Recovered`]; a
    /// caller that folds them as they come uses [`Store::open_with`].
    pub async fn open(options: StoreOptions) -> Result<(Store, Recovered)> {
        let mut records = Vec::new();
        let (store, replayed) = Store::open_with(options, |chunk| records.extend(chunk)).await?;
        Ok((store, Recovered { records, replayed }))
    }

    /// [`Store::open`], handing the records to `sink` in sequence order, a
    /// table batch at a time, instead of returning them all: a large store
    /// then opens without holding every row (and its vectors) twice.
    /// Returns the store and how many records came from the write-ahead log.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use recall_indexer::{Store, StoreOptions};
    /// let dir = tempfile::tempdir().unwrap();
    /// let mut seen = 0;
    /// let (_store, replayed) =
    ///     Store::open_with(StoreOptions::new(dir.path(), 4), |records| seen += records.len())
    ///         .await
    ///         .unwrap();
    /// assert_eq!((seen, replayed), (0, 0));
    /// # });
    /// ```
    pub async fn open_with(
        options: StoreOptions,
        mut sink: impl FnMut(Vec<Record>),
    ) -> Result<(Store, usize)> {
        let dir = options.dir.clone();
        std::fs::create_dir_all(&dir).map_err(IndexerError::io(&dir))?;
        let lock_path = dir.join("LOCK");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(IndexerError::io(&lock_path))?;
        let waiting_since = std::time::Instant::now();
        loop {
            match lock.try_lock() {
                Ok(()) => break,
                Err(std::fs::TryLockError::WouldBlock) if waiting_since.elapsed() < LOCK_WAIT => {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
                Err(std::fs::TryLockError::WouldBlock) => {
                    return Err(IndexerError::Locked { path: lock_path });
                }
                Err(std::fs::TryLockError::Error(e)) => {
                    return Err(IndexerError::io(&lock_path)(e));
                }
            }
        }
        let opening = std::time::Instant::now();
        // On object storage the writer's lease comes first (the log's open
        // takes it): only its holder may create or replay into the tables.
        let remote_log = match &options.remote {
            Some(remote) => Some(Log::open(&dir, Some(remote)).await?),
            None => None,
        };
        let tables = match &options.remote {
            Some(remote) => {
                Tables::open(&remote.tables_uri(), remote.options(), options.dim).await?
            }
            None => {
                let uri = dir.join("tables");
                let uri = uri
                    .to_str()
                    .ok_or_else(|| IndexerError::NonUtf8Path { path: uri.clone() })?;
                // Under the fault layer every table file goes through the object
                // store (lance writes a local table's data files directly, past
                // any object-store wrapper, unless the URI says otherwise).
                #[cfg(feature = "faults")]
                let uri = &crate::faults::object_store::table_uri(uri)?;
                Tables::open(uri, &[], options.dim).await?
            }
        };
        let (mut memories_upto, mut in_order) = tables.memory_seqs().await?;
        let (events_upto, vectors_upto) = tables.event_and_vector_upto().await?;
        tables.written_upto(memories_upto, events_upto, vectors_upto);

        // Each table's highest sequence number says which logged records it
        // already holds (a crash can fall between the table writes of a flush).
        // A log sealed for a flush that a crash interrupted comes first.
        let (mut log, batches) = match remote_log {
            Some(opened) => opened,
            None => Log::open(&dir, None).await?,
        };
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
        // A replay that cannot be written (a full disk) does not take reads
        // down: the records are served from memory, the logs stay as they
        // are for the next open, and the store refuses writes until then.
        let mut read_only = None;
        if replayed > 0 {
            tracing::info!(replayed, "replaying the write-ahead log into the tables");
            if let Err(e) = tables.append(&replay).await {
                tracing::error!(error = %e, replayed, "replaying the log failed; opening read-only");
                read_only = Some(format!(
                    "replaying {replayed} logged records into the tables failed ({e}); \
                     they are served from the log"
                ));
            }
        }
        if read_only.is_none() {
            log.replayed().await?;
            // The tables hold the replayed records now.
            replay.clear();
        }

        // An erasure a crash interrupted finishes before anything is served.
        let unfinished_erase = log.read_intent().await?;
        if let (Some(_), Some(reason)) = (&unfinished_erase, &read_only) {
            // Never serve what an erasure was removing.
            return Err(IndexerError::ReadOnly {
                reason: format!("{reason}, and an interrupted erasure cannot finish"),
            });
        }
        if let Some(selector) = &unfinished_erase {
            tracing::warn!(
                tenant = selector.tenant(),
                "finishing an interrupted erasure"
            );
            tables.erase(selector).await?;
        }
        if replayed > 0 || unfinished_erase.is_some() {
            (memories_upto, in_order) = tables.memory_seqs().await?;
        }

        // Events and backfilled vectors are few and read whole; memories are
        // read a batch at a time and merged with them in sequence order, so
        // opening never holds every memory row (with its vectors) at once
        // besides what `sink` keeps. Records a failed replay left in the
        // log are merged in too.
        let mut side: Vec<Record> = tables
            .load_events()
            .await?
            .into_iter()
            .map(Record::Event)
            .chain(tables.load_vectors().await?.into_iter().map(Record::Vector))
            .chain(replay)
            .collect();
        side.sort_by_key(Record::seq);
        let last_memory = side
            .iter()
            .filter(|r| matches!(r, Record::Memory(_)))
            .map(Record::seq)
            .fold(memories_upto, u64::max);

        let lexical = Arc::new(LexicalIndex::open(&dir.join("lexical"))?);
        if let Some(selector) = &unfinished_erase {
            lexical.erase(selector)?;
            log.clear_intent().await?;
        }
        if lexical.indexed_seq()? > last_memory {
            tracing::warn!(path = %lexical.path().display(), "lexical index is ahead of the tables; rebuilding it");
            lexical.clear()?;
        }
        let from = lexical.indexed_seq()?;

        let mut merge = Merge::new(side, from);
        if in_order {
            tables
                .each_memory_batch(options.elide_vectors, |rows| {
                    sink(merge.before_and(rows));
                    Ok(())
                })
                .await?;
        } else {
            // Rows a compaction or an older writer left out of order: read
            // them whole and sort them.
            tracing::info!("memories table out of sequence order; reading it whole");
            let rows = tables.load_memories().await?;
            sink(merge.before_and(rows));
        }
        sink(merge.rest());
        tracing::debug!(
            took_ms = opening.elapsed().as_millis() as u64,
            "tables read"
        );

        let missing: Vec<&MemoryRow> = merge.unindexed.iter().collect();
        if !missing.is_empty() {
            tracing::info!(documents = missing.len(), "catching the lexical index up");
            if let Err(e) = lexical.add(&missing).and_then(|()| lexical.commit()) {
                // Recall still has the vectors; BM25 misses these until a reopen.
                tracing::error!(error = %e, "catching the lexical index up failed; opening read-only");
                read_only.get_or_insert(format!(
                    "catching the BM25 index up with {} memories failed ({e})",
                    missing.len()
                ));
            }
        }

        let audit = AuditLog::open(&dir)?;
        let next_seq = 1 + merge.last_seq;
        Ok((
            Store {
                options,
                tables,
                log,
                lexical,
                pending: Vec::new(),
                in_flight: None,
                next_seq,
                flushes: 0,
                compacting: Arc::new(AtomicBool::new(false)),
                audit,
                lock: Arc::new(lock),
                read_only,
                unfinished: None,
                released: false,
            },
            replayed,
        ))
    }
}
