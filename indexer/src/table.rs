//! The LanceDB tables, the source of truth: `memories` (one immutable row per
//! memory), `events` (every later change, appended) and `vectors` (embeddings
//! backfilled for memories written without one).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arrow_array::cast::AsArray;
use arrow_array::types::UInt64Type;
use arrow_array::{ArrayRef, RecordBatch, StringArray, UInt64Array};
use arrow_schema::{DataType, Schema, SchemaRef};
use futures::TryStreamExt;
use lancedb::query::{ExecutableQuery, QueryBase, Select};
use lancedb::table::optimize::{CompactionMode, CompactionOptions, Duration};
use lancedb::table::{NaNVectorBehavior, NewColumnTransform, OptimizeAction};
use lancedb::{Connection, Table};

use crate::erasure::{EraseSelector, id_list, literal};
use crate::error::{IndexerError, Result};
use crate::rows::{EventRow, MemoryRow, Record, VectorRow};

mod batches;

use batches::{
    Columns, batch_to_events, batch_to_memories, check_width, event_schema, events_to_batch,
    memories_to_batch, memory_schema, sentences_array, sentences_at, sentences_field, vector_array,
    vector_at, vector_schema,
};

const MEMORIES: &str = "memories";
const EVENTS: &str = "events";
const VECTORS: &str = "vectors";
/// The memories and vectors tables' column of sentence vectors (added after
/// the first release: a table without it gets it, all null, when opened).
const SENTENCES: &str = "sentences";
/// Rows of a fragment that compaction leaves alone (see [`Tables::compact`]).
pub(crate) const COMPACTED_FRAGMENT_ROWS: usize = 65_536;

/// Handle on the two tables of one data directory (or any LanceDB URI).
#[derive(Clone)]
pub(crate) struct Tables {
    memories: Table,
    events: Table,
    vectors: Table,
    dim: usize,
    written: Arc<Written>,
}

/// The highest sequence number each table holds, so that an append retried
/// after a failure part-way through a flush (the memories written, the
/// events not; or all written and the BM25 commit failed) writes no row
/// twice. [`UNKNOWN`] until the store says or an append finds out.
#[derive(Debug)]
struct Written {
    memories: AtomicU64,
    events: AtomicU64,
    vectors: AtomicU64,
}

/// "Not known": read the table's highest `seq` before appending.
const UNKNOWN: u64 = u64::MAX;

impl Tables {
    /// Opens the tables under `uri` (reached with the `storage` options of
    /// object storage, none for a directory), creating them if they do not exist. The
    /// vector column's width is fixed at creation; reopening with another
    /// dimension is an error rather than a silent mix.
    pub(crate) async fn open(
        uri: &str,
        storage: &[(String, String)],
        dim: usize,
    ) -> Result<Tables> {
        let db = lancedb::connect(uri)
            .storage_options(storage.iter().cloned())
            .execute()
            .await
            .map_err(IndexerError::lance(MEMORIES))?;
        let memories = open_or_create(&db, MEMORIES, memory_schema(dim)).await?;
        let events = open_or_create(&db, EVENTS, event_schema()).await?;
        let vectors = open_or_create(&db, VECTORS, vector_schema(dim)).await?;
        let schema = memories
            .schema()
            .await
            .map_err(IndexerError::lance(MEMORIES))?;
        match schema
            .field_with_name("vector")
            .map(|f| f.data_type().clone())
        {
            Ok(DataType::FixedSizeList(_, width)) if width as usize == dim => {}
            Ok(DataType::FixedSizeList(_, width)) => {
                return Err(IndexerError::ModelMismatch {
                    store: width as usize,
                    model: dim,
                });
            }
            other => {
                return Err(IndexerError::corrupt(
                    "memories table",
                    format!("vector column is {other:?}, expected {dim} floats"),
                ));
            }
        }
        add_sentences_column(&memories, MEMORIES).await?;
        add_sentences_column(&vectors, VECTORS).await?;
        Ok(Tables {
            memories,
            events,
            vectors,
            dim,
            written: Arc::new(Written {
                memories: AtomicU64::new(UNKNOWN),
                events: AtomicU64::new(UNKNOWN),
                vectors: AtomicU64::new(UNKNOWN),
            }),
        })
    }

    /// Tells the tables the highest sequence number each holds (read by the
    /// store at open), sparing the first append a scan.
    pub(crate) fn written_upto(&self, memories: u64, events: u64, vectors: u64) {
        self.written.memories.store(memories, Ordering::SeqCst);
        self.written.events.store(events, Ordering::SeqCst);
        self.written.vectors.store(vectors, Ordering::SeqCst);
    }

    /// Appends, through `add`, the rows of `rows` that `table` does not hold
    /// yet (sequence numbers only grow, so those above its highest), and
    /// keeps `cell` (see [`Written`]): the new highest on success,
    /// "unknown" on failure (a commit may have landed before the error).
    async fn append_new<'r, R, Fut>(
        &self,
        (table, name, cell): (&Table, &str, &AtomicU64),
        rows: &[&'r R],
        seq: impl Fn(&R) -> u64,
        add: impl FnOnce(Vec<&'r R>) -> Fut,
    ) -> Result<()>
    where
        Fut: std::future::Future<Output = Result<()>>,
    {
        if rows.is_empty() {
            return Ok(());
        }
        let mut upto = cell.load(Ordering::SeqCst);
        if upto == UNKNOWN {
            upto = max_seq(table, name).await?;
            cell.store(upto, Ordering::SeqCst);
        }
        let rows: Vec<&'r R> = rows.iter().copied().filter(|r| seq(r) > upto).collect();
        let Some(last) = rows.last().map(|r| seq(r)) else {
            return Ok(());
        };
        let outcome = add(rows).await;
        cell.store(
            if outcome.is_ok() { last } else { UNKNOWN },
            Ordering::SeqCst,
        );
        outcome
    }

    /// Appends records to their tables: memories, then events, then vectors.
    pub(crate) async fn append(&self, records: &[Record]) -> Result<()> {
        let mut memories = Vec::new();
        let mut events = Vec::new();
        let mut vectors = Vec::new();
        for record in records {
            match record {
                Record::Memory(m) => memories.push(m),
                Record::Event(e) => events.push(e),
                Record::Vector(v) => vectors.push(v),
            }
        }
        self.append_memories(&memories).await?;
        self.append_events(&events).await?;
        self.append_vectors(&vectors).await
    }

    async fn append_memories(&self, rows: &[&MemoryRow]) -> Result<()> {
        let table = (&self.memories, MEMORIES, &self.written.memories);
        self.append_new(
            table,
            rows,
            |r| r.seq,
            |rows| async move {
                let batch = memories_to_batch(&rows, self.dim)?;
                self.memories
                    .add(batch)
                    .on_nan_vectors(NaNVectorBehavior::Keep)
                    .execute()
                    .await
                    .map_err(IndexerError::lance(MEMORIES))?;
                Ok(())
            },
        )
        .await
    }

    async fn append_events(&self, rows: &[&EventRow]) -> Result<()> {
        let table = (&self.events, EVENTS, &self.written.events);
        self.append_new(
            table,
            rows,
            |r| r.seq,
            |rows| async move {
                let batch = events_to_batch(&rows)?;
                self.events
                    .add(batch)
                    .execute()
                    .await
                    .map_err(IndexerError::lance(EVENTS))?;
                Ok(())
            },
        )
        .await
    }

    async fn append_vectors(&self, rows: &[&VectorRow]) -> Result<()> {
        let table = (&self.vectors, VECTORS, &self.written.vectors);
        self.append_new(
            table,
            rows,
            |r| r.seq,
            |rows| async move { self.append_vector_rows(&rows).await },
        )
        .await
    }

    async fn append_vector_rows(&self, rows: &[&VectorRow]) -> Result<()> {
        for row in rows {
            check_width(&row.vector, self.dim)?;
            for v in &row.sentences {
                check_width(v, self.dim)?;
            }
        }
        let vectors = vector_array(
            rows.iter().map(|r| Some(r.vector.as_slice())),
            rows.len(),
            self.dim,
        )?;
        let columns: Vec<ArrayRef> = vec![
            Arc::new(UInt64Array::from_iter_values(rows.iter().map(|r| r.seq))),
            Arc::new(StringArray::from_iter_values(
                rows.iter().map(|r| r.tenant.as_str()),
            )),
            Arc::new(StringArray::from_iter_values(
                rows.iter().map(|r| r.memory_id.as_str()),
            )),
            Arc::new(vectors),
            Arc::new(sentences_array(rows.iter().map(|r| &r.sentences))),
        ];
        let batch = RecordBatch::try_new(vector_schema(self.dim), columns)
            .map_err(|e| IndexerError::corrupt("vector batch", e.to_string()))?;
        self.vectors
            .add(batch)
            .on_nan_vectors(NaNVectorBehavior::Keep)
            .execute()
            .await
            .map_err(IndexerError::lance(VECTORS))?;
        Ok(())
    }

    pub(crate) async fn load_vectors(&self) -> Result<Vec<VectorRow>> {
        let batches = scan(&self.vectors, VECTORS).await?;
        let mut rows = Vec::new();
        for batch in &batches {
            let c = Columns {
                batch,
                table: VECTORS,
            };
            let (seq, tenant, memory_id) = (c.u64("seq")?, c.text("tenant")?, c.text("memory_id")?);
            let vectors = c
                .get("vector")?
                .as_fixed_size_list_opt()
                .ok_or_else(|| c.wrong("vector"))?;
            let sentences = c
                .get(SENTENCES)?
                .as_binary_opt::<i32>()
                .ok_or_else(|| c.wrong(SENTENCES))?;
            for i in 0..batch.num_rows() {
                let Some(vector) = vector_at(vectors, i, &c)? else {
                    continue;
                };
                rows.push(VectorRow {
                    seq: seq.value(i),
                    tenant: tenant.value(i).to_string(),
                    memory_id: memory_id.value(i).to_string(),
                    vector,
                    sentences: sentences_at(sentences, i, self.dim, &c)?,
                });
            }
        }
        rows.sort_by_key(|r| r.seq);
        Ok(rows)
    }

    /// The memories table's highest sequence number (0 when empty) and
    /// whether a scan yields its rows in ascending sequence order, as
    /// appends write them (then [`Tables::each_memory_batch`] can hand them
    /// out in order a batch at a time). Reads the `seq` column only.
    pub(crate) async fn memory_seqs(&self) -> Result<(u64, bool)> {
        let (mut max, mut ascending) = (0, true);
        for batch in &seq_column(&self.memories, MEMORIES).await? {
            for seq in seqs_of(batch, MEMORIES)?.iter().flatten() {
                ascending &= seq > max;
                max = max.max(seq);
            }
        }
        Ok((max, ascending))
    }

    /// The highest sequence numbers the events and vectors tables hold (0
    /// when empty). Reads their `seq` columns only.
    pub(crate) async fn event_and_vector_upto(&self) -> Result<(u64, u64)> {
        Ok((
            max_seq(&self.events, EVENTS).await?,
            max_seq(&self.vectors, VECTORS).await?,
        ))
    }

    /// Reads the memories table in scan order, one Arrow batch at a time,
    /// and hands each batch's rows to `each`: opening a large store then
    /// holds one batch's rows besides what `each` keeps, not every row and
    /// every batch at once.
    ///
    /// With `elide_vectors` the `vector` column is not read: the rows come
    /// without vectors, for a caller that has them elsewhere
    /// ([`Tables::each_memory_vector`] reads those it lacks).
    pub(crate) async fn each_memory_batch(
        &self,
        elide_vectors: bool,
        mut each: impl FnMut(Vec<MemoryRow>) -> Result<()>,
    ) -> Result<()> {
        let mut query = self.memories.query();
        if elide_vectors {
            let schema = self
                .memories
                .schema()
                .await
                .map_err(IndexerError::lance(MEMORIES))?;
            let columns: Vec<&str> = schema
                .fields()
                .iter()
                .map(|f| f.name().as_str())
                .filter(|name| *name != "vector")
                .collect();
            query = query.select(Select::columns(&columns));
        }
        each_batch(query, MEMORIES, |batch| {
            let mut rows = Vec::with_capacity(batch.num_rows());
            batch_to_memories(&batch, self.dim, &mut rows)?;
            drop(batch);
            each(rows)
        })
        .await
    }

    /// Hands `each` the vectors of the memories whose sequence numbers
    /// are `seqs` (those that have one), in scan order, a batch at a time:
    /// what an open that elided the `vector` column could not find
    /// elsewhere. Reads the rows from the lowest of `seqs` on.
    pub(crate) async fn each_memory_vector(
        &self,
        seqs: &[u64],
        mut each: impl FnMut(u64, Vec<f32>),
    ) -> Result<()> {
        let Some(&lowest) = seqs.iter().min() else {
            return Ok(());
        };
        let wanted: std::collections::HashSet<u64> = seqs.iter().copied().collect();
        let query = self
            .memories
            .query()
            .select(Select::columns(&["seq", "vector"]))
            .only_if(format!("seq >= {lowest}"));
        each_batch(query, MEMORIES, |batch| {
            let c = Columns {
                batch: &batch,
                table: MEMORIES,
            };
            let seq = c.u64("seq")?;
            let vectors = c
                .get("vector")?
                .as_fixed_size_list_opt()
                .ok_or_else(|| c.wrong("vector"))?;
            for i in 0..batch.num_rows() {
                if !wanted.contains(&seq.value(i)) {
                    continue;
                }
                if let Some(vector) = vector_at(vectors, i, &c)? {
                    each(seq.value(i), vector);
                }
            }
            Ok(())
        })
        .await
    }

    pub(crate) async fn load_memories(&self) -> Result<Vec<MemoryRow>> {
        let batches = scan(&self.memories, MEMORIES).await?;
        let mut rows = Vec::new();
        for batch in &batches {
            batch_to_memories(batch, self.dim, &mut rows)?;
        }
        rows.sort_by_key(|r| r.seq);
        Ok(rows)
    }

    pub(crate) async fn load_events(&self) -> Result<Vec<EventRow>> {
        let batches = scan(&self.events, EVENTS).await?;
        let mut rows = Vec::new();
        for batch in &batches {
            batch_to_events(batch, &mut rows)?;
        }
        rows.sort_by_key(|r| r.seq);
        Ok(rows)
    }

    /// Merges the small fragments that batched appends leave behind into
    /// fragments of [`COMPACTED_FRAGMENT_ROWS`], then drops table versions
    /// older than a week (what LanceDB's `OptimizeAction::All` keeps).
    ///
    /// LanceDB's default target is a million rows a fragment, and every
    /// fragment below the target is rewritten again at each compaction: a
    /// growing table would be rewritten whole every time, so a bulk import
    /// would rewrite each row over and over. With a smaller target a row is
    /// rewritten about once. Fragments are copied page by page where their
    /// files allow it (LanceDB falls back to decoding and encoding them).
    pub(crate) async fn compact(&self) -> Result<()> {
        let compaction = CompactionOptions {
            target_rows_per_fragment: COMPACTED_FRAGMENT_ROWS,
            compaction_mode: Some(CompactionMode::TryBinaryCopy),
            ..CompactionOptions::default()
        };
        self.rewrite(compaction, OldVersions::KeepAWeek).await
    }

    /// Compacts every table with `compaction`, then prunes old versions.
    async fn rewrite(&self, compaction: CompactionOptions, old: OldVersions) -> Result<()> {
        let (older_than, delete_unverified, error_if_tagged_old_versions) = match old {
            OldVersions::KeepAWeek => (None, None, None),
            OldVersions::DropAll => (Some(Duration::zero()), Some(true), Some(false)),
        };
        for (table, name) in self.all() {
            table
                .optimize(OptimizeAction::Compact {
                    options: compaction.clone(),
                    remap_options: None,
                })
                .await
                .map_err(IndexerError::lance(name))?;
            table
                .optimize(OptimizeAction::Prune {
                    older_than,
                    delete_unverified,
                    error_if_tagged_old_versions,
                })
                .await
                .map_err(IndexerError::lance(name))?;
        }
        Ok(())
    }
}

/// Which old table versions a [`Tables::rewrite`] removes.
enum OldVersions {
    /// Those older than a week (LanceDB's default), so a reader of a
    /// recent version keeps its files.
    KeepAWeek,
    /// All of them, and unreferenced files: erasure must leave no copy.
    DropAll,
}

impl Tables {
    /// Deletes what `selector` covers from every table (memory rows, their
    /// events and backfilled vectors), then [`Tables::purge`]s. Returns the
    /// ids of the memory rows it covered. Idempotent.
    pub(crate) async fn erase(&self, selector: &EraseSelector) -> Result<Vec<String>> {
        let ids = self.ids_where(&selector.memories_filter()).await?;
        // A run that an interruption repeats may find the memory rows gone
        // already: their events and vectors go by the selector's own ids.
        let ids_to_purge = match selector {
            EraseSelector::Memories { ids: listed, .. } => listed.as_slice(),
            EraseSelector::Bank { .. } | EraseSelector::Tenant { .. } => ids.as_slice(),
        };
        let tenant = format!("tenant = {}", literal(selector.tenant()));
        match selector {
            EraseSelector::Tenant { .. } => {
                for (table, name) in self.all() {
                    table
                        .delete(tenant.as_str())
                        .await
                        .map_err(IndexerError::lance(name))?;
                }
            }
            EraseSelector::Memories { .. } | EraseSelector::Bank { .. } => {
                self.memories
                    .delete(selector.memories_filter().as_str())
                    .await
                    .map_err(IndexerError::lance(MEMORIES))?;
                // Bounded predicates: a bank can hold many thousands of memories.
                for chunk in ids_to_purge.chunks(512) {
                    let filter = format!("{tenant} AND {}", id_list("memory_id", chunk));
                    for (table, name) in [(&self.events, EVENTS), (&self.vectors, VECTORS)] {
                        table
                            .delete(filter.as_str())
                            .await
                            .map_err(IndexerError::lance(name))?;
                    }
                }
            }
        }
        self.purge().await?;
        Ok(ids)
    }

    /// The selector an erasure records in its intent file: a bank becomes
    /// the ids of its memories, so that a run repeated after an
    /// interruption (the memory rows already deleted) still finds the
    /// events and vectors to remove.
    pub(crate) async fn resolve(&self, selector: &EraseSelector) -> Result<EraseSelector> {
        Ok(match selector {
            EraseSelector::Bank { tenant, .. } => EraseSelector::Memories {
                tenant: tenant.clone(),
                ids: self.ids_where(&selector.memories_filter()).await?,
            },
            EraseSelector::Memories { .. } | EraseSelector::Tenant { .. } => selector.clone(),
        })
    }

    /// Removes deleted rows physically: rewrites every fragment that has any
    /// deletion (LanceDB's default only rewrites past 10 % deleted), then
    /// drops every old table version and unreferenced file. Only safe while
    /// no other writer touches the tables, which the store's lock and mutex
    /// guarantee.
    pub(crate) async fn purge(&self) -> Result<()> {
        let compaction = CompactionOptions {
            materialize_deletions: true,
            materialize_deletions_threshold: 0.0,
            ..CompactionOptions::default()
        };
        self.rewrite(compaction, OldVersions::DropAll).await
    }

    fn all(&self) -> [(&Table, &'static str); 3] {
        [
            (&self.memories, MEMORIES),
            (&self.events, EVENTS),
            (&self.vectors, VECTORS),
        ]
    }

    async fn ids_where(&self, filter: &str) -> Result<Vec<String>> {
        let batches: Vec<RecordBatch> = self
            .memories
            .query()
            .only_if(filter)
            .select(Select::columns(&["id"]))
            .execute()
            .await
            .map_err(IndexerError::lance(MEMORIES))?
            .try_collect()
            .await
            .map_err(IndexerError::lance(MEMORIES))?;
        let mut ids = Vec::new();
        for batch in &batches {
            let c = Columns {
                batch,
                table: MEMORIES,
            };
            let column = c.text("id")?;
            ids.extend((0..batch.num_rows()).map(|i| column.value(i).to_string()));
        }
        Ok(ids)
    }
}

/// Gives a table from before sentence vectors its (all null) sentence column.
async fn add_sentences_column(table: &Table, name: &'static str) -> Result<()> {
    let schema = table.schema().await.map_err(IndexerError::lance(name))?;
    if schema.field_with_name(SENTENCES).is_ok() {
        return Ok(());
    }
    tracing::info!(table = name, "adding the sentence-vector column");
    table
        .add_columns()
        .transform(NewColumnTransform::AllNulls(Arc::new(Schema::new(vec![
            sentences_field(),
        ]))))
        .execute()
        .await
        .map_err(IndexerError::lance(name))?;
    Ok(())
}

async fn open_or_create(db: &Connection, name: &str, schema: SchemaRef) -> Result<Table> {
    match open_table(db, name).await {
        Ok(table) => Ok(table),
        Err(lancedb::Error::TableNotFound { .. }) => {
            let created = db
                .create_empty_table(name, schema)
                .execute()
                .await
                .map_err(IndexerError::lance(name))?;
            if cfg!(feature = "faults") {
                // Reopened so that its writes go through the fault layer too.
                open_table(db, name)
                    .await
                    .map_err(IndexerError::lance(name))
            } else {
                Ok(created)
            }
        }
        Err(e) => Err(IndexerError::lance(name)(e)),
    }
}

async fn open_table(db: &Connection, name: &str) -> lancedb::Result<Table> {
    let builder = db.open_table(name);
    // Tests see (and fail) every object the table writes.
    #[cfg(feature = "faults")]
    let builder = builder.lance_read_params(lancedb::table::ReadParams {
        store_options: Some(lance::io::ObjectStoreParams {
            object_store_wrapper: Some(Arc::new(crate::faults::object_store::FaultWrapper)),
            ..Default::default()
        }),
        ..Default::default()
    });
    builder.execute().await
}

/// The highest `seq` in `table` (0 when empty).
async fn max_seq(table: &Table, name: &str) -> Result<u64> {
    let mut max = 0;
    for batch in &seq_column(table, name).await? {
        max = seqs_of(batch, name)?.iter().flatten().fold(max, u64::max);
    }
    Ok(max)
}

/// `table`'s `seq` column, in scan order.
async fn seq_column(table: &Table, name: &str) -> Result<Vec<RecordBatch>> {
    table
        .query()
        .select(Select::columns(&["seq"]))
        .execute()
        .await
        .map_err(IndexerError::lance(name))?
        .try_collect()
        .await
        .map_err(IndexerError::lance(name))
}

fn seqs_of<'b>(batch: &'b RecordBatch, name: &str) -> Result<&'b UInt64Array> {
    batch
        .column_by_name("seq")
        .and_then(|c| c.as_primitive_opt::<UInt64Type>())
        .ok_or_else(|| IndexerError::corrupt(name, "seq column missing or not u64"))
}

/// Runs `query` on table `name`, handing `each` its batches as they come.
async fn each_batch(
    query: lancedb::query::Query,
    name: &str,
    mut each: impl FnMut(RecordBatch) -> Result<()>,
) -> Result<()> {
    let mut batches = query.execute().await.map_err(IndexerError::lance(name))?;
    while let Some(batch) = batches
        .try_next()
        .await
        .map_err(IndexerError::lance(name))?
    {
        each(batch)?;
    }
    Ok(())
}

async fn scan(table: &Table, name: &str) -> Result<Vec<RecordBatch>> {
    table
        .query()
        .execute()
        .await
        .map_err(IndexerError::lance(name))?
        .try_collect::<Vec<_>>()
        .await
        .map_err(IndexerError::lance(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(seq: u64, sentences: Vec<Vec<f32>>) -> MemoryRow {
        MemoryRow {
            seq,
            id: format!("m{seq}"),
            tenant: "acme".into(),
            bank: "org".into(),
            kind: "note".into(),
            title: None,
            content: "Deploys run at noon. Freezes start on Fridays.".into(),
            elements: vec![],
            source: "explicit".into(),
            trust: "user".into(),
            agent: None,
            session_id: None,
            confidence: 1.0,
            observed_at_ms: 0,
            created_at_ms: 0,
            expires_at_ms: None,
            supersedes: None,
            vector: Some(vec![1.0, 0.0, 0.0]),
            sentences,
        }
    }

    #[tokio::test]
    async fn a_table_from_before_sentence_vectors_gets_the_column_and_keeps_its_rows() {
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().to_str().unwrap();
        let backfilled = |seq: u64, sentences: Vec<Vec<f32>>| VectorRow {
            seq,
            tenant: "acme".into(),
            memory_id: format!("m{seq}"),
            vector: vec![0.0, 0.0, 1.0],
            sentences,
        };
        {
            // The tables as the first release wrote them: no sentence column.
            let db = lancedb::connect(uri).execute().await.unwrap();
            let without_last = |batch: RecordBatch| {
                let old_width = batch.num_columns() - 1;
                batch.project(&(0..old_width).collect::<Vec<_>>()).unwrap()
            };
            let memories = memories_to_batch(&[&row(1, vec![])], 3).unwrap();
            db.create_table(MEMORIES, without_last(memories))
                .execute()
                .await
                .unwrap();
            let scratch = dir.path().join("scratch");
            let other = Tables::open(scratch.to_str().unwrap(), &[], 3)
                .await
                .unwrap();
            other
                .append(&[Record::Vector(backfilled(3, vec![]))])
                .await
                .unwrap();
            let vectors = scan(&other.vectors, VECTORS).await.unwrap().remove(0);
            db.create_table(VECTORS, without_last(vectors))
                .execute()
                .await
                .unwrap();
        }
        let tables = Tables::open(uri, &[], 3).await.unwrap();
        let sentences = vec![vec![0.0, 1.0, 0.0], vec![0.0, 0.6, 0.8]];
        tables
            .append(&[
                Record::Memory(row(2, sentences.clone())),
                Record::Vector(backfilled(4, sentences.clone())),
            ])
            .await
            .unwrap();
        let rows = tables.load_memories().await.unwrap();
        assert_eq!(rows, [row(1, vec![]), row(2, sentences.clone())]);
        let vectors = tables.load_vectors().await.unwrap();
        assert_eq!(vectors, [backfilled(3, vec![]), backfilled(4, sentences)]);
        drop(tables);
        // Reopening finds the columns and adds nothing.
        let tables = Tables::open(uri, &[], 3).await.unwrap();
        assert_eq!(tables.load_memories().await.unwrap().len(), 2);
        assert_eq!(tables.load_vectors().await.unwrap().len(), 2);
    }

    #[test]
    fn sentence_vectors_of_the_wrong_width_are_refused() {
        let bad = row(1, vec![vec![1.0, 0.0]]);
        assert!(memories_to_batch(&[&bad], 3).is_err());
    }
}
