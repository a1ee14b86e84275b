//! The engine: open, write, read, change. Recall lives in [`crate::recall`].

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Instant;

use rayon::prelude::*;
use recall_indexer::{
    AuditEntry, DEFAULT_DIM, Embedder, EventRow, FastEmbedder, LexicalSearcher, MemoryRow,
    Placement, Record, ScanConfig, Store, StoreOptions, embed_checked, near_pairs, normalized,
};
use serde::Serialize;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::config::{Config, ModelSource, default_model_dirs};
use crate::error::{Error, Result};
use crate::memory::{Memory, NewMemory, Remembered, Similar, Source, Trust};
use crate::recall::RecallBuilder;
use crate::screen::ScreenMatch;
use crate::state::{State, encode_counts, op, to_ms};
use crate::validate;

/// The recall engine. Cheap to clone (`Arc` inside), `Send + Sync`; share one
/// per data directory across tasks.
///
/// ```
/// use recall::{Config, Engine, Kind, ModelSource, NewMemory};
/// # tokio::runtime::Runtime::new()?.block_on(async {
/// let dir = tempfile::tempdir()?;
/// let engine = Engine::open(Config::new(dir.path()).model(ModelSource::None)).await?;
/// let id = engine
///     .remember(NewMemory::new("acme", "org", Kind::Pitfall, "The billing cron job fails on leap days"))
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
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) config: Config,
    pub(crate) embedder: Option<Arc<dyn Embedder>>,
    pub(crate) state: RwLock<State>,
    pub(crate) store: tokio::sync::Mutex<Store>,
    pub(crate) lexical: LexicalSearcher,
    pub(crate) dim: usize,
    /// Held while a backfill runs, so only one does.
    pub(crate) backfill: tokio::sync::Mutex<()>,
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
}

fn resolve_embedder(model: &ModelSource) -> Result<Option<Arc<dyn Embedder>>> {
    match model {
        ModelSource::None => Ok(None),
        ModelSource::Custom(e) => Ok(Some(e.clone())),
        ModelSource::Dir(dir) => Ok(Some(Arc::new(FastEmbedder::from_dir(dir)?))),
        ModelSource::Default => {
            match default_model_dirs()
                .into_iter()
                .find(|d| d.join("model.onnx").exists())
            {
                Some(dir) => Ok(Some(Arc::new(FastEmbedder::from_dir(&dir)?))),
                None => {
                    tracing::warn!(
                        "no embedding model found (run scripts/setup.sh); recall is lexical-only \
                         and new memories get vectors once a model is configured"
                    );
                    Ok(None)
                }
            }
        }
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
        options.flush_every = config.write.flush_every.max(1);
        let (store, recovered) = Store::open(options).await?;

        let mut state = State::new(dim);
        state.apply_all(recovered.records);
        let lexical = store.lexical();
        tracing::info!(
            dir = %config.data_dir.display(),
            replayed = recovered.replayed,
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

    pub(crate) fn read_state(&self) -> Result<RwLockReadGuard<'_, State>> {
        self.inner
            .state
            .read()
            .map_err(|_| Error::Task("state lock poisoned".into()))
    }

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
                .map(|item| self.prepare(item))
                .collect()
        } else {
            items.iter_mut().map(|item| self.prepare(item)).collect()
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
        let mut store = self.inner.store.lock().await;
        let now = self.inner.config.clock.now();
        let deciding = Instant::now();
        let decided = {
            let state = self.read_state()?;
            self.decide(&state, prepared.items, prepared.guarded, now)?
        };
        if decided.records.is_empty() {
            store.audit(&decided.audit)?;
            return Ok((decided.outcomes, beside()));
        }
        let logging = Instant::now();
        let written = store.append(decided.records).await?;
        let applying = Instant::now();
        let mut state = self.write_state()?;
        let state: &mut State = &mut state;
        let store: &mut Store = &mut store;
        // The audit log's write and fsync need none of the state: they run
        // beside the apply too.
        let ((), (audited, beside)) = rayon::join(
            || state.apply_placed(written, decided.placements),
            || rayon::join(|| store.audit(&decided.audit), beside),
        );
        audited?;
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

    /// Steps 1–3 of the write path (§3): validate, redact, screen. Returns
    /// what redaction and screening did; the item is changed in place.
    fn prepare(&self, m: &mut NewMemory) -> Result<Guarded> {
        validate::scope_name("tenant", &m.tenant)?;
        validate::scope_name("bank", &m.bank)?;
        let config = &self.inner.config;
        let mut redactions = BTreeMap::new();
        if let Some(redactor) = &config.redactor {
            let mut fields = vec![&mut m.content];
            fields.extend(m.title.as_mut());
            for field in fields {
                let redaction = redactor.redact(field);
                if redaction.is_redacted() {
                    *field = redaction.text;
                    for (kind, n) in redaction.counts {
                        *redactions.entry(kind).or_insert(0) += n;
                    }
                }
            }
            if !redactions.is_empty() {
                // A caller's vectors were computed from the unredacted text
                // and can leak it; the redacted text is embedded instead.
                m.vector = None;
                m.sentence_vectors.clear();
            }
        }
        self.validate_new(m)?;
        let quarantined = match &config.screen {
            Some(screen) => std::iter::once(m.content.as_str())
                .chain(m.title.as_deref())
                .find_map(|text| screen.screen(text)),
            None => None,
        };
        Ok(Guarded {
            redactions,
            quarantined,
            folded: validate::normalized_text(&m.content),
            content_sha256: content_sha256(&m.content),
            sentences: std::mem::take(&mut m.sentence_vectors),
        })
    }

    fn validate_new(&self, m: &mut NewMemory) -> Result<()> {
        validate::content(&m.content, self.inner.config.write.max_content_bytes)?;
        validate::confidence(m.confidence)?;
        if m.source == Source::Explicit && m.confidence < 1.0 {
            // Explicit memories are certain by definition (§2).
            m.confidence = 1.0;
        }
        if let Some(title) = &m.title {
            validate::label("title", title)?;
        }
        for element in &m.elements {
            validate::label("element", element)?;
        }
        if let Some(s) = &m.supersedes {
            validate::label("supersedes", s)?;
        }
        let dim = self.inner.dim;
        if let Some(v) = m.vector.take() {
            m.vector =
                Some(normalized(v, dim).map_err(|e| Error::invalid("vector", e.to_string()))?);
        }
        if !m.sentence_vectors.is_empty() {
            if m.vector.is_none() {
                return Err(Error::invalid(
                    "sentence_vectors",
                    "given without the content's vector",
                ));
            }
            let expected = crate::sentences::sentences(&m.content).len();
            if m.sentence_vectors.len() != expected {
                return Err(Error::invalid(
                    "sentence_vectors",
                    format!(
                        "{} given for a content that recall::sentences cuts into {expected}",
                        m.sentence_vectors.len()
                    ),
                ));
            }
            m.sentence_vectors = std::mem::take(&mut m.sentence_vectors)
                .into_iter()
                .map(|v| {
                    normalized(v, dim)
                        .map_err(|e| Error::invalid("sentence_vectors", e.to_string()))
                })
                .collect::<Result<_>>()?;
        }
        Ok(())
    }

    /// The write policy: supersession, title uniqueness, dedup and the similar band.
    fn decide(
        &self,
        state: &State,
        items: Vec<NewMemory>,
        mut guarded: Vec<Guarded>,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<Decided> {
        let write = &self.inner.config.write;
        let folded: Vec<String> = guarded
            .iter_mut()
            .map(|g| std::mem::take(&mut g.folded))
            .collect();
        // Neighbours already in the store, and near copies among the
        // batch's own items (one matrix product, on one thread), side by side.
        let ((store_near, mut placements), batch_near) = rayon::join(
            || near_in_store(state, &items, &folded, write.similar_threshold),
            || batch_neighbours(&items, &folded, write.similar_threshold, self.inner.dim),
        );
        let mut records = Vec::with_capacity(items.len());
        // Each record's placement (memory rows only), in record order.
        let mut record_placements = Vec::with_capacity(items.len());
        let mut outcomes = Vec::with_capacity(items.len());
        let mut audit = Vec::with_capacity(items.len());
        let now_ms = to_ms(now);
        // The id and title each item was stored under, by batch index.
        let mut stored: Vec<Option<(Uuid, Option<String>)>> = vec![None; items.len()];
        let mut batch_titles: HashSet<(String, String)> = HashSet::new();
        for (((index, mut item), mut near), mut guard) in
            items.into_iter().enumerate().zip(store_near).zip(guarded)
        {
            let tenant = state.tenant(&item.tenant);
            let observed = item.observed_at.unwrap_or(now);
            let superseded = match (&item.supersedes, tenant) {
                (None, _) => None,
                (Some(key), Some(t)) => {
                    let index = t.resolve(key).ok_or_else(|| Error::NotFound(key.clone()))?;
                    let old = &t.memories[index];
                    if !old.is_active() {
                        return Err(Error::Conflict {
                            id: old.id,
                            reason: "is not active and cannot be superseded".into(),
                        });
                    }
                    Some(old)
                }
                (Some(key), None) => return Err(Error::NotFound(key.clone())),
            };
            if let Some(title) = &item.title {
                if let Some(holder) =
                    tenant.and_then(|t| t.titles.get(title).map(|i| &t.memories[*i]))
                    && superseded.map(|s| s.id) != Some(holder.id)
                {
                    return Err(Error::TitleTaken {
                        title: title.clone(),
                        id: holder.id,
                    });
                }
                if !batch_titles.insert((item.tenant.clone(), title.clone())) {
                    return Err(Error::invalid(
                        "title",
                        format!("`{title}` appears twice in the batch"),
                    ));
                }
            }
            for (earlier, cos) in &batch_near[index] {
                if let Some((id, title)) = &stored[*earlier] {
                    near.push((*id, title.clone(), *cos));
                }
            }
            near.sort_by(|a, b| b.2.total_cmp(&a.2));

            // Held-back text never confirms a memory that is served.
            if superseded.is_none()
                && guard.quarantined.is_none()
                && let Some((id, _, cos)) = near.first().filter(|n| n.2 >= write.dedup_threshold)
            {
                audit.push(
                    AuditEntry::new(now_ms, &item.tenant, "remember")
                        .id(id.to_string())
                        .actor(item.agent.clone())
                        .content_sha256(guard.content_sha256)
                        .detail(Some("deduplicated into the existing memory".into())),
                );
                records.push(Record::Event(EventRow {
                    seq: 0,
                    tenant: item.tenant.clone(),
                    memory_id: id.to_string(),
                    op: op::CONFIRM.to_string(),
                    at_ms: to_ms(observed),
                    arg: None,
                }));
                record_placements.push(None);
                outcomes.push(Remembered::Deduplicated {
                    id: *id,
                    cosine: *cos,
                });
                continue;
            }
            let similar_to: Vec<Similar> = near
                .iter()
                .filter(|n| n.2 >= write.similar_threshold && n.2 < write.dedup_threshold)
                .filter(|n| superseded.map(|s| s.id) != Some(n.0))
                .take(5)
                .map(|(id, title, cos)| Similar {
                    id: *id,
                    title: title.clone(),
                    cosine: *cos,
                })
                .collect();
            let id = Uuid::now_v7();
            let elements = match superseded {
                Some(old) if item.elements.is_empty() => old.row.elements.clone(),
                _ => item.elements.clone(),
            };
            records.push(Record::Memory(MemoryRow {
                seq: 0,
                id: id.to_string(),
                tenant: item.tenant.clone(),
                bank: item.bank.clone(),
                kind: item.kind.as_str().to_string(),
                title: item.title.clone(),
                content: std::mem::take(&mut item.content),
                elements,
                source: item.source.as_str().to_string(),
                trust: if guard.quarantined.is_some() {
                    Trust::Quarantined.as_str().to_string()
                } else {
                    item.trust.as_str().to_string()
                },
                agent: item.agent.clone(),
                session_id: item.session_id.clone(),
                confidence: item.confidence,
                observed_at_ms: to_ms(observed),
                created_at_ms: to_ms(now),
                expires_at_ms: item.expires_at.map(to_ms),
                supersedes: superseded.map(|s| s.id.to_string()),
                vector: item.vector.take(),
                sentences: std::mem::take(&mut guard.sentences),
            }));
            record_placements.push(placements[index].take());
            let event = |op: &str, arg: String| {
                Record::Event(EventRow {
                    seq: 0,
                    tenant: item.tenant.clone(),
                    memory_id: id.to_string(),
                    op: op.to_string(),
                    at_ms: now_ms,
                    arg: Some(arg),
                })
            };
            if !guard.redactions.is_empty() {
                records.push(event(op::REDACTED, encode_counts(&guard.redactions)));
                record_placements.push(None);
            }
            if let Some(hit) = &guard.quarantined {
                records.push(event(
                    op::QUARANTINED,
                    format!("{}|{}", hit.rule, item.trust.as_str()),
                ));
                record_placements.push(None);
            }
            let mut detail = Vec::new();
            if !guard.redactions.is_empty() {
                detail.push(format!("redacted {}", encode_counts(&guard.redactions)));
            }
            if let Some(hit) = &guard.quarantined {
                detail.push(format!("quarantined by rule {}", hit.rule));
            }
            audit.push(
                AuditEntry::new(now_ms, &item.tenant, "remember")
                    .id(id.to_string())
                    .actor(item.agent.clone())
                    .content_sha256(guard.content_sha256)
                    .detail((!detail.is_empty()).then(|| detail.join("; "))),
            );
            if let Some(old) = superseded {
                audit.push(
                    AuditEntry::new(now_ms, &item.tenant, "supersede")
                        .id(old.id.to_string())
                        .id(id.to_string())
                        .actor(item.agent.clone()),
                );
            }
            stored[index] = Some((id, item.title));
            outcomes.push(Remembered::Stored {
                id,
                similar_to,
                redactions: guard.redactions,
                quarantined: guard.quarantined.map(|q| q.rule),
            });
        }
        Ok(Decided {
            records,
            placements: record_placements,
            outcomes,
            audit,
        })
    }

    /// Appends records durably and applies them to the in-memory state.
    pub(crate) async fn persist(&self, store: &mut Store, records: Vec<Record>) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let written = store.append(records).await?;
        self.write_state()?.apply_all(written);
        Ok(())
    }

    /// Writes one event now. `memory` is None for tenant-wide events.
    pub(crate) async fn append_event(
        &self,
        tenant: &str,
        memory: Option<Uuid>,
        op: &str,
        arg: Option<String>,
        at_ms: Option<i64>,
    ) -> Result<()> {
        self.append_audited_event(tenant, memory, op, arg, at_ms, None)
            .await
    }

    /// [`Engine::append_event`] plus an audit entry for it, written together.
    pub(crate) async fn append_audited_event(
        &self,
        tenant: &str,
        memory: Option<Uuid>,
        op: &str,
        arg: Option<String>,
        at_ms: Option<i64>,
        audit: Option<AuditEntry>,
    ) -> Result<()> {
        let at_ms = at_ms.unwrap_or_else(|| to_ms(self.inner.config.clock.now()));
        let mut store = self.inner.store.lock().await;
        let event = EventRow {
            seq: 0,
            tenant: tenant.to_string(),
            memory_id: memory.map(|id| id.to_string()).unwrap_or_default(),
            op: op.to_string(),
            at_ms,
            arg,
        };
        self.persist(&mut store, vec![Record::Event(event)]).await?;
        if let Some(entry) = audit {
            store.audit(&[entry])?;
        }
        Ok(())
    }

    /// An audit entry about one memory, now, by the configured actor.
    pub(crate) fn audit_entry(&self, tenant: &str, op: &str, ids: &[Uuid]) -> AuditEntry {
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
            .ok_or_else(|| Error::NotFound(id.to_string()))
    }

    /// Someone checked it and it still holds: `confirmations += 1`,
    /// `last_confirmed_at = now` (§6).
    pub async fn confirm(&self, tenant: &str, id: Uuid) -> Result<Memory> {
        self.lookup(tenant, id)?;
        self.append_event(tenant, Some(id), op::CONFIRM, None, None)
            .await?;
        self.lookup(tenant, id)
    }

    /// Soft delete: leaves recall, stays in `get`/`history` (§6).
    pub async fn forget(&self, tenant: &str, id: Uuid) -> Result<Memory> {
        let m = self.lookup(tenant, id)?;
        if m.forgotten {
            return Ok(m);
        }
        let audit = self.audit_entry(tenant, "forget", &[id]);
        self.append_audited_event(tenant, Some(id), op::FORGET, None, None, Some(audit))
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
        let audit = self.audit_entry(tenant, "supersede", &[old, new]);
        self.append_audited_event(
            tenant,
            Some(old),
            op::SUPERSEDED_BY,
            Some(new.to_string()),
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
            return Err(Error::NotFound(id.to_string()));
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
                    .filter(|(_, m)| m.is_active() && bank.is_none_or(|b| m.row.bank == b))
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
        let mut store = self.inner.store.lock().await;
        let events: Vec<Record> = {
            let state = self.read_state()?;
            let Some(t) = state.tenant(tenant) else {
                return Ok(());
            };
            ids.iter()
                .filter_map(|id| t.get(id))
                .filter(|m| !m.sessions_dealt.contains(session))
                .map(|m| {
                    Record::Event(EventRow {
                        seq: 0,
                        tenant: tenant.to_string(),
                        memory_id: m.id.to_string(),
                        op: op::IMPRESSION.to_string(),
                        at_ms: now,
                        arg: Some(session.to_string()),
                    })
                })
                .collect()
        };
        self.persist(&mut store, events).await
    }

    /// Counts for `recall status`.
    pub async fn status(&self) -> Result<Status> {
        let pending = self.inner.store.lock().await.pending();
        let state = self.read_state()?;
        let mut status = Status {
            embedder: self.inner.embedder.as_ref().map(|e| e.name().to_string()),
            tenants: state.tenants.len(),
            memories: 0,
            active: 0,
            without_vector: 0,
            pending_in_log: pending,
        };
        for t in state.tenants.values() {
            status.memories += t.memories.len();
            status.active += t.memories.iter().filter(|m| m.is_active()).count();
            status.without_vector += t.memories.iter().filter(|m| m.vector_row.is_none()).count();
        }
        Ok(status)
    }

    /// Writes everything in the log to the tables now (not needed for
    /// safety; the log is replayed at open).
    pub async fn flush(&self) -> Result<()> {
        self.inner.store.lock().await.flush().await?;
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
        self.inner.store.lock().await.wait_for_maintenance().await?;
        Ok(())
    }
}

/// Batches at least this long are validated, redacted and screened in parallel.
const PARALLEL_PREPARE_FROM: usize = 32;

/// What the write policy made of a batch: the records to log (and, per
/// record, the list a probe found for its vector), the caller's outcomes
/// and the audit entries.
struct Decided {
    records: Vec<Record>,
    placements: Vec<Option<Placement>>,
    outcomes: Vec<Remembered>,
    audit: Vec<AuditEntry>,
}

/// A batch past steps 1–3 of the write path (see [`Engine::prepare_many`]).
pub(crate) struct Prepared {
    items: Vec<NewMemory>,
    guarded: Vec<Guarded>,
}

impl Prepared {
    /// Whether the batch holds no items.
    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// What the write path's safety steps did to one item, and what the
/// policy needs of its final text (computed beside the safety steps, in
/// parallel for a batch, rather than under the store lock).
struct Guarded {
    redactions: BTreeMap<String, u32>,
    quarantined: Option<ScreenMatch>,
    /// The content as dedup compares it without vectors.
    folded: String,
    /// For the audit log.
    content_sha256: String,
    /// The content's sentence vectors ([`crate::sentences`]), when the
    /// engine embedded the content itself.
    sentences: Vec<Vec<f32>>,
}

/// Hex SHA-256 of stored content, for the audit log.
pub(crate) fn content_sha256(content: &str) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut hex = String::with_capacity(64);
    for byte in Sha256::digest(content.as_bytes()) {
        hex.push(char::from(DIGITS[usize::from(byte >> 4)]));
        hex.push(char::from(DIGITS[usize::from(byte & 0xf)]));
    }
    hex
}

/// The write path's search of the store: for each item, the active
/// memories of its tenant and bank closest to it, by vector, and by folded
/// text for memories without vectors.
///
/// Past a thousand rows the vector search is the sign-code scan with a
/// small exact re-scoring pool: a near copy (cosine ≥ 0.82) differs from
/// the item in far fewer sign bits than unrelated memories do, so it is
/// among the closest codes. In a partitioned tenant it visits the lists
/// nearest the item, 2 % of the rows: a near copy sits in the item's own
/// list or a neighbouring one. This keeps bulk import from being an
/// exhaustive scan per item. Only rows whose sign codes are close enough
/// to reach the similar band get a dot product. Items are searched per
/// tenant as one batch, so their distances to the partitions' centroids
/// are one matrix product and each probed list is read once for all the
/// items that probe it; each item's nearest list comes back with its
/// neighbours, so storing it costs no second pass over the centroids.
#[allow(clippy::type_complexity)]
fn near_in_store(
    state: &State,
    items: &[NewMemory],
    folded: &[String],
    min_cosine: f32,
) -> (
    Vec<Vec<(Uuid, Option<String>, f32)>>,
    Vec<Option<Placement>>,
) {
    let scan = ScanConfig {
        exact_limit: 1024,
        rescore_pool: 64,
        probe_share: 0.02,
        min_cosine: Some(min_cosine),
    };
    let mut near = vec![Vec::new(); items.len()];
    let mut placements = vec![None; items.len()];
    let mut by_tenant: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, item) in items.iter().enumerate() {
        by_tenant.entry(&item.tenant).or_default().push(i);
    }
    for (tenant, members) in by_tenant {
        let Some(t) = state.tenant(tenant) else {
            continue;
        };
        // (batch index, bank) of the members whose bank the tenant has.
        let scoped: Vec<(usize, u32)> = members
            .iter()
            .filter_map(|i| t.bank_id(&items[*i].bank).map(|bank| (*i, bank)))
            .collect();
        let same_scope = |i: usize, bank: u32| {
            let meta = &t.meta[i];
            meta.bank_id == bank && meta.active
        };
        let with_vector: Vec<(usize, u32, &[f32])> = scoped
            .iter()
            .filter_map(|(i, bank)| items[*i].vector.as_deref().map(|v| (*i, *bank, v)))
            .collect();
        let queries: Vec<&[f32]> = with_vector.iter().map(|(_, _, v)| *v).collect();
        let found = t
            .vectors
            .nearest_many_placed(&queries, 6, scan, |q, owner| {
                same_scope(owner, with_vector[q].1)
            });
        for ((i, _, _), (hits, placement)) in with_vector.iter().zip(found) {
            placements[*i] = placement;
            near[*i] = hits
                .into_iter()
                .map(|(m, cos)| (t.memories[m].id, t.memories[m].row.title.clone(), cos))
                .collect();
        }
        for (i, bank) in scoped {
            let vectorless = items[i].vector.is_none();
            if !vectorless && t.without_vector == 0 {
                continue;
            }
            near[i].extend(
                t.memories
                    .iter()
                    .enumerate()
                    .filter(|(m, memory)| {
                        (vectorless || memory.vector_row.is_none())
                            && same_scope(*m, bank)
                            && memory.folded == folded[i]
                    })
                    .map(|(_, memory)| (memory.id, memory.row.title.clone(), 1.0)),
            );
        }
    }
    (near, placements)
}

/// For each item, the earlier items of the batch in the same tenant and
/// bank that may be near copies: cosine ≥ `threshold` when both have
/// vectors (pairs ruled out by their sign codes first, see
/// [`recall_indexer::near_pairs`]), identical folded text when either has
/// none.
fn batch_neighbours(
    items: &[NewMemory],
    folded: &[String],
    threshold: f32,
    dim: usize,
) -> Vec<Vec<(usize, f32)>> {
    let mut near = vec![Vec::new(); items.len()];
    let mut scopes: HashMap<(&str, &str), Vec<usize>> = HashMap::new();
    for (i, m) in items.iter().enumerate() {
        scopes.entry((&m.tenant, &m.bank)).or_default().push(i);
    }
    for members in scopes.values().filter(|m| m.len() > 1) {
        let embedded: Vec<(usize, &[f32])> = members
            .iter()
            .filter_map(|i| items[*i].vector.as_deref().map(|v| (*i, v)))
            .filter(|(_, v)| v.len() == dim)
            .collect();
        let vectors: Vec<&[f32]> = embedded.iter().map(|(_, v)| *v).collect();
        for (r, pairs) in near_pairs(&vectors, threshold).into_iter().enumerate() {
            near[embedded[r].0].extend(pairs.into_iter().map(|(c, cos)| (embedded[c].0, cos)));
        }
        if embedded.len() < members.len() {
            for (pos, &i) in members.iter().enumerate() {
                for &j in &members[..pos] {
                    let vectorless = items[i].vector.is_none() || items[j].vector.is_none();
                    if vectorless && folded[i] == folded[j] {
                        near[i].push((j, 1.0));
                    }
                }
            }
        }
    }
    near
}
