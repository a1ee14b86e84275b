//! What keeps recall right over months (§5, §6, §3.4): session feedback,
//! drift, promotion out of session banks, and the embedding backfill.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use recall_indexer::{Record, VectorRow};
use serde::Serialize;
use uuid::Uuid;

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::event::Event;
use crate::memory::{Kind, Memory, NewMemory, Remembered};
use crate::state::{State, to_ms};
use crate::validate;

/// Ends a session: citations, an optional outcome, session-bank expiry. Built
/// by [`Engine::end_session`].
///
/// ```
/// # use recall::{Config, Engine, Kind, ModelSource, NewMemory, Trust};
/// # tokio::runtime::Runtime::new()?.block_on(async {
/// # let dir = tempfile::tempdir()?;
/// # let engine = Engine::open(Config::new(dir.path()).model(ModelSource::None)).await?;
/// let id = engine.remember(NewMemory::new("acme", "org", Kind::Pitfall, "Cache keys must include the locale").trust(Trust::User)).await?.id();
/// engine.recall("acme", "cache keys locale").read(["org"]).session("s1").execute().await?;
/// let ended = engine.end_session("acme", "s1").used([id]).outcome("Fixed the cache key bug").element("Cache").execute().await?;
/// assert_eq!(ended.cited, vec![id]);
/// assert_eq!(engine.get("acme", id).await?.citations, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "nothing happens until execute() is awaited"]
pub struct EndSession {
    engine: Engine,
    tenant: String,
    session: String,
    used: Vec<Uuid>,
    outcome: Option<String>,
    elements: Vec<String>,
    bank: String,
}

/// What ending a session did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionEnded {
    /// Memories that gained a citation (dealt in the session, said to be used).
    pub cited: Vec<Uuid>,
    /// Memories named as used that the session was never dealt: unchanged.
    pub not_dealt: Vec<Uuid>,
    /// The outcome memory, when an outcome text was given.
    pub outcome: Option<Remembered>,
}

/// What [`Engine::mark_used`] did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Cited {
    /// Memories that now hold this session's citation (dealt in it, said to be used).
    pub cited: Vec<Uuid>,
    /// Memories named as used that the session was never dealt: unchanged.
    pub not_dealt: Vec<Uuid>,
}

/// The citation events `used` earns in `session` (§5): one per memory that
/// was dealt in the session and not yet cited by it, so citing twice, or
/// citing and then ending the session with the same ids, counts once.
fn citations(
    state: &State,
    tenant: &str,
    session: &str,
    used: &[Uuid],
    now: i64,
) -> (Vec<Record>, Cited) {
    let (mut records, mut out) = (Vec::new(), Cited::default());
    let Some(t) = state.tenant(tenant) else {
        return (records, out);
    };
    let mut seen = HashSet::new();
    for id in used.iter().filter(|id| seen.insert(**id)) {
        let Some(m) = t.get(id) else { continue };
        if !m.usage.dealt_to(session) {
            out.not_dealt.push(*id);
            continue;
        }
        out.cited.push(*id);
        if !m.usage.cited_by(session) {
            let event = Event::Citation {
                session: session.to_string(),
            };
            records.push(event.record(tenant, Some(*id), now));
        }
    }
    (records, out)
}

impl EndSession {
    /// Memories the session says it used. Only those it was dealt get a citation.
    pub fn used(mut self, ids: impl IntoIterator<Item = Uuid>) -> Self {
        self.used.extend(ids);
        self
    }

    /// What the session achieved: stored as ONE `session_outcome` memory.
    pub fn outcome(mut self, text: impl Into<String>) -> Self {
        self.outcome = Some(text.into());
        self
    }

    /// An element the session worked on (the outcome is attached to all of them).
    pub fn element(mut self, element: impl Into<String>) -> Self {
        self.elements.push(element.into());
        self
    }

    /// Bank of the outcome memory. Default `org`.
    pub fn bank(mut self, bank: impl Into<String>) -> Self {
        self.bank = bank.into();
        self
    }

    /// Records it all durably.
    pub async fn execute(self) -> Result<SessionEnded> {
        validate::scope_name("tenant", &self.tenant)?;
        validate::scope_name("session", &self.session)?;
        {
            let state = self.engine.read_state()?;
            let tenant = state.tenant(&self.tenant);
            for id in &self.used {
                if tenant.and_then(|t| t.get(id)).is_none() {
                    return Err(Error::not_found(&self.tenant, id));
                }
            }
        }
        let outcome = match self.outcome {
            Some(text) => {
                let mut memory =
                    NewMemory::new(&self.tenant, &self.bank, Kind::SessionOutcome, text);
                memory.elements = self.elements.clone();
                memory.session_id = Some(self.session.clone());
                Some(self.engine.remember(memory).await?)
            }
            None => None,
        };
        let now = to_ms(self.engine.config().clock.now());
        let mut store = self.engine.lock_store().await;
        let (mut records, used) = {
            let state = self.engine.read_state()?;
            citations(&state, &self.tenant, &self.session, &self.used, now)
        };
        let ended = Event::SessionEnd {
            session: self.session.clone(),
        };
        records.push(ended.record(&self.tenant, None, now));
        self.engine.persist(&mut store, records).await?;
        let Cited { cited, not_dealt } = used;
        Ok(SessionEnded {
            cited,
            not_dealt,
            outcome,
        })
    }
}

/// A memory's stored embedding and its sentences' embeddings.
pub(crate) type StoredVectors = (Option<Vec<f32>>, Vec<Vec<f32>>);
impl Engine {
    /// Ends `session` in `tenant` (§5): see [`EndSession`].
    pub fn end_session(&self, tenant: impl Into<String>, session: impl Into<String>) -> EndSession {
        EndSession {
            engine: self.clone(),
            tenant: tenant.into(),
            session: session.into(),
            used: Vec::new(),
            outcome: None,
            elements: Vec::new(),
            bank: "org".to_string(),
        }
    }

    /// Records now that `session` relied on `used` (§5 citations), without
    /// ending the session: what an agent calls as soon as it has used a
    /// recalled memory, so the citation is durable even if the session is
    /// never ended. Only memories dealt in the session are cited, once per
    /// session however often they are named (ending the session later with
    /// the same ids adds nothing). An id unknown to the tenant is an error
    /// and nothing is recorded.
    ///
    /// ```
    /// # use recall::{Config, Engine, Kind, ModelSource, NewMemory, Trust};
    /// # tokio::runtime::Runtime::new()?.block_on(async {
    /// # let dir = tempfile::tempdir()?;
    /// # let engine = Engine::open(Config::new(dir.path()).model(ModelSource::None)).await?;
    /// let id = engine.remember(NewMemory::new("acme", "org", Kind::Fact, "Deploys freeze on Fridays").trust(Trust::User)).await?.id();
    /// engine.recall("acme", "deploys fridays").read(["org"]).session("s1").execute().await?;
    /// let cited = engine.mark_used("acme", "s1", &[id]).await?;
    /// assert_eq!(cited.cited, vec![id]);
    /// engine.mark_used("acme", "s1", &[id]).await?;
    /// engine.end_session("acme", "s1").used([id]).execute().await?;
    /// assert_eq!(engine.get("acme", id).await?.citations, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn mark_used(&self, tenant: &str, session: &str, used: &[Uuid]) -> Result<Cited> {
        validate::scope_name("tenant", tenant)?;
        validate::scope_name("session", session)?;
        {
            let state = self.read_state()?;
            let t = state.tenant(tenant);
            if let Some(id) = used.iter().find(|id| t.and_then(|t| t.get(id)).is_none()) {
                return Err(Error::not_found(tenant, id));
            }
        }
        let now = to_ms(self.config().clock.now());
        let mut store = self.lock_store().await;
        let (records, cited) = {
            let state = self.read_state()?;
            citations(&state, tenant, session, used, now)
        };
        self.persist(&mut store, records).await?;
        Ok(cited)
    }

    /// The code behind `element` changed at `at` (default now): every memory
    /// about it last confirmed before then is demoted ×0.6 and flagged VERIFY
    /// until confirmed (§6). Returns the memories now flagged. Drift never hides.
    ///
    /// ```
    /// # use recall::{Config, Engine, Kind, ModelSource, NewMemory, Trust};
    /// # tokio::runtime::Runtime::new()?.block_on(async {
    /// # let dir = tempfile::tempdir()?;
    /// # let engine = Engine::open(Config::new(dir.path()).model(ModelSource::None)).await?;
    /// let id = engine.remember(NewMemory::new("acme", "org", Kind::Fact, "Auth tokens live 1 hour").trust(Trust::User).element("AuthService")).await?.id();
    /// let changed_at = chrono::Utc::now() + chrono::Duration::seconds(1);
    /// let flagged = engine.mark_drift("acme", "AuthService", Some(changed_at)).await?;
    /// assert_eq!(flagged, vec![id]);
    /// assert!(engine.get("acme", id).await?.verify);
    /// engine.confirm("acme", id).await?;
    /// assert!(!engine.get("acme", id).await?.verify);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn mark_drift(
        &self,
        tenant: &str,
        element: &str,
        at: Option<DateTime<Utc>>,
    ) -> Result<Vec<Uuid>> {
        validate::scope_name("tenant", tenant)?;
        validate::label("element", element)?;
        let at_ms = to_ms(at.unwrap_or_else(|| self.config().clock.now()));
        self.append_event(
            tenant,
            None,
            Event::Drift {
                element: element.to_string(),
            },
            Some(at_ms),
        )
        .await?;
        let state = self.read_state()?;
        Ok(state
            .tenant(tenant)
            .map(|t| {
                t.memories
                    .iter()
                    .filter(|m| m.is_active() && m.row.elements.iter().any(|e| **e == *element))
                    .filter(|m| t.drifted(m))
                    .map(|m| m.id)
                    .collect()
            })
            .unwrap_or_default())
    }

    /// Memory `id`'s stored embedding and its sentences' ([`StoredVectors`]; none without a
    /// vector), for a copy of its text that is to be found exactly as it
    /// is (a promotion, a consolidation's fact).
    pub(crate) fn stored_vectors(&self, tenant: &str, id: Uuid) -> Result<StoredVectors> {
        let state = self.read_state()?;
        Ok(state
            .tenant(tenant)
            .and_then(|t| {
                let m = t.get(&id)?;
                let vector = t.vectors.row(m.vector_row()?)?.to_vec();
                let mut sentences: Vec<Vec<f32>> = m
                    .sentence_rows()
                    .filter_map(|row| t.sentences.row(row).map(<[f32]>::to_vec))
                    .collect();
                // Written under other sentence rules (an older version):
                // the copy is scored by its whole vector, as it was.
                if sentences.len() != crate::sentences::sentences(&m.row.content).len() {
                    sentences.clear();
                }
                Some((Some(vector), sentences))
            })
            .unwrap_or_default())
    }

    /// Moves a memory out of its bank (typically a `session:<id>` bank, which
    /// expires with the session) into `bank`: a copy is written there and
    /// supersedes the original, so history keeps the chain. Returns the copy.
    pub async fn promote(&self, tenant: &str, id: Uuid, bank: &str) -> Result<Memory> {
        validate::scope_name("bank", bank)?;
        let original = self.lookup(tenant, id)?;
        if !original.is_active() {
            return Err(Error::Conflict {
                id,
                reason: "is not active and cannot be promoted".into(),
            });
        }
        // The copy keeps the original's embeddings, its sentences' too, so
        // it is found exactly as the original was.
        let (vector, sentence_vectors) = self.stored_vectors(tenant, id)?;
        let copy = NewMemory {
            tenant: tenant.to_string(),
            bank: bank.to_string(),
            kind: original.kind,
            content: original.content.clone(),
            title: original.title.clone(),
            elements: original.elements.clone(),
            source: original.source,
            trust: original.trust,
            confidence: original.confidence,
            agent: original.agent.clone(),
            session_id: original.session_id.clone(),
            observed_at: Some(original.observed_at),
            expires_at: original.expires_at,
            supersedes: Some(id.to_string()),
            vector,
            sentence_vectors,
            derived_from: original.derived_from.clone(),
        };
        let new_id = self.remember(copy).await?.id();
        self.lookup(tenant, new_id)
    }

    /// Gives every memory stored without a vector (written while no model
    /// was configured) its embedding, in batches; returns how many. Runs in
    /// the background after [`Engine::open`] when there is work; awaiting it
    /// waits for that work. Without an embedder it does nothing.
    pub async fn backfill(&self) -> Result<usize> {
        const BATCH: usize = 64;
        if self.embedder().is_none() {
            return Ok(0);
        }
        let _running = self.lock_backfill().await;
        let mut attempted: HashSet<Uuid> = HashSet::new();
        let mut done = 0;
        loop {
            let batch: Vec<(String, Uuid, String)> = {
                let state = self.read_state()?;
                state
                    .tenants
                    .iter()
                    .flat_map(|(name, t)| {
                        t.memories
                            .iter()
                            .filter(|m| m.vector_row().is_none())
                            .map(move |m| (name.clone(), m.id, m.row.content.to_string()))
                    })
                    .filter(|(_, id, _)| !attempted.contains(id))
                    .take(BATCH)
                    .collect()
            };
            if batch.is_empty() {
                break;
            }
            // Each content, then every content's sentences, as a write embeds them.
            let mut texts: Vec<String> = batch.iter().map(|(_, _, text)| text.clone()).collect();
            let counts: Vec<usize> = batch
                .iter()
                .map(|(_, _, text)| {
                    let parts = crate::sentences::sentences(text);
                    let n = parts.len();
                    texts.extend(parts);
                    n
                })
                .collect();
            let Some(mut vectors) = self.embed(texts).await? else {
                break;
            };
            let mut sentences = vectors.split_off(batch.len()).into_iter();
            let records = batch
                .iter()
                .zip(vectors)
                .zip(counts)
                .map(|(((tenant, id, _), vector), n)| {
                    attempted.insert(*id);
                    Record::Vector(VectorRow {
                        seq: 0,
                        tenant: tenant.clone(),
                        memory_id: id.to_string(),
                        vector,
                        sentences: sentences.by_ref().take(n).collect(),
                    })
                })
                .collect::<Vec<_>>();
            done += records.len();
            let mut store = self.lock_store().await;
            self.persist(&mut store, records).await?;
        }
        if done > 0 {
            tracing::info!(memories = done, "embedding backfill done");
        }
        Ok(done)
    }
}
