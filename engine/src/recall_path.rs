//! The recall path's shell (§4): the builder, its checks, who may read
//! what (`eligible`), and the two candidate stages; the ranking itself is
//! the pure [`crate::rank`].

use chrono::{DateTime, Utc};
use recall_indexer::normalized;
use uuid::Uuid;

use crate::background;
use crate::config::{Bm25Normalization, ScoringConfig};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::memory::Kind;
use crate::names::{asks_for_advice, named_words};
use crate::policy::ReadPolicy;
use crate::rank::{Found, Query, RecallResult, rank};
use crate::score::faded;
use crate::state::{TenantState, to_ms};
use crate::validate;

/// A recall, configured with setters and run by [`RecallBuilder::execute`].
///
/// ```
/// # use recall::{Config, Engine, Kind, ModelSource, NewMemory, Trust};
/// # tokio::runtime::Runtime::new()?.block_on(async {
/// # let dir = tempfile::tempdir()?;
/// # let engine = Engine::open(Config::new(dir.path()).model(ModelSource::None)).await?;
/// engine.remember(NewMemory::new("acme", "org", Kind::Convention, "Migrations are reviewed by two people").trust(Trust::User)).await?;
/// let result = engine
///     .recall("acme", "who reviews migrations")
///     .read(["org", "user:alice"])
///     .limit(5)
///     .execute()
///     .await?;
/// assert_eq!(result.hits.len(), 1);
/// assert!(result.hits[0].breakdown.explain().contains("kind 2.00"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "a recall does nothing until execute() is awaited"]
pub struct RecallBuilder {
    engine: Engine,
    tenant: String,
    query: String,
    banks: Vec<String>,
    k: usize,
    session: Option<String>,
    kinds: Option<Vec<Kind>>,
    elements: Option<Vec<String>>,
    observed_from: Option<DateTime<Utc>>,
    observed_until: Option<DateTime<Utc>>,
    now: Option<DateTime<Utc>>,
    include_quarantined: bool,
    query_vector: Option<Vec<f32>>,
    scoring: Option<ScoringConfig>,
}

impl RecallBuilder {
    pub(crate) fn new(engine: Engine, tenant: String, query: String) -> RecallBuilder {
        RecallBuilder {
            engine,
            tenant,
            query,
            banks: Vec::new(),
            k: 10,
            session: None,
            kinds: None,
            elements: None,
            observed_from: None,
            observed_until: None,
            now: None,
            include_quarantined: false,
            query_vector: None,
            scoring: None,
        }
    }

    /// Banks the caller may read. Required: nothing is readable by default.
    pub fn read<I, S>(mut self, banks: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.banks.extend(banks.into_iter().map(Into::into));
        self
    }

    /// Reads through a [`ReadPolicy`]: its banks become readable and its
    /// session (if any) is set as with [`RecallBuilder::session`].
    pub fn policy(mut self, policy: &ReadPolicy) -> Self {
        self.banks.extend(policy.bank_names().iter().cloned());
        if let Some(session) = policy.session_id() {
            self.session = Some(session.to_string());
        }
        self
    }

    /// How many hits at most. Default 10.
    pub fn limit(mut self, k: usize) -> Self {
        self.k = k;
        self
    }

    /// Records an impression for each hit in this session (once per memory per session).
    pub fn session(mut self, session: impl Into<String>) -> Self {
        self.session = Some(session.into());
        self
    }

    /// Only these kinds. Default: all.
    pub fn kinds(mut self, kinds: impl IntoIterator<Item = Kind>) -> Self {
        self.kinds = Some(kinds.into_iter().collect());
        self
    }

    /// Only memories about at least one of these elements. Default: all.
    pub fn elements<I, S>(mut self, elements: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.elements = Some(elements.into_iter().map(Into::into).collect());
        self
    }

    /// Only memories observed in `[from, until)`. Default: any time.
    pub fn observed_between(mut self, from: DateTime<Utc>, until: DateTime<Utc>) -> Self {
        self.observed_from = Some(from);
        self.observed_until = Some(until);
        self
    }

    /// Scores as of this instant (evaluation replays). Default: the engine's clock.
    pub fn now(mut self, now: DateTime<Utc>) -> Self {
        self.now = Some(now);
        self
    }

    /// Scores this one recall with these tunables instead of the engine's
    /// (research: a sweep re-ranks the same data under many settings
    /// without reopening the engine). Default: the engine's [`ScoringConfig`].
    pub fn scoring(mut self, scoring: ScoringConfig) -> Self {
        self.scoring = Some(scoring);
        self
    }

    /// The tunables this recall scores with.
    fn scoring_config(&self) -> &ScoringConfig {
        self.scoring
            .as_ref()
            .unwrap_or(&self.engine.config().scoring)
    }

    /// Also serve quarantined memories (for review). Default false.
    pub fn include_quarantined(mut self, yes: bool) -> Self {
        self.include_quarantined = yes;
        self
    }

    /// Uses this embedding of the query instead of embedding the text
    /// (benchmarks, callers with their own embedding pipeline). It must have
    /// the engine's width; it is normalized. The text still drives BM25.
    pub fn query_vector(mut self, vector: Vec<f32>) -> Self {
        self.query_vector = Some(vector);
        self
    }

    /// Runs the recall.
    pub async fn execute(mut self) -> Result<RecallResult> {
        validate::scope_name("tenant", &self.tenant)?;
        if self.banks.is_empty() {
            return Err(Error::invalid("read", "name at least one readable bank"));
        }
        for bank in &self.banks {
            validate::scope_name("bank", bank)?;
        }
        if self.query.trim().is_empty() {
            return Err(Error::invalid("query", "must not be empty"));
        }
        if let Some(session) = &self.session {
            validate::scope_name("session", session)?;
        }
        let engine = self.engine.clone();
        let query_vector = match self.query_vector.take() {
            Some(v) if engine.embedder().is_some() => Some(normalized(v, engine.dim()).map_err(
                |e| Error::InvalidInput {
                    field: "query_vector",
                    reason: e.to_string(),
                },
            )?),
            Some(_) => {
                return Err(Error::invalid(
                    "query_vector",
                    "the engine has no embedder, so it holds no vectors to compare with",
                ));
            }
            None => engine
                .embed(vec![self.query.clone()])
                .await?
                .and_then(|mut v| v.pop()),
        };
        let session = self.session.clone();
        let tenant = self.tenant.clone();
        let ranked = tokio::task::spawn_blocking(move || self.rank(query_vector.as_deref()))
            .await
            .map_err(|e| Error::Task(e.to_string()))??;
        if let Some(session) = session {
            let ids: Vec<Uuid> = ranked.hits.iter().map(|h| h.memory.id).collect();
            engine.record_impressions(&tenant, &session, &ids).await?;
        }
        Ok(ranked)
    }

    /// Whether this caller may be served the memory now (§4.6, §7): active,
    /// in a readable bank (`banks[id]` is set for the interned ids of the readable
    /// banks, a `session:<id>` bank only with that session and not after the
    /// session ended), unexpired, not quarantined unless asked, inside the
    /// filters, confident enough. Runs once per row in the vector scan, so
    /// the cheap tests come first.
    fn eligible(&self, banks: &[bool], tenant: &TenantState, i: usize, now_ms: i64) -> bool {
        let meta = &tenant.meta[i];
        if !(banks.get(meta.bank_id as usize).copied().unwrap_or(false)
            && meta.active
            && meta.expires_at_ms > now_ms
            && (self.include_quarantined || !meta.quarantined))
        {
            return false;
        }
        let filtered = self.kinds.is_some()
            || self.elements.is_some()
            || self.observed_from.is_some()
            || self.observed_until.is_some();
        if !filtered && !meta.inferred {
            return true;
        }
        let m = &tenant.memories[i];
        let config = self.scoring_config();
        self.kinds.as_ref().is_none_or(|k| k.contains(&m.kind))
            && self.elements.as_ref().is_none_or(|els| {
                m.row
                    .elements
                    .iter()
                    .any(|e| els.iter().any(|x| x.as_str() == &**e))
            })
            && self
                .observed_from
                .is_none_or(|f| m.row.observed_at_ms >= to_ms(f))
            && self
                .observed_until
                .is_none_or(|u| m.row.observed_at_ms < to_ms(u))
            && !faded(
                config,
                m.row.confidence,
                meta.inferred,
                now_ms - m.last_confirmed_ms,
            )
    }

    /// The named banks this caller may read: a `session:<id>` bank only
    /// with that session. Both candidate stages search only these.
    fn readable_names(&self) -> Vec<&str> {
        self.banks
            .iter()
            .filter(|bank| {
                bank.strip_prefix("session:")
                    .is_none_or(|s| self.session.as_deref() == Some(s))
            })
            .map(String::as_str)
            .collect()
    }

    /// Which of `tenant`'s banks this caller may read now (a session's bank
    /// not after the session ended), indexed by interned bank id: the
    /// vector scan asks once per row.
    fn readable_banks(&self, tenant: &TenantState) -> Vec<bool> {
        let mut readable = vec![false; tenant.bank_ids.len()];
        for id in self
            .readable_names()
            .into_iter()
            .filter(|bank| {
                bank.strip_prefix("session:")
                    .is_none_or(|s| !tenant.ended_sessions.contains_key(s))
            })
            .filter_map(|bank| tenant.bank_id(bank))
        {
            if let Some(slot) = readable.get_mut(id as usize) {
                *slot = true;
            }
        }
        readable
    }

    /// The shell of a recall: takes the state lock, gathers the
    /// candidates of both stages (BM25 from the lexical index, the vector
    /// scan over the tenant's in-memory vectors) and hands them to the pure
    /// [`rank`](crate::rank::rank).
    fn rank(&self, query_vector: Option<&[f32]>) -> Result<RecallResult> {
        let config = self.scoring_config();
        let now = self.now.unwrap_or_else(|| self.engine.config().clock.now());
        let query = Query {
            vector: query_vector,
            k: self.k,
            now_ms: to_ms(now),
            has_embedder: self.engine.embedder().is_some(),
        };
        let banks = self.readable_names();
        let pool = query.pool(config);
        let state = self.engine.read_state()?;
        let Some(tenant) = state.tenant(&self.tenant) else {
            return Ok(RecallResult {
                hits: Vec::new(),
                abstained: true,
                candidates: 0,
                background: None,
                unknown_names: Vec::new(),
            });
        };
        let readable = self.readable_banks(tenant);
        let eligible = |i: usize| self.eligible(&readable, tenant, i, query.now_ms);

        // The two candidate stages run side by side.
        let (lexical, nearest) = rayon::join(
            || -> Result<_> {
                let lexical = self.engine.lexical();
                let fetch = (pool as f32 * config.lexical_overfetch) as usize;
                let hits = lexical.search(&self.tenant, &banks, &self.query, fetch)?;
                let attainable = if matches!(config.bm25, Bm25Normalization::Attainable) {
                    lexical.attainable(&self.tenant, &self.query)?
                } else {
                    0.0
                };
                // After the search, which committed what was pending; no
                // lookups when the rule that reads them is off.
                let named = if config.unknown_names {
                    named_words(&self.query)
                } else {
                    Vec::new()
                };
                let mut unknown = Vec::new();
                for word in &named {
                    if !lexical.mentions(&self.tenant, &banks, word)? {
                        unknown.push((*word).to_string());
                    }
                }
                Ok((hits, attainable, named.len(), unknown))
            },
            || {
                // The memories nearest by their whole vector, and those with
                // the nearest sentences (a memory's sentences may take
                // several of these slots; the pool is filled from both).
                query_vector
                    .map(|q| {
                        (
                            tenant.vectors.nearest(q, pool, config.scan, eligible),
                            tenant.sentences.nearest(q, pool, config.scan, eligible),
                            background::sample(tenant.memories.len(), eligible, |i| {
                                tenant.cosine(i, q)
                            }),
                        )
                    })
                    .unwrap_or_default()
            },
        );
        let (lexical, attainable, named, unknown_names) = lexical?;
        let (nearest, nearest_sentences, background) = nearest;
        let found = Found {
            lexical,
            attainable,
            nearest,
            nearest_sentences,
            background,
            named,
            unknown_names,
            asks_for_advice: asks_for_advice(&self.query),
        };
        if matches!(config.bm25, Bm25Normalization::MaxOfQuery) {
            tracing::debug!("max-of-query BM25 normalization: abstention is unreliable");
        }
        Ok(rank(tenant, &query, config, found, eligible))
    }
}
