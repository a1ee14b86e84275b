//! The engine: open, write, read, change. Recall lives in [`crate::recall_path`].

use std::collections::HashSet;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Instant;

use rayon::prelude::*;
use recall_indexer::{
    AuditEntry, AuditOp, DEFAULT_DIM, Durability, Embedder, FastEmbedder, LexicalSearcher, Record,
    Store, StoreOptions, embed_checked,
};
use serde::Serialize;
use uuid::Uuid;

use crate::config::{Config, ModelSource};
use crate::error::{Error, Result};
use crate::event::Event;
use crate::footprint::MemoryUse;
use crate::memory::{Memory, NewMemory, Remembered};
use crate::recall_path::RecallBuilder;
use crate::state::{DerivedBatch, State, to_ms};
use crate::validate;
use crate::write_policy::{Guarded, PARALLEL_PREPARE_FROM, Prepared, decide, prepare};

/// The recall engine. Cheap to clone (`Arc` inside), `Send + Sync`; share one
/// per data directory across tasks.
///
/// ```
/// use recall::{Config, Engine, Kind, ModelSource, NewMemory, Trust};
/// # tokio::runtime::Runtime::new()?.block_on(async {
/// let dir = tempfile::tempdir()?;
/// let engine = Engine::open(Config::new(dir.path()).model(ModelSource::None)).await?;
/// let id = engine
///     .remember(NewMemory::new("acme", "org", Kind::Pitfall, "The billing cron job fails on leap days").trust(Trust::User))
///     .await?
///     .id();
/// let result = engine.recall("acme", "billing cron leap day").read(["org"]).execute().await?;
/// assert_eq!(result.hits[0].memory.id, id);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

/// The engine's shared state. Private to this module: the rest of the
/// crate reaches it through the accessors below, which are the one place
/// the locks are taken.
///
/// Lock order: the backfill mutex ([`Engine::lock_backfill`]), then the
/// store mutex ([`Engine::lock_store`]), then the state lock
/// ([`Engine::read_state`] / [`Engine::write_state`]), never the other way
/// round, and no `.await` while a state guard is held (it is a blocking
/// `std` lock). The write path, erasure, session ends and impressions hold
/// the store mutex from the moment they read the state to decide until the
/// records are applied, so no other write slips between. `confirm`,
/// `forget`, `supersede` and `release` check the memory before they take
/// the store mutex and do not check again under it (the events they append
/// are idempotent in the state, except that two racing supersessions of
/// one memory both land; the later one wins).
struct Inner {
    config: Config,
    embedder: Option<Arc<dyn Embedder>>,
    state: RwLock<State>,
    store: tokio::sync::Mutex<Store>,
    lexical: LexicalSearcher,
    dim: usize,
    /// Held while a backfill runs, so only one does.
    backfill: tokio::sync::Mutex<()>,
}

/// Counts for `recall status`.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// The embedder in use, if any.
    pub embedder: Option<String>,
    /// Tenants with at least one memory.
    pub tenants: usize,
    /// Memories of every state.
    pub memories: usize,
    /// Active (neither forgotten nor superseded) memories.
    pub active: usize,
    /// Memories stored without a vector.
    pub without_vector: usize,
    /// Writes acknowledged but not yet flushed from the log to the tables.
    pub pending_in_log: usize,
    /// Why the store is read-only, when it opened while its log could not
    /// be replayed into the tables (a full disk): reads serve everything,
    /// writes are refused until a reopen with space.
    pub read_only: Option<String>,
}

fn resolve_embedder(model: &ModelSource) -> Result<Option<Arc<dyn Embedder>>> {
    match model {
        ModelSource::None => Ok(None),
        ModelSource::Custom(e) => Ok(Some(e.clone())),
        ModelSource::Dir(dir) => Ok(Some(Arc::new(FastEmbedder::from_dir(dir)?))),
        ModelSource::Default => match crate::model::find_model_dir()? {
            Some(dir) => Ok(Some(Arc::new(FastEmbedder::from_dir(&dir)?))),
            None => {
                tracing::warn!(
                    looked_in = ?crate::model::default_model_dirs(),
                    "no embedding model found (run scripts/setup.sh); recall is lexical-only \
                     and new memories get vectors once a model is configured"
                );
                Ok(None)
            }
        },
    }
}

impl Engine {
    /// Opens (or creates) the data directory, loads the model, replays the
    /// write-ahead log and folds the tables into memory.
    pub async fn open(config: Config) -> Result<Engine> {
        let model = config.model.clone();
        let embedder = tokio::task::spawn_blocking(move || resolve_embedder(&model))
            .await
            .map_err(|e| Error::Task(e.to_string()))??;
        let dim = embedder.as_ref().map_or(DEFAULT_DIM, |e| e.dim());
        let mut options = StoreOptions::new(&config.data_dir, dim);
        options.remote = config.remote.clone();
        options.flush_every = config.write.flush_every.max(1);
        options.compact_every = config.write.compact_every;
        // The records are folded as the store reads them, a table batch at
        // a time: the rows (with their vectors) are never all held at once
        // besides the state they fold into, and each block of vector rows
        // goes to its file as soon as it is full. When the vectors are in
        // block files already, the rows come without them and take them
        // from the files by key; the few no file holds are read after.
        options.elide_vectors = crate::derived::has_vector_files(&config.data_dir, dim);
        let mut fold = Fold::start(
            dim,
            config.data_dir.clone(),
            config.write.vector_files_from,
            options.elide_vectors,
        )?;
        let opened = Store::open_with(options, |records| fold.take(records)).await;
        let mut state = fold.finish()?;
        let (store, replayed) = opened?;
        read_elided_vectors(&store, &mut state).await?;
        crate::derived::map_vector_blocks(
            &config.data_dir,
            &mut state,
            config.write.vector_files_from,
        );
        crate::derived::resume_partitions(&config.data_dir, &mut state);
        let lexical = store.lexical();
        tracing::info!(
            dir = %config.data_dir.display(),
            replayed,
            embedder = embedder.as_ref().map(|e| e.name().to_string()),
            "recall engine open"
        );
        let engine = Engine {
            inner: Arc::new(Inner {
                config,
                embedder,
                state: RwLock::new(state),
                store: tokio::sync::Mutex::new(store),
                lexical,
                dim,
                backfill: tokio::sync::Mutex::new(()),
            }),
        };
        if engine.embedder().is_some() && engine.status().await?.without_vector > 0 {
            let background = engine.clone();
            tokio::spawn(async move {
                if let Err(e) = background.backfill().await {
                    tracing::warn!(error = %e, "embedding backfill stopped; it resumes at the next open");
                }
            });
        }
        Ok(engine)
    }

    /// The configuration it was opened with.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The embedder, if one is configured.
    pub fn embedder(&self) -> Option<&Arc<dyn Embedder>> {
        self.inner.embedder.as_ref()
    }

    /// The store, locked: the first lock of the order (see [`Inner`]).
    pub(crate) async fn lock_store(&self) -> tokio::sync::MutexGuard<'_, Store> {
        self.inner.store.lock().await
    }

    /// Held while a backfill runs, so only one does.
    pub(crate) async fn lock_backfill(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.inner.backfill.lock().await
    }

    /// The BM25 searcher (reads need no store lock).
    pub(crate) fn lexical(&self) -> &LexicalSearcher {
        &self.inner.lexical
    }

    /// The vectors' width: the embedder's, or the default without one.
    pub(crate) fn dim(&self) -> usize {
        self.inner.dim
    }

    /// The state for reading: the second lock of the order (see [`Inner`]).
    pub(crate) fn read_state(&self) -> Result<RwLockReadGuard<'_, State>> {
        self.inner
            .state
            .read()
            .map_err(|_| Error::Task("state lock poisoned".into()))
    }

    /// The state for writing: the second lock of the order (see [`Inner`]).
    pub(crate) fn write_state(&self) -> Result<RwLockWriteGuard<'_, State>> {
        self.inner
            .state
            .write()
            .map_err(|_| Error::Task("state lock poisoned".into()))
    }

    /// Embeds texts off the async threads.
    pub(crate) async fn embed(&self, texts: Vec<String>) -> Result<Option<Vec<Vec<f32>>>> {
        let Some(embedder) = self.inner.embedder.clone() else {
            return Ok(None);
        };
        if texts.is_empty() {
            return Ok(Some(Vec::new()));
        }
        let vectors = tokio::task::spawn_blocking(move || {
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            embed_checked(embedder.as_ref(), &refs)
        })
        .await
        .map_err(|e| Error::Task(e.to_string()))??;
        Ok(Some(vectors))
    }

    /// Writes one memory (§3): validated, embedded, deduplicated (cosine ≥
    /// 0.94 confirms the existing memory instead), durable before it returns.
    pub async fn remember(&self, memory: NewMemory) -> Result<Remembered> {
        let mut out = self.remember_many(vec![memory]).await?;
        out.pop()
            .ok_or_else(|| Error::Task("remember produced no outcome".into()))
    }

    /// Writes a batch with the same rules as [`Engine::remember`], one outcome
    /// per input in order. Items later in the batch deduplicate against
    /// earlier ones. The batch is validated whole first (one bad item fails
    /// it and nothing is written) and is durable as one unit. For a large
    /// input, [`Engine::import`] makes the calls.
    pub async fn remember_many(&self, memories: Vec<NewMemory>) -> Result<Vec<Remembered>> {
        let prepared = self.prepare_many(memories)?;
        let prepared = self.embed_missing(prepared).await?;
        let (outcomes, ()) = self.write_prepared(prepared, || ()).await?;
        Ok(outcomes)
    }

    /// Steps 1–3 of the write path (§3) for a batch; the first bad item in
    /// order fails it. Needs no lock: a bulk import prepares its next batch
    /// while this one is applied (see [`Engine::import`]).
    pub(crate) fn prepare_many(&self, mut items: Vec<NewMemory>) -> Result<Prepared> {
        // Redaction and screening are regex passes per item: a bulk import
        // spreads them over the rayon pool.
        let guarded: Vec<Result<Guarded>> = if items.len() >= PARALLEL_PREPARE_FROM {
            items
                .par_iter_mut()
                .map(|item| prepare(&self.inner.config, self.inner.dim, item))
                .collect()
        } else {
            items
                .iter_mut()
                .map(|item| prepare(&self.inner.config, self.inner.dim, item))
                .collect()
        };
        let guarded = guarded.into_iter().collect::<Result<Vec<Guarded>>>()?;
        Ok(Prepared { items, guarded })
    }

    /// Embeds the prepared items that came without a vector: the content,
    /// and each of its sentences when it has several ([`crate::sentences`]),
    /// in one call. An item with the caller's vector keeps the sentence
    /// vectors the caller gave, if any: its embeddings are the caller's to
    /// choose.
    pub(crate) async fn embed_missing(&self, mut prepared: Prepared) -> Result<Prepared> {
        let items = &mut prepared.items;
        let to_embed: Vec<usize> = items
            .iter()
            .enumerate()
            .filter(|(_, m)| m.vector.is_none())
            .map(|(i, _)| i)
            .collect();
        let mut texts: Vec<String> = to_embed.iter().map(|i| items[*i].content.clone()).collect();
        // Where each item's sentences start in `texts`, and how many.
        let mut spans = Vec::with_capacity(to_embed.len());
        for &i in &to_embed {
            let parts = crate::sentences::sentences(&items[i].content);
            spans.push((texts.len(), parts.len()));
            texts.extend(parts);
        }
        if let Some(mut vectors) = self.embed(texts).await? {
            let mut sentence_vectors = vectors.split_off(to_embed.len());
            // Taken from the back, so each split leaves the earlier items'.
            for ((&i, v), &(start, n)) in to_embed.iter().zip(vectors).zip(&spans).rev() {
                items[i].vector = Some(v);
                let tail = sentence_vectors.split_off(start - to_embed.len());
                prepared.guarded[i].sentences = tail;
                debug_assert_eq!(prepared.guarded[i].sentences.len(), n);
            }
        }
        Ok(prepared)
    }

    /// Steps 4–7 of the write path under the write lock: decide, log,
    /// apply. `beside` runs on the pool while the state is applied (the
    /// apply is mostly one thread; a bulk import prepares its next batch
    /// there) and its result comes back with the outcomes. It does not run
    /// if the write fails.
    ///
    /// Each call that writes logs how long its three serial steps took, at
    /// debug level (`RUST_LOG=recall=debug`): `decide_ms` (the near-copy
    /// probe), `log_ms` ([`Store::append`]: the log's write and fsync beside
    /// the lexical analysis, then the records kept for the table flush) and
    /// `apply_ms` (the in-memory state, with `beside`). A bulk import's
    /// wall time is their sum over its calls.
    pub(crate) async fn write_prepared<R: Send>(
        &self,
        prepared: Prepared,
        beside: impl FnOnce() -> R + Send,
    ) -> Result<(Vec<Remembered>, R)> {
        let mut store = self.lock_store().await;
        let now = self.inner.config.clock.now();
        let deciding = Instant::now();
        let decided = {
            let state = self.read_state()?;
            decide(
                &state,
                prepared.items,
                prepared.guarded,
                now,
                &self.inner.config,
                self.inner.dim,
            )?
        };
        if decided.records.is_empty() {
            store.audit(&decided.audit).await?;
            return Ok((decided.outcomes, beside()));
        }
        let logging = Instant::now();
        // The audit entries are written beside the records (the audit
        // file's fsync beside the log's; on object storage, their object
        // beside the log's).
        let (written, audited) = store
            .append_audited(decided.records, &decided.audit, Durability::Immediate)
            .await?;
        let applying = Instant::now();
        let beside = {
            let mut state = self.write_state()?;
            let state: &mut State = &mut state;
            let ((), done) =
                rayon::join(|| state.apply_placed(written, decided.placements), beside);
            done
        };
        // Logged and applied either way (a reopen shows the records); not
        // acknowledged if the audit entries did not make it.
        audited?;
        self.map_vector_blocks(&store);
        let ms = |from: Instant, to: Instant| (to - from).as_secs_f64() * 1e3;
        tracing::debug!(
            items = decided.outcomes.len(),
            decide_ms = ms(deciding, logging),
            log_ms = ms(logging, applying),
            apply_ms = ms(applying, Instant::now()),
            "write call applied"
        );
        Ok((decided.outcomes, beside))
    }

    /// Appends records durably and applies them to the in-memory state.
    pub(crate) async fn persist(&self, store: &mut Store, records: Vec<Record>) -> Result<()> {
        self.persist_with(store, records, Durability::Immediate)
            .await
    }

    /// [`Engine::persist`] with the log's guarantee named: impressions are
    /// [`Durability::Logged`], everything a caller is told about is
    /// `Immediate`.
    async fn persist_with(
        &self,
        store: &mut Store,
        records: Vec<Record>,
        durability: Durability,
    ) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let written = store.append_with(records, durability).await?;
        self.write_state()?.apply_all(written);
        self.map_vector_blocks(store);
        Ok(())
    }

    /// Hands each full block of vector rows the state holds in memory to
    /// its file and maps it back ([`crate::derived`]): the files are
    /// written under the read lock, so recalls go on, and the mappings
    /// swapped in under the write lock. Only after a write that added
    /// vectors ([`State::vectors_grew`]). `_locked`: the caller holds the
    /// store, so no write changes the state between the two.
    ///
    /// Housekeeping after a durable write: it never fails the write. A
    /// poisoned lock is left for the next call that needs the state.
    fn map_vector_blocks(&self, _locked: &Store) {
        let files = {
            let Ok(state) = self.read_state() else {
                return;
            };
            if !state.vectors_grew {
                return;
            }
            let config = &self.inner.config;
            let from = config.write.vector_files_from;
            crate::derived::has_blocks_to_map(&state, from)
                .then(|| crate::derived::vector_files(&config.data_dir, &state, from))
        };
        if let Ok(mut state) = self.write_state() {
            if let Some(files) = files {
                crate::derived::take_vector_files(&mut state, files);
            }
            state.vectors_grew = false;
        }
    }

    /// Saves the vector partitions the files under `derived/partitions/`
    /// do not hold yet ([`crate::derived::save_partitions`]): after an
    /// import and at close, so the next open restores them instead of
    /// training. `_locked`: the caller holds the store, so one writer at a
    /// time writes the files. Housekeeping: never fails the caller (a file
    /// not written costs the next open a training, logged).
    pub(crate) fn save_partitions(&self, _locked: &Store) {
        let Ok(state) = self.read_state() else {
            return;
        };
        let written = crate::derived::save_partitions(&self.inner.config.data_dir, &state);
        tracing::debug!(written, "vector partitions saved");
    }

    /// Writes one event now (or at `at_ms`). `memory` is None for
    /// tenant-wide events.
    pub(crate) async fn append_event(
        &self,
        tenant: &str,
        memory: Option<Uuid>,
        event: Event,
        at_ms: Option<i64>,
    ) -> Result<()> {
        self.append_audited_event(tenant, memory, event, at_ms, None)
            .await
    }

    /// [`Engine::append_event`] plus an audit entry for it, written together.
    pub(crate) async fn append_audited_event(
        &self,
        tenant: &str,
        memory: Option<Uuid>,
        event: Event,
        at_ms: Option<i64>,
        audit: Option<AuditEntry>,
    ) -> Result<()> {
        let at_ms = at_ms.unwrap_or_else(|| to_ms(self.inner.config.clock.now()));
        let mut store = self.lock_store().await;
        // The callers looked their memories up before waiting for the lock;
        // an erasure may have taken one since. Checked again under the lock
        // every write and erasure holds, so no event names an erased memory.
        {
            let state = self.read_state()?;
            let t = state.tenant(tenant);
            let superseding = match &event {
                Event::SupersededBy(new) => Some(*new),
                _ => None,
            };
            if let Some(gone) = memory
                .into_iter()
                .chain(superseding)
                .find(|id| t.and_then(|t| t.get(id)).is_none())
            {
                return Err(Error::not_found(tenant, gone));
            }
        }
        let record = event.record(tenant, memory, at_ms);
        self.persist(&mut store, vec![record]).await?;
        if let Some(entry) = audit {
            store.audit(&[entry]).await?;
        }
        Ok(())
    }

    /// An audit entry about one memory, now, by the configured actor.
    pub(crate) fn audit_entry(&self, tenant: &str, op: AuditOp, ids: &[Uuid]) -> AuditEntry {
        let mut entry = AuditEntry::new(to_ms(self.inner.config.clock.now()), tenant, op)
            .actor(self.inner.config.actor.clone());
        entry.ids = ids.iter().map(Uuid::to_string).collect();
        entry
    }

    /// Checks the tenant and finds a memory by id in it.
    pub(crate) fn lookup(&self, tenant: &str, id: Uuid) -> Result<Memory> {
        validate::scope_name("tenant", tenant)?;
        let state = self.read_state()?;
        state
            .tenant(tenant)
            .and_then(|t| t.view_of(&id))
            .ok_or_else(|| Error::not_found(tenant, id))
    }

    /// Someone checked it and it still holds: `confirmations += 1`,
    /// `last_confirmed_at = now` (§6).
    pub async fn confirm(&self, tenant: &str, id: Uuid) -> Result<Memory> {
        self.lookup(tenant, id)?;
        self.append_event(tenant, Some(id), Event::Confirm, None)
            .await?;
        self.lookup(tenant, id)
    }

    /// Soft delete: leaves recall, stays in `get`/`history` (§6).
    pub async fn forget(&self, tenant: &str, id: Uuid) -> Result<Memory> {
        let m = self.lookup(tenant, id)?;
        if m.forgotten {
            return Ok(m);
        }
        let audit = self.audit_entry(tenant, AuditOp::Forget, &[id]);
        self.append_audited_event(tenant, Some(id), Event::Forget, None, Some(audit))
            .await?;
        self.lookup(tenant, id)
    }

    /// Marks `old` as replaced by `new` (both existing, same tenant): `old`
    /// leaves recall and keeps `superseded_by` in history (§3.6, §6).
    /// (Element inheritance applies when superseding at write time, via
    /// [`NewMemory::supersedes`]; stored rows are never rewritten.)
    pub async fn supersede(&self, tenant: &str, old: Uuid, new: Uuid) -> Result<Memory> {
        let old_memory = self.lookup(tenant, old)?;
        let new_memory = self.lookup(tenant, new)?;
        if old == new {
            return Err(Error::invalid(
                "supersede",
                "a memory cannot supersede itself",
            ));
        }
        if !old_memory.is_active() {
            return Err(Error::Conflict {
                id: old,
                reason: "is not active and cannot be superseded".into(),
            });
        }
        if !new_memory.is_active() {
            return Err(Error::Conflict {
                id: new,
                reason: "is not active and cannot supersede".into(),
            });
        }
        let audit = self.audit_entry(tenant, AuditOp::Supersede, &[old, new]);
        self.append_audited_event(
            tenant,
            Some(old),
            Event::SupersededBy(new),
            None,
            Some(audit),
        )
        .await?;
        self.lookup(tenant, old)
    }

    /// One memory of the tenant, in any state.
    pub async fn get(&self, tenant: &str, id: Uuid) -> Result<Memory> {
        self.lookup(tenant, id)
    }

    /// The supersession chain through `id`, oldest first.
    pub async fn history(&self, tenant: &str, id: Uuid) -> Result<Vec<Memory>> {
        let start = self.lookup(tenant, id)?;
        let state = self.read_state()?;
        let Some(t) = state.tenant(tenant) else {
            return Err(Error::not_found(tenant, id));
        };
        let mut chain = vec![start.clone()];
        let mut seen: HashSet<Uuid> = HashSet::from([start.id]);
        let mut back = start.supersedes;
        while let Some(view) = back.and_then(|p| t.view_of(&p)) {
            if !seen.insert(view.id) {
                break;
            }
            back = view.supersedes;
            chain.insert(0, view);
        }
        let mut forward = start.superseded_by;
        while let Some(view) = forward.and_then(|n| t.view_of(&n)) {
            if !seen.insert(view.id) {
                break;
            }
            forward = view.superseded_by;
            chain.push(view);
        }
        Ok(chain)
    }

    /// The tenant's active memories (optionally of one bank), oldest first.
    pub async fn list(&self, tenant: &str, bank: Option<&str>) -> Result<Vec<Memory>> {
        validate::scope_name("tenant", tenant)?;
        if let Some(b) = bank {
            validate::scope_name("bank", b)?;
        }
        let state = self.read_state()?;
        Ok(state
            .tenant(tenant)
            .map(|t| {
                t.memories
                    .iter()
                    .enumerate()
                    .filter(|&(i, m)| m.is_active() && bank.is_none_or(|b| t.bank_of(i) == b))
                    .map(|(i, _)| t.view(i))
                    .collect()
            })
            .unwrap_or_default())
    }

    /// Every memory of the tenant in any state (active, forgotten,
    /// superseded, quarantined), oldest first: what a person may ask to see
    /// of their data. Erased memories are gone and not listed.
    pub async fn export(&self, tenant: &str) -> Result<Vec<Memory>> {
        validate::scope_name("tenant", tenant)?;
        let state = self.read_state()?;
        Ok(state
            .tenant(tenant)
            .map(|t| (0..t.memories.len()).map(|i| t.view(i)).collect())
            .unwrap_or_default())
    }

    /// Starts a recall in `tenant` (§4); see [`RecallBuilder`].
    pub fn recall(&self, tenant: impl Into<String>, query: impl Into<String>) -> RecallBuilder {
        RecallBuilder::new(self.clone(), tenant.into(), query.into())
    }

    /// Records that the given memories were dealt in a session (once per
    /// memory per session).
    pub(crate) async fn record_impressions(
        &self,
        tenant: &str,
        session: &str,
        ids: &[Uuid],
    ) -> Result<()> {
        let now = to_ms(self.inner.config.clock.now());
        let mut store = self.lock_store().await;
        let events: Vec<Record> = {
            let state = self.read_state()?;
            let Some(t) = state.tenant(tenant) else {
                return Ok(());
            };
            ids.iter()
                .filter_map(|id| t.get(id))
                .filter(|m| !m.usage.dealt_to(session))
                .map(|m| {
                    let event = Event::Impression {
                        session: session.to_string(),
                    };
                    event.record(tenant, Some(m.id), now)
                })
                .collect()
        };
        // Not fsynced: an impression is no write the caller was promised,
        // and the fsync was most of a session's recall (MEASUREMENTS.md,
        // "MCP"). A killed process keeps it (the OS has the bytes);
        // a power loss can drop the newest, and the citation that needs it
        // is fsynced after it in the same log, which makes it durable too.
        self.persist_with(&mut store, events, Durability::Logged)
            .await
    }

    /// Counts for `recall status`.
    pub async fn status(&self) -> Result<Status> {
        let (pending, read_only) = {
            let store = self.lock_store().await;
            (store.pending(), store.read_only().map(str::to_string))
        };
        let state = self.read_state()?;
        let mut status = Status {
            embedder: self.inner.embedder.as_ref().map(|e| e.name().to_string()),
            tenants: state.tenants.len(),
            memories: 0,
            active: 0,
            without_vector: 0,
            pending_in_log: pending,
            read_only,
        };
        for t in state.tenants.values() {
            status.memories += t.memories.len();
            status.active += t.memories.iter().filter(|m| m.is_active()).count();
            status.without_vector += t
                .memories
                .iter()
                .filter(|m| m.vector_row().is_none())
                .count();
        }
        Ok(status)
    }

    /// The bytes the in-memory state holds, by part: the memories, their
    /// lookups, and the vector sets (see [`MemoryUse`] for what is counted).
    ///
    /// ```no_run
    /// # async fn demo(engine: recall::Engine) -> recall::Result<()> {
    /// let use_ = engine.memory_use()?;
    /// println!("{} MiB in vectors", use_.vectors.total() >> 20);
    /// # Ok(()) }
    /// ```
    pub fn memory_use(&self) -> Result<MemoryUse> {
        let state = self.read_state()?;
        Ok(crate::footprint::memory_use(&state))
    }

    /// Stops this engine writing and lets another process take the store
    /// over at once: saves the vector partitions the next open would
    /// otherwise train, waits for a background flush, then gives up the
    /// writer's lease of a store on object storage (without it, the next
    /// process waits for the lease to expire). Every write afterwards fails
    /// with [`crate::IndexerError::Closed`]; recall and reads go on. Not needed
    /// for safety: the log holds everything acknowledged.
    ///
    /// ```no_run
    /// # async fn demo(engine: recall::Engine) -> recall::Result<()> {
    /// engine.close().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn close(&self) -> Result<()> {
        let mut store = self.lock_store().await;
        self.save_partitions(&store);
        store.release().await?;
        Ok(())
    }

    /// Writes everything in the log to the tables now (not needed for
    /// safety; the log is replayed at open).
    pub async fn flush(&self) -> Result<()> {
        self.lock_store().await.flush().await?;
        Ok(())
    }

    /// Waits until the background work that earlier writes started has
    /// finished: table compaction and the BM25 index's segment merges
    /// (writes wait meanwhile). Nothing needs this for correctness; a
    /// benchmark calls it so that timings after a bulk import do not share
    /// the cores with the import's leftover work.
    ///
    /// ```no_run
    /// # async fn demo(engine: recall::Engine) -> recall::Result<()> {
    /// engine.flush().await?;
    /// engine.wait_for_maintenance().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn wait_for_maintenance(&self) -> Result<()> {
        self.lock_store().await.wait_for_maintenance().await?;
        Ok(())
    }
}

/// After an open's fold of rows read without their vectors: the vectors no
/// file row stood for (at a million memories with their files in place,
/// the last partial block's), read from the tables a batch at a time and
/// applied as they come (in sequence order, as the table holds them).
async fn read_elided_vectors(store: &Store, state: &mut State) -> Result<()> {
    let wanted = state.take_vectors_to_read();
    if wanted.is_empty() {
        return Ok(());
    }
    let seqs: Vec<u64> = wanted.iter().map(|(seq, ..)| *seq).collect();
    let mut read = 0;
    store
        .each_memory_vector(&seqs, |seq, vector| {
            // `wanted` is in sequence order.
            if let Ok(at) = wanted.binary_search_by_key(&seq, |(s, ..)| *s) {
                let (_, tenant, index) = &wanted[at];
                state.apply_read_vector(tenant, *index, &vector);
                read += 1;
            }
        })
        .await?;
    tracing::debug!(wanted = wanted.len(), read, "vectors no file held");
    Ok(())
}

/// The state being built by an open, on a thread of its own: the store
/// decodes the next table batch while this thread folds the last one, so
/// an open takes about the longer of the two rather than their sum. The
/// channel holds [`FOLD_QUEUE`] batches, so the open still never holds
/// every row at once.
struct Fold {
    sender: Option<std::sync::mpsc::SyncSender<DerivedBatch>>,
    thread: std::thread::JoinHandle<(State, FoldTimes)>,
    /// How long the store waited for the fold to take a batch.
    store_waited: std::time::Duration,
}

/// Where the fold's thread spent an open (logged at debug level): which of
/// the store's read and the fold is the longer.
#[derive(Debug, Default)]
struct FoldTimes {
    folding: std::time::Duration,
    /// Of `folding`: full blocks of vector rows handed to their files.
    mapping: std::time::Duration,
    waiting: std::time::Duration,
}

/// Table batches waiting for the fold while the store reads the next.
const FOLD_QUEUE: usize = 2;

impl Fold {
    fn start(dim: usize, data: std::path::PathBuf, from: usize, elided: bool) -> Result<Fold> {
        let (sender, batches) = std::sync::mpsc::sync_channel::<DerivedBatch>(FOLD_QUEUE);
        let thread = std::thread::Builder::new()
            .name("recall-open-fold".into())
            .spawn(move || {
                let mut state = State::opening(dim, elided);
                let mut times = FoldTimes::default();
                let mut since = Instant::now();
                while let Ok(batch) = batches.recv() {
                    let folding = Instant::now();
                    times.waiting += folding - since;
                    crate::derived::prepare_new_tenants(&data, &mut state, batch.records(), from);
                    state.apply_derived(batch, Vec::new());
                    let mapping = Instant::now();
                    crate::derived::map_vector_blocks(&data, &mut state, from);
                    since = Instant::now();
                    times.folding += since - folding;
                    times.mapping += since - mapping;
                }
                (state, times)
            })
            .map_err(|e| Error::Task(format!("starting the open's fold: {e}")))?;
        Ok(Fold {
            sender: Some(sender),
            thread,
            store_waited: std::time::Duration::ZERO,
        })
    }

    /// Derives a batch of records and hands it to the fold (waits while
    /// it is [`FOLD_QUEUE`] batches behind). Deriving here keeps the fold's
    /// thread, the longer half of an open, to the work that needs order. A
    /// fold that has stopped (it panicked) is reported by [`Fold::finish`].
    fn take(&mut self, records: Vec<Record>) {
        if let Some(sender) = &self.sender {
            let batch = DerivedBatch::of(records);
            let sending = Instant::now();
            let _ = sender.send(batch);
            self.store_waited += sending.elapsed();
        }
    }

    /// The folded state, once every batch handed over is applied.
    fn finish(mut self) -> Result<State> {
        self.sender = None;
        let (state, times) = self
            .thread
            .join()
            .map_err(|_| Error::Task("the open's fold panicked".into()))?;
        tracing::debug!(
            folding_ms = times.folding.as_millis() as u64,
            mapping_ms = times.mapping.as_millis() as u64,
            fold_waited_ms = times.waiting.as_millis() as u64,
            store_waited_ms = self.store_waited.as_millis() as u64,
            "the open's fold"
        );
        Ok(state)
    }
}
