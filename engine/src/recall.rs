//! The recall path (§4): scope, candidates, relevance, abstention, score.

use std::cell::{OnceCell, RefCell};
use std::collections::HashMap;

use chrono::{DateTime, Utc};
use recall_indexer::{dot, normalized};
use serde::Serialize;
use uuid::Uuid;

use crate::config::{Bm25Normalization, ScoringConfig};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::memory::{Kind, Memory, Source};
use crate::policy::ReadPolicy;
use crate::score::{
    Breakdown, decay_multiplier, drift_multiplier, effective_confidence, is_evidence,
    lexical_share, normalize_bm25, relevance, usage_multiplier,
};
use crate::sentences::asks_only;
use crate::state::{TenantState, to_ms};
use crate::updates::{Cutoffs, Versions};
use crate::validate;

/// One recalled memory and why it ranked there.
#[derive(Debug, Clone, Serialize)]
pub struct Hit {
    /// The memory.
    pub memory: Memory,
    /// The final score (also `breakdown.score`).
    pub score: f32,
    /// Every factor of the score (for a linked neighbour: its parent's).
    pub breakdown: Breakdown,
    /// Set when the memory came in as a `[[link]]` of a top hit: the parent's
    /// title (or id). Its score is half the parent's (§4.7).
    pub via: Option<String>,
}

/// The answer to a recall.
#[derive(Debug, Clone, Serialize)]
pub struct RecallResult {
    /// Best first, at most `k`.
    pub hits: Vec<Hit>,
    /// True when no candidate was evidence of an answer (no part of one
    /// that states something reached `min_evidence_cosine`, no part that
    /// asks `question_evidence`, and none matched `min_evidence_lexical` of
    /// the query's words; or none existed): the result is then empty
    /// ([`crate::is_evidence`]).
    pub abstained: bool,
    /// Candidates considered (union of the vector and BM25 stages, in scope).
    pub candidates: usize,
}

/// A recall, configured with setters and run by [`RecallBuilder::execute`].
///
/// ```
/// # use recall::{Config, Engine, Kind, ModelSource, NewMemory};
/// # tokio::runtime::Runtime::new()?.block_on(async {
/// # let dir = tempfile::tempdir()?;
/// # let engine = Engine::open(Config::new(dir.path()).model(ModelSource::None)).await?;
/// engine.remember(NewMemory::new("acme", "org", Kind::Convention, "Migrations are reviewed by two people")).await?;
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
            .unwrap_or(&self.engine.inner.config.scoring)
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
            Some(v) if engine.embedder().is_some() => Some(
                normalized(v, engine.inner.dim).map_err(|e| Error::InvalidInput {
                    field: "query_vector",
                    reason: e.to_string(),
                })?,
            ),
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
            && self
                .elements
                .as_ref()
                .is_none_or(|els| m.row.elements.iter().any(|e| els.contains(e)))
            && self
                .observed_from
                .is_none_or(|f| m.row.observed_at_ms >= to_ms(f))
            && self
                .observed_until
                .is_none_or(|u| m.row.observed_at_ms < to_ms(u))
            && (!meta.inferred
                || effective_confidence(
                    config,
                    m.row.confidence,
                    true,
                    now_ms - m.last_confirmed_ms,
                ) >= config.min_confidence)
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

    fn rank(&self, query_vector: Option<&[f32]>) -> Result<RecallResult> {
        let inner = &self.engine.inner;
        let config = self.scoring_config();
        let now = self.now.unwrap_or_else(|| inner.config.clock.now());
        let now_ms = to_ms(now);
        let banks = self.readable_names();
        let pool = config.candidate_pool.max(self.k);
        let state = self.engine.read_state()?;
        let Some(tenant) = state.tenant(&self.tenant) else {
            return Ok(RecallResult {
                hits: Vec::new(),
                abstained: true,
                candidates: 0,
            });
        };
        let readable = self.readable_banks(tenant);
        let eligible = |i: usize| self.eligible(&readable, tenant, i, now_ms);

        // The two candidate stages run side by side.
        let (lexical, nearest) = rayon::join(
            || -> Result<_> {
                // Forgotten and superseded memories stay in the BM25 index,
                // so ask for a quarter more than the pool and keep the eligible ones.
                let hits =
                    inner
                        .lexical
                        .search(&self.tenant, &banks, &self.query, pool + pool / 4)?;
                let attainable = if matches!(config.bm25, Bm25Normalization::Attainable) {
                    inner.lexical.attainable(&self.tenant, &self.query)?
                } else {
                    0.0
                };
                Ok((hits, attainable))
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
                        )
                    })
                    .unwrap_or_default()
            },
        );
        let (lexical, attainable) = lexical?;
        let (nearest, nearest_sentences) = nearest;

        // index → (cosine of the whole vector, raw bm25); the sentences'
        // cosines are taken below, for every candidate alike.
        let mut candidates: HashMap<usize, (Option<f32>, Option<f32>)> = nearest
            .into_iter()
            .map(|(i, cos)| (i, (Some(cos), None)))
            .collect();
        for (i, _) in nearest_sentences {
            candidates.entry(i).or_insert((None, None));
        }
        let mut taken = 0;
        for hit in lexical {
            let Some(&i) = tenant.by_seq.get(&hit.seq) else {
                continue;
            };
            if taken == pool || !eligible(i) {
                continue;
            }
            taken += 1;
            candidates.entry(i).or_insert((None, None)).1 = Some(hit.score);
        }
        // Every candidate's vector half is its true cosine (a lexical-only
        // one's too, not 0): the whole vector's, or its closest sentence's
        // when that is closer.
        let mut sentence_cosines: HashMap<usize, f32> = HashMap::new();
        if let Some(q) = query_vector {
            for (i, (cos, _)) in candidates.iter_mut() {
                if cos.is_none()
                    && let Some(row) = tenant.memories[*i].vector_row
                {
                    *cos = tenant.vectors.row(row).map(|v| dot(v, q));
                }
                if let Some(sentence) = tenant.sentence_cosine(*i, q) {
                    sentence_cosines.insert(*i, sentence);
                    *cos = Some(cos.map_or(sentence, |c| c.max(sentence)));
                }
            }
        }
        let (min_s, max_s) = candidates
            .values()
            .filter_map(|(_, s)| *s)
            .fold((f32::MAX, 0f32), |(lo, hi), s| (lo.min(s), hi.max(s)));
        let has_embedder = inner.embedder.is_some();
        let total = candidates.len();
        // Whether some candidate is evidence the query can be answered (the
        // abstention gate), judged before the hit floors drop anything.
        let mut evidence = false;
        // Scored first, viewed after the cut: building a memory's public view
        // copies its text, worth doing only for the hits returned.
        let mut scored: Vec<(usize, Breakdown)> = candidates
            .into_iter()
            .filter_map(|(i, (cosine, bm25))| {
                let m = &tenant.memories[i];
                let b = bm25.map_or(0.0, |s| {
                    normalize_bm25(config.bm25, s, min_s, max_s, attainable)
                });
                // Whether it only asks, found out once and only if asked.
                let asks = OnceCell::new();
                let asks = || *asks.get_or_init(|| asks_only(&m.row.content));
                let rel = relevance(config, cosine, b, has_embedder, asks);
                let parts = || {
                    query_vector
                        .map(|q| tenant.part_cosines(i, q, asks()))
                        .unwrap_or_default()
                };
                evidence = evidence || is_evidence(config, cosine, b, asks, parts);
                // The thresholds are calibrated for the hybrid score. BM25
                // alone depends on corpus size (IDF), so without an embedder
                // any lexical match passes both.
                let passes = if has_embedder {
                    rel >= config.min_hit_relevance
                } else {
                    bm25.is_some_and(|s| s > 0.0)
                };
                if !passes {
                    return None;
                }
                let age = now_ms - m.last_confirmed_ms;
                let kind_weight = config.kind_weights.of(m.kind);
                let decay = decay_multiplier(config, age, m.confirmations);
                let usage = usage_multiplier(config, m.citations(), m.impressions());
                let drift = drift_multiplier(config, tenant.drifted(m));
                let confidence = effective_confidence(
                    config,
                    m.row.confidence,
                    m.source == Source::Inferred,
                    age,
                );
                // Asked once only when it could matter.
                let asking = if config.question_weight < 1.0 && asks() {
                    config.question_weight
                } else {
                    1.0
                };
                let score = rel * kind_weight * decay * usage * drift * confidence * asking;
                Some((
                    i,
                    Breakdown {
                        cosine,
                        sentence_cosine: sentence_cosines.get(&i).copied(),
                        v: cosine.unwrap_or(0.0).max(0.0),
                        bm25,
                        b,
                        lexical_share: lexical_share(config, cosine, b, asks),
                        rel,
                        kind_weight,
                        decay,
                        usage,
                        drift,
                        confidence,
                        asking,
                        update: 1.0,
                        updates: None,
                        score,
                    },
                ))
            })
            .collect();
        // Abstention is the query's verdict: without one candidate close in
        // meaning or matching most of its words (and, when set, reaching
        // `min_relevance`), nothing is returned. Once a query has an answer,
        // weaker hits down to `min_hit_relevance` (and a share of the best
        // hit's relevance) fill the k slots.
        let best = scored.iter().map(|(_, b)| b.rel).fold(0f32, f32::max);
        if has_embedder {
            if !evidence || best < config.min_relevance {
                scored.clear();
            }
            // A clear answer does not bring noise along: hits far weaker
            // than the best one go, even above the floor.
            scored.retain(|(_, b)| b.rel >= config.min_hit_share * best);
        }
        scored.sort_by(|(i, a), (j, b)| {
            b.score
                .total_cmp(&a.score)
                .then(tenant.memories[*i].id.cmp(&tenant.memories[*j].id))
        });
        if let Some(update_similarity) = config.update_similarity {
            let memories = &tenant.memories;
            // What a pair is compared on: each top hit's vector closest to
            // the query (the restated value, not the small talk around it).
            let closest: HashMap<usize, &[f32]> = scored
                .iter()
                .take(self.k)
                .filter_map(|&(i, _)| Some((i, tenant.closest_vector(i, query_vector)?)))
                .collect();
            // Each pair once: the isolation check asks for the same pairs
            // again.
            let pair_cosines: RefCell<HashMap<(usize, usize), Option<f32>>> = RefCell::default();
            let similarity = |a: usize, b: usize| {
                *pair_cosines
                    .borrow_mut()
                    .entry((a.min(b), a.max(b)))
                    .or_insert_with(|| closest.get(&a).zip(closest.get(&b)).map(|(x, y)| dot(x, y)))
            };
            let states = |i: usize| config.update_kinds.contains(&memories[i].kind);
            crate::updates::lift_newer_versions(
                &mut scored,
                self.k,
                Cutoffs {
                    similarity: update_similarity,
                    evidence: config.min_evidence_cosine,
                    isolation: config.update_isolation,
                    relevance_share: config.update_relevance_share,
                },
                |newer, older| {
                    if memories[newer].last_confirmed_ms <= memories[older].last_confirmed_ms
                        || asks_only(&memories[newer].row.content)
                    {
                        Versions::Never
                    } else if states(newer) && states(older) {
                        Versions::WhenSimilar
                    } else {
                        Versions::WhenApart
                    }
                },
                similarity,
                |i| memories[i].id,
            );
        }
        scored.truncate(self.k);
        let mut hits: Vec<Hit> = scored
            .into_iter()
            .map(|(i, breakdown)| Hit {
                memory: tenant.view(i),
                via: None,
                score: breakdown.score,
                breakdown,
            })
            .collect();
        let by_score = |a: &Hit, b: &Hit| {
            b.score
                .total_cmp(&a.score)
                .then(a.memory.id.cmp(&b.memory.id))
        };
        // Each top hit brings up to two linked memories not already present.
        let mut present: std::collections::HashSet<Uuid> =
            hits.iter().map(|h| h.memory.id).collect();
        let mut linked = Vec::new();
        for parent in &hits {
            let label = parent
                .memory
                .title
                .clone()
                .unwrap_or_else(|| parent.memory.id.to_string());
            let neighbours = parent
                .memory
                .links
                .iter()
                .filter_map(|l| l.id)
                .filter_map(|id| tenant.by_id.get(&id).copied())
                .filter(|&i| eligible(i));
            let mut brought = 0;
            for i in neighbours {
                if brought == 2 {
                    break;
                }
                if !present.insert(tenant.memories[i].id) {
                    continue;
                }
                brought += 1;
                let score = parent.score * 0.5;
                let mut breakdown = parent.breakdown.clone();
                breakdown.score = score;
                linked.push(Hit {
                    memory: tenant.view(i),
                    score,
                    breakdown,
                    via: Some(label.clone()),
                });
            }
        }
        hits.extend(linked);
        hits.sort_by(by_score);
        if matches!(config.bm25, Bm25Normalization::MaxOfQuery) {
            tracing::debug!("max-of-query BM25 normalization: abstention is unreliable");
        }
        Ok(RecallResult {
            abstained: hits.is_empty(),
            hits,
            candidates: total,
        })
    }
}
