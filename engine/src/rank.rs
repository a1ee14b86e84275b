//! Ranking (§4.2–§4.7), the pure core of a recall: from one tenant's state,
//! the query and what the two candidate stages found, the ordered hits.
//! No IO, no locks, no clock: [`crate::recall_path`] is the shell that gathers
//! the inputs.
//!
//! The steps, each a function below:
//! 1. [`merge`]: the union of the vector and BM25 candidates, each with its
//!    true cosine (the whole memory's or its closest sentence's);
//! 2. [`score`]: each candidate's [`Breakdown`] (the formula is on
//!    [`Breakdown`]), and whether any is evidence of an answer;
//! 3. [`gate`]: abstention, the hit floors;
//! 4. [`order`]: best first, then the newer-version lift ([`crate::updates`]);
//! 5. [`with_links`]: each top hit brings its `[[links]]` along.

use std::cell::{OnceCell, RefCell};
use std::collections::{HashMap, HashSet};

use recall_indexer::{LexicalHit, dot};
use serde::Serialize;
use uuid::Uuid;

use crate::background::Background;
use crate::config::{LiftBand, ScoringConfig};
use crate::memory::{Memory, Source};
use crate::score::{
    Breakdown, decay_multiplier, drift_multiplier, effective_confidence, evidence_raise,
    is_evidence, lexical_share, names_unknown, normalize_bm25, relevance, usage_multiplier,
};
use crate::sentences::is_question;
use crate::state::TenantState;
use crate::updates::{Cutoffs, Versions};

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
    /// title (or id). Its score is [`ScoringConfig::link_share`] of the
    /// parent's, half by default (§4.7).
    pub via: Option<String>,
}

/// The answer to a recall.
#[derive(Debug, Clone, Serialize)]
pub struct RecallResult {
    /// Best first: at most `k` hits, plus the memories they link to
    /// ([`ScoringConfig::links_per_hit`] each).
    pub hits: Vec<Hit>,
    /// True when no candidate was evidence of an answer (no part of one
    /// that states something reached `min_evidence_cosine`, no part that
    /// asks `question_evidence`, and none matched `min_evidence_lexical` of
    /// the query's words; or none existed): the result is then empty
    /// ([`crate::is_evidence`]).
    pub abstained: bool,
    /// Candidates considered (union of the vector and BM25 stages, in scope).
    pub candidates: usize,
    /// The query's names ([`crate::named_words`]) that no memory the caller
    /// may read mentions. When it holds all of them, the recall abstained
    /// for that reason ([`ScoringConfig::unknown_names`]; empty when that
    /// rule is off, which looks no name up).
    pub unknown_names: Vec<String>,
    /// The query's cosines to a sample of the memories in scope, which the
    /// abstention gate measures the best candidate against (None without
    /// an embedder or with fewer than two memories in scope).
    pub background: Option<Background>,
}

/// What is asked, apart from the text (which only the BM25 stage reads).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Query<'a> {
    /// The query's unit vector, when there is an embedder.
    pub(crate) vector: Option<&'a [f32]>,
    /// Hits wanted.
    pub(crate) k: usize,
    /// The instant scores are computed at (ms since the Unix epoch).
    pub(crate) now_ms: i64,
    /// Whether the engine embeds: without it, raw BM25 decides alone.
    pub(crate) has_embedder: bool,
}

impl Query<'_> {
    /// Candidates taken from each stage.
    pub(crate) fn pool(&self, config: &ScoringConfig) -> usize {
        config.candidate_pool.max(self.k)
    }
}

/// What the candidate stages found (rows of the tenant's state).
#[derive(Debug, Default)]
pub(crate) struct Found {
    /// BM25 hits, best first, over-fetched (ineligible ones are still in).
    pub(crate) lexical: Vec<LexicalHit>,
    /// The query's attainable BM25 score (Σ idf of its terms), or 0.
    pub(crate) attainable: f32,
    /// Eligible rows nearest by their whole vector, with the cosine.
    pub(crate) nearest: Vec<(usize, f32)>,
    /// Eligible rows with the nearest sentences.
    pub(crate) nearest_sentences: Vec<(usize, f32)>,
    /// The query's cosines to a sample of the eligible rows.
    pub(crate) background: Option<Background>,
    /// How many names the query uses ([`crate::named_words`]).
    pub(crate) named: usize,
    /// Those of them no readable memory mentions.
    pub(crate) unknown_names: Vec<String>,
    /// Whether the query asks for advice ([`crate::asks_for_advice`]).
    pub(crate) asks_for_advice: bool,
}

/// A candidate before scoring: the cosine of its closest part (if any)
/// and its raw BM25 score (if it matched).
type Candidates = HashMap<usize, (Option<f32>, Option<f32>)>;

/// Ranks what the candidate stages found. `eligible` says whether the
/// caller may be served a row (scope, filters, quarantine, expiry).
pub(crate) fn rank(
    tenant: &TenantState,
    query: &Query<'_>,
    config: &ScoringConfig,
    mut found: Found,
    eligible: impl Fn(usize) -> bool,
) -> RecallResult {
    let attainable = found.attainable;
    let background = found.background;
    let unheard_of = names_unknown(
        config,
        found.named,
        found.unknown_names.len(),
        found.asks_for_advice,
    );
    let unknown_names = std::mem::take(&mut found.unknown_names);
    let (candidates, sentence_cosines) = merge(tenant, query, config, found, &eligible);
    let total = candidates.len();
    if unheard_of {
        return RecallResult {
            hits: Vec::new(),
            abstained: true,
            candidates: total,
            background,
            unknown_names,
        };
    }
    let raise = evidence_raise(config, background.as_ref());
    let (mut scored, evidence) = score(
        tenant,
        query,
        config,
        candidates,
        &sentence_cosines,
        attainable,
        raise,
    );
    if query.has_embedder {
        gate(&mut scored, evidence, config);
    }
    order(tenant, query, config, &mut scored);
    quoted_once(tenant, &mut scored);
    scored.truncate(query.k);
    let hits = with_links(tenant, config, scored, &eligible);
    RecallResult {
        abstained: hits.is_empty(),
        hits,
        candidates: total,
        background,
        unknown_names,
    }
}

/// The union of both stages' candidates (at most the pool from BM25, in
/// its order, eligible ones only), each with its true cosine: a
/// lexical-only one's too, not 0, and a sentence's when that is closer
/// than the whole memory. Also returns the closest sentence's cosine of
/// every candidate that has sentences.
fn merge(
    tenant: &TenantState,
    query: &Query<'_>,
    config: &ScoringConfig,
    found: Found,
    eligible: &impl Fn(usize) -> bool,
) -> (Candidates, HashMap<usize, f32>) {
    let pool = query.pool(config);
    let mut candidates: Candidates = found
        .nearest
        .into_iter()
        .map(|(i, cos)| (i, (Some(cos), None)))
        .collect();
    for (i, _) in found.nearest_sentences {
        candidates.entry(i).or_insert((None, None));
    }
    let mut taken = 0;
    for hit in found.lexical {
        let Some(&i) = tenant.by_seq.get(&hit.seq) else {
            continue;
        };
        if taken == pool || !eligible(i) {
            continue;
        }
        taken += 1;
        candidates.entry(i).or_insert((None, None)).1 = Some(hit.score);
    }
    let mut sentence_cosines: HashMap<usize, f32> = HashMap::new();
    if let Some(q) = query.vector {
        for (i, (cos, _)) in candidates.iter_mut() {
            if cos.is_none()
                && let Some(row) = tenant.memories[*i].vector_row()
            {
                *cos = tenant.vectors.row(row).map(|v| dot(v, q));
            }
            if let Some(sentence) = tenant.sentence_cosine(*i, q) {
                sentence_cosines.insert(*i, sentence);
                *cos = Some(cos.map_or(sentence, |c| c.max(sentence)));
            }
        }
    }
    (candidates, sentence_cosines)
}

/// Each candidate's breakdown, for those above the hit floor, and whether
/// some candidate is evidence the query can be answered (the abstention
/// gate), judged before the floor drops anything.
fn score(
    tenant: &TenantState,
    query: &Query<'_>,
    config: &ScoringConfig,
    candidates: Candidates,
    sentence_cosines: &HashMap<usize, f32>,
    attainable: f32,
    raise: f32,
) -> (Vec<(usize, Breakdown)>, bool) {
    let (min_s, max_s) = candidates
        .values()
        .filter_map(|(_, s)| *s)
        .fold((f32::MAX, 0f32), |(lo, hi), s| (lo.min(s), hi.max(s)));
    let mut evidence = false;
    // Scored first, viewed after the cut: building a memory's public view
    // copies its text, worth doing only for the hits returned.
    let scored = candidates
        .into_iter()
        .filter_map(|(i, (cosine, bm25))| {
            let m = &tenant.memories[i];
            let b = bm25.map_or(0.0, |s| {
                normalize_bm25(config.bm25, s, min_s, max_s, attainable)
            });
            // Whether it only asks, found out once and only if asked.
            let cell = OnceCell::new();
            let question = || *cell.get_or_init(|| is_question(&m.row.content));
            let rel = relevance(config, cosine, b, query.has_embedder, question);
            let parts = || {
                query
                    .vector
                    .map(|q| tenant.part_cosines(i, q, question()))
                    .unwrap_or_default()
            };
            evidence = evidence || is_evidence(config, raise, cosine, b, question, parts);
            // The thresholds are calibrated for the hybrid score. BM25
            // alone depends on corpus size (IDF), so without an embedder
            // any lexical match passes both.
            let passes = if query.has_embedder {
                rel >= config.min_hit_relevance
            } else {
                bm25.is_some_and(|s| s > 0.0)
            };
            if !passes {
                return None;
            }
            let age = query.now_ms - m.last_confirmed_ms;
            let kind_weight = config.kind_weights.of(m.kind);
            let decay = decay_multiplier(config, age, m.confirmations);
            let usage = usage_multiplier(config, m.citations(), m.impressions());
            let drift = drift_multiplier(config, tenant.drifted(m));
            let confidence =
                effective_confidence(config, m.row.confidence, m.source == Source::Inferred, age);
            // Asked once only when it could matter.
            let question_weight = if config.question_weight < 1.0 && question() {
                config.question_weight
            } else {
                1.0
            };
            Some((
                i,
                Breakdown {
                    cosine,
                    sentence_cosine: sentence_cosines.get(&i).copied(),
                    v: cosine.unwrap_or(0.0).max(0.0),
                    bm25,
                    b,
                    lexical_share: lexical_share(config, cosine, b, question),
                    rel,
                    kind_weight,
                    decay,
                    usage,
                    drift,
                    confidence,
                    question: question_weight,
                    lift_share: 1.0,
                    update: 1.0,
                    updates: None,
                    score: 0.0,
                },
            ))
        })
        .collect();
    let mut scored: Vec<(usize, Breakdown)> = scored;
    lift_and_score(config, &mut scored);
    (scored, evidence)
}

/// Each hit's score: its relevance times its factors, with the share of
/// its lifts ([`ScoringConfig::lift_band`]) its relevance earns against
/// the best candidate's.
fn lift_and_score(config: &ScoringConfig, scored: &mut [(usize, Breakdown)]) {
    let best = scored.iter().map(|(_, b)| b.rel).fold(0f32, f32::max);
    for (_, b) in scored.iter_mut() {
        if let Some(band) = config.lift_band {
            b.lift_share = band.share(b.rel, best);
            b.kind_weight = LiftBand::apply(b.kind_weight, b.lift_share);
            b.usage = LiftBand::apply(b.usage, b.lift_share);
        }
        b.score = b.rel * b.kind_weight * b.decay * b.usage * b.drift * b.confidence * b.question;
    }
}

/// Abstention is the query's verdict: without one candidate close in
/// meaning or matching most of its words (and, when set, reaching
/// `min_relevance`), nothing is returned. Once a query has an answer,
/// weaker hits down to `min_hit_relevance` (and a share of the best hit's
/// relevance) fill the k slots. Only with an embedder: the thresholds mean
/// nothing for raw BM25.
fn gate(scored: &mut Vec<(usize, Breakdown)>, evidence: bool, config: &ScoringConfig) {
    let best = scored.iter().map(|(_, b)| b.rel).fold(0f32, f32::max);
    if !evidence || best < config.min_relevance {
        scored.clear();
    }
    // A clear answer does not bring noise along: hits far weaker than the
    // best one go, even above the floor.
    scored.retain(|(_, b)| b.rel >= config.min_hit_share * best);
}

/// A memory a consolidation derived from others quotes one of them
/// verbatim (`crate::DefaultConsolidator`'s facts): the two are one text,
/// and a result shows it once, at the better-ranked of the two places. No
/// other hit is touched, so a store never consolidated ranks as before.
fn quoted_once(tenant: &TenantState, scored: &mut Vec<(usize, Breakdown)>) {
    // Scored source → the derived memory that quotes it.
    let mut quoted_by: HashMap<usize, usize> = HashMap::new();
    for &(d, _) in scored.iter() {
        let derived = &tenant.memories[d];
        for source in derived.derived_from() {
            if let Some(&s) = tenant.by_id.get(source)
                && tenant.memories[s].row.content == derived.row.content
            {
                quoted_by.insert(s, d);
            }
        }
    }
    if quoted_by.is_empty() {
        return;
    }
    let mut shown = HashSet::new();
    scored.retain(|(i, _)| shown.insert(quoted_by.get(i).copied().unwrap_or(*i)));
}

/// Best first (ties by id), then a newer version of a top hit lifted just
/// above it ([`crate::updates::lift_newer_versions`]).
fn order(
    tenant: &TenantState,
    query: &Query<'_>,
    config: &ScoringConfig,
    scored: &mut [(usize, Breakdown)],
) {
    scored.sort_by(|(i, a), (j, b)| {
        b.score
            .total_cmp(&a.score)
            .then(tenant.memories[*i].id.cmp(&tenant.memories[*j].id))
    });
    let Some(update_similarity) = config.update_similarity else {
        return;
    };
    let memories = &tenant.memories;
    // What a pair is compared on: each top hit's vector closest to the
    // query (the restated value, not the small talk around it).
    let closest: HashMap<usize, &[f32]> = scored
        .iter()
        .take(query.k)
        .filter_map(|&(i, _)| Some((i, tenant.closest_vector(i, query.vector)?)))
        .collect();
    // Each pair once: the isolation check asks for the same pairs again.
    let pair_cosines: RefCell<HashMap<(usize, usize), Option<f32>>> = RefCell::default();
    let similarity = |a: usize, b: usize| {
        *pair_cosines
            .borrow_mut()
            .entry((a.min(b), a.max(b)))
            .or_insert_with(|| closest.get(&a).zip(closest.get(&b)).map(|(x, y)| dot(x, y)))
    };
    let states = |i: usize| config.update_kinds.contains(&memories[i].kind);
    crate::updates::lift_newer_versions(
        scored,
        query.k,
        Cutoffs {
            similarity: update_similarity,
            evidence: config.min_evidence_cosine,
            isolation: config.update_isolation,
            relevance_share: config.update_relevance_share,
        },
        |newer, older| {
            if memories[newer].last_confirmed_ms <= memories[older].last_confirmed_ms
                || is_question(&memories[newer].row.content)
                || !same_thing(tenant, newer, older)
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

/// Whether two memories can be versions of one thing at all: the same
/// kind (a convention is not an update of the fact it cites), and neither
/// links to the other (a writer who links two memories says they are two).
fn same_thing(tenant: &TenantState, a: usize, b: usize) -> bool {
    let (ma, mb) = (&tenant.memories[a], &tenant.memories[b]);
    let names = |m: &crate::state::MemoryState, other: &crate::state::MemoryState| {
        other
            .row
            .title
            .as_ref()
            .is_some_and(|t| m.links().iter().any(|l| l == t))
    };
    ma.kind == mb.kind && !names(ma, mb) && !names(mb, ma)
}

/// The hits, each top hit followed by up to
/// [`ScoringConfig::links_per_hit`] eligible memories it links to that are
/// not hits already, at [`ScoringConfig::link_share`] of its score (§4.7);
/// a hit that a better hit links to is ranked as that link when the link's
/// score is the higher (so it follows the memory that cites it, `via`);
/// best first.
fn with_links(
    tenant: &TenantState,
    config: &ScoringConfig,
    scored: Vec<(usize, Breakdown)>,
    eligible: &impl Fn(usize) -> bool,
) -> Vec<Hit> {
    let mut hits: Vec<Hit> = scored
        .into_iter()
        .map(|(i, breakdown)| Hit {
            memory: tenant.view(i),
            via: None,
            score: breakdown.score,
            breakdown,
        })
        .collect();
    let mut present: HashSet<Uuid> = hits.iter().map(|h| h.memory.id).collect();
    // A hit that a better hit links to ranks as that link when the link's
    // share of its parent's score is the higher: the writer said how the
    // two belong together.
    let position: HashMap<Uuid, usize> = hits
        .iter()
        .enumerate()
        .map(|(n, h)| (h.memory.id, n))
        .collect();
    let mut raised: HashMap<usize, (f32, String, Breakdown)> = HashMap::new();
    for parent in &hits {
        let score = parent.score * config.link_share;
        for id in parent.memory.links.iter().filter_map(|l| l.id) {
            let Some(&n) = position.get(&id) else {
                continue;
            };
            let best = raised.get(&n).map_or(hits[n].score, |(s, _, _)| *s);
            if score > best {
                let label = parent
                    .memory
                    .title
                    .clone()
                    .unwrap_or_else(|| parent.memory.id.to_string());
                let mut breakdown = parent.breakdown.clone();
                breakdown.score = score;
                raised.insert(n, (score, label, breakdown));
            }
        }
    }
    for (n, (score, label, breakdown)) in raised {
        let hit = &mut hits[n];
        hit.score = score;
        hit.breakdown = breakdown;
        hit.via = Some(label);
    }
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
            if brought == config.links_per_hit {
                break;
            }
            if !present.insert(tenant.memories[i].id) {
                continue;
            }
            brought += 1;
            let score = parent.score * config.link_share;
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
    hits.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then(a.memory.id.cmp(&b.memory.id))
    });
    hits
}

#[cfg(test)]
mod tests {
    //! The ranking on a state built in memory: no data directory, no model.
    use recall_indexer::{MemoryRow, Record};

    use super::*;
    use crate::state::State;

    const DIM: usize = 4;
    const NOW: i64 = 1_780_000_000_000;

    /// A unit vector at `cos` to the first axis, the rest on `axis`.
    fn at(cos: f32, axis: usize) -> Vec<f32> {
        let mut v = vec![0.0; DIM];
        v[0] = cos;
        v[axis] = (1.0 - cos * cos).sqrt();
        v
    }

    fn memory(seq: u64, kind: &str, title: Option<&str>, content: &str, v: Vec<f32>) -> Record {
        Record::Memory(MemoryRow {
            title: title.map(str::to_string),
            observed_at_ms: NOW,
            created_at_ms: NOW,
            ..crate::state::test_row(seq, kind, content, v)
        })
    }

    fn state(records: Vec<Record>) -> State {
        let mut state = State::new(DIM);
        state.apply_all(records);
        state
    }

    /// Every row a candidate by its cosine to the query (the first axis).
    fn found(tenant: &TenantState) -> Found {
        let query = at(1.0, 1);
        Found {
            nearest: (0..tenant.memories.len())
                .map(|i| {
                    let row = tenant.memories[i].vector_row().unwrap();
                    (i, dot(tenant.vectors.row(row).unwrap(), &query))
                })
                .collect(),
            ..Found::default()
        }
    }

    /// A query for the top 10 along `q`, now, with an embedder.
    fn asking(q: &[f32]) -> Query<'_> {
        Query {
            vector: Some(q),
            k: 10,
            now_ms: NOW,
            has_embedder: true,
        }
    }

    fn run(tenant: &TenantState, config: &ScoringConfig) -> RecallResult {
        let q = at(1.0, 1);
        let query = asking(&q);
        rank(tenant, &query, config, found(tenant), |_| true)
    }

    fn id(seq: u64) -> Uuid {
        Uuid::from_u128(u128::from(seq))
    }

    #[test]
    fn nothing_close_in_meaning_abstains() {
        let s = state(vec![
            memory(1, "note", None, "far away", at(0.10, 1)),
            memory(2, "pitfall", None, "also far", at(0.15, 2)),
        ]);
        let result = run(s.tenant("t").unwrap(), &ScoringConfig::default());
        assert!(result.abstained && result.hits.is_empty());
        assert_eq!(result.candidates, 2);
    }

    #[test]
    fn the_kind_weight_orders_equally_close_memories_and_the_breakdown_says_why() {
        let s = state(vec![
            memory(1, "note", None, "the answer as a note", at(0.6, 1)),
            memory(2, "pitfall", None, "the answer as a pitfall", at(0.6, 2)),
        ]);
        let config = ScoringConfig::default();
        let result = run(s.tenant("t").unwrap(), &config);
        let order: Vec<Uuid> = result.hits.iter().map(|h| h.memory.id).collect();
        assert_eq!(order, vec![id(2), id(1)]);
        let (top, next) = (&result.hits[0].breakdown, &result.hits[1].breakdown);
        assert_eq!(top.rel, next.rel);
        assert_eq!(
            top.kind_weight,
            config.kind_weights.of(crate::Kind::Pitfall)
        );
        assert!((top.score / next.score - top.kind_weight / next.kind_weight).abs() < 1e-5);
    }

    #[test]
    fn a_kind_weight_does_not_lift_a_weak_match_above_the_answer() {
        // The demo's outage question: the outage episode answers it; an
        // unrelated pitfall matches weakly and weighs 3.
        let s = state(vec![
            memory(1, "episode", None, "the checkout outage", at(0.8, 1)),
            memory(2, "pitfall", None, "an unrelated pitfall", at(0.3, 2)),
        ]);
        let tenant = s.tenant("t").unwrap();
        let result = run(tenant, &ScoringConfig::default());
        let order: Vec<Uuid> = result.hits.iter().map(|h| h.memory.id).collect();
        assert_eq!(order, vec![id(1), id(2)]);
        let weak = &result.hits[1].breakdown;
        assert_eq!((weak.lift_share, weak.kind_weight), (0.0, 1.0));
        assert!(weak.explain().contains("lifts: 0 %"), "{}", weak.explain());
        // The spec's product: the pitfall's weight of 3 puts it first.
        let product = ScoringConfig {
            lift_band: None,
            ..ScoringConfig::default()
        };
        assert_eq!(run(tenant, &product).hits[0].memory.id, id(2));
    }

    #[test]
    fn a_query_whose_every_name_is_unknown_abstains_however_close() {
        // Every memory names its speaker, so a question about someone this
        // store never heard of sits as close as its own questions do.
        let s = state(vec![memory(
            1,
            "episode",
            None,
            "Ana: we went hiking",
            at(0.7, 1),
        )]);
        let tenant = s.tenant("t").unwrap();
        let q = at(1.0, 1);
        let query = asking(&q);
        let asked = |named, unknown: &[&str]| Found {
            named,
            unknown_names: unknown.iter().map(|w| w.to_string()).collect(),
            ..found(tenant)
        };
        let config = ScoringConfig::default();
        let unheard = rank(tenant, &query, &config, asked(1, &["Gina"]), |_| true);
        assert!(unheard.abstained && unheard.hits.is_empty());
        assert_eq!(
            (unheard.unknown_names, unheard.candidates),
            (vec!["Gina".to_string()], 1)
        );
        // One known name keeps it answering, and so does the rule off.
        let known = rank(tenant, &query, &config, asked(2, &["Gina"]), |_| true);
        assert_eq!(known.hits.len(), 1);
        let advice = Found {
            asks_for_advice: true,
            ..asked(1, &["Gina"])
        };
        assert_eq!(
            rank(tenant, &query, &config, advice, |_| true).hits.len(),
            1
        );
        let off = ScoringConfig {
            unknown_names: false,
            ..ScoringConfig::default()
        };
        assert_eq!(
            rank(tenant, &query, &off, asked(1, &["Gina"]), |_| true)
                .hits
                .len(),
            1
        );
    }

    #[test]
    fn with_a_margin_the_gate_is_measured_from_the_stores_background() {
        // Every memory sits near .5 to the query; the best at .55 stands
        // out from nothing.
        let s = state(vec![
            memory(1, "episode", None, "Ana: we went hiking", at(0.55, 1)),
            memory(2, "episode", None, "Ana: the weather was fine", at(0.5, 2)),
        ]);
        let tenant = s.tenant("t").unwrap();
        let q = at(1.0, 1);
        let query = asking(&q);
        let crowded = || Found {
            background: Some(Background {
                mean: 0.5,
                sd: 0.03,
                sampled: 200,
            }),
            ..found(tenant)
        };
        let fixed = rank(tenant, &query, &ScoringConfig::default(), crowded(), |_| {
            true
        });
        assert!(!fixed.abstained, "the fixed cut-off alone answers");
        assert_eq!(fixed.background.map(|b| b.sampled), Some(200));
        let margin = ScoringConfig {
            min_evidence_margin: Some(0.15),
            ..ScoringConfig::default()
        };
        assert!(rank(tenant, &query, &margin, crowded(), |_| true).abstained);
        // The same margin in a quiet store: .55 is well above its mean.
        let quiet = Found {
            background: Some(Background {
                mean: 0.05,
                sd: 0.05,
                sampled: 200,
            }),
            ..found(tenant)
        };
        assert!(!rank(tenant, &query, &margin, quiet, |_| true).abstained);
    }

    #[test]
    fn a_hit_that_the_top_hit_links_to_follows_it_as_its_link() {
        // The example: the convention answers and cites the fact;
        // the fact, a weaker hit on its own, comes right after it, `via`.
        let s = state(vec![
            memory(
                1,
                "convention",
                Some("Header limits"),
                "Large tokens go in the body; see [[JWT size]] for the numbers.",
                at(0.6, 1),
            ),
            later(
                memory(
                    2,
                    "fact",
                    Some("JWT size"),
                    "Our JWTs reach 12 KB.",
                    at(0.3, 2),
                ),
                60_000,
            ),
        ]);
        let config = ScoringConfig::default();
        let result = run(s.tenant("t").unwrap(), &config);
        let (top, next) = (&result.hits[0], &result.hits[1]);
        assert_eq!((top.memory.id, next.memory.id), (id(1), id(2)));
        assert_eq!(next.via.as_deref(), Some("Header limits"));
        assert!((next.score - top.score * config.link_share).abs() < 1e-6);
        assert_eq!(result.hits.len(), 2, "not listed twice");
    }

    /// `record`, written `ms` after the others.
    fn later(record: Record, ms: i64) -> Record {
        match record {
            Record::Memory(mut row) => {
                row.created_at_ms += ms;
                row.observed_at_ms += ms;
                Record::Memory(row)
            }
            other => other,
        }
    }

    /// Ranks the two; returns the order and whether the second was lifted.
    fn lifted(records: Vec<Record>) -> (Vec<Uuid>, bool) {
        let s = state(records);
        let result = run(s.tenant("t").unwrap(), &ScoringConfig::default());
        let order = result.hits.iter().map(|h| h.memory.id).collect();
        (
            order,
            result.hits.iter().any(|h| h.breakdown.updates.is_some()),
        )
    }

    #[test]
    fn a_newer_memory_of_the_same_kind_saying_much_the_same_is_lifted() {
        // The control for the two tests below: the rule does fire here.
        let (order, lift) = lifted(vec![
            memory(1, "fact", Some("Rent"), "Our rent is $1,800.", at(0.6, 1)),
            later(
                memory(2, "fact", None, "Rent went up: $1,950.", at(0.3, 1)),
                60_000,
            ),
        ]);
        assert!(lift);
        assert_eq!(order, vec![id(2), id(1)]);
    }

    #[test]
    fn a_memory_of_another_kind_is_not_a_newer_version() {
        // A convention and, written later, a fact on its topic: two
        // memories, not two versions of one.
        let (order, lift) = lifted(vec![
            memory(
                1,
                "convention",
                Some("Header limits"),
                "Large tokens go in the body.",
                at(0.6, 1),
            ),
            later(
                memory(
                    2,
                    "fact",
                    Some("JWT size"),
                    "Our JWTs reach 12 KB.",
                    at(0.3, 1),
                ),
                60_000,
            ),
        ]);
        assert!(!lift);
        assert_eq!(order, vec![id(1), id(2)]);
    }

    #[test]
    fn a_memory_linked_to_the_hit_is_not_a_newer_version_of_it() {
        let (order, lift) = lifted(vec![
            memory(
                1,
                "fact",
                Some("Header limits"),
                "Large tokens go in the body; see [[JWT size]].",
                at(0.6, 1),
            ),
            later(
                memory(
                    2,
                    "fact",
                    Some("JWT size"),
                    "Our JWTs reach 12 KB.",
                    at(0.3, 1),
                ),
                60_000,
            ),
        ]);
        assert!(!lift);
        assert_eq!(order[0], id(1), "{order:?}");
    }

    #[test]
    fn a_hit_brings_its_link_at_the_configured_share() {
        let s = state(vec![
            memory(
                1,
                "convention",
                Some("Limits"),
                "see [[Sizes]] and [[Other]]",
                at(0.7, 1),
            ),
            memory(2, "fact", Some("Sizes"), "unrelated in meaning", at(0.0, 2)),
            memory(3, "fact", Some("Other"), "also unrelated", at(0.0, 3)),
        ]);
        let tenant = s.tenant("t").unwrap();
        let config = ScoringConfig {
            links_per_hit: 1,
            ..ScoringConfig::default()
        };
        let result = run(tenant, &config);
        assert_eq!(result.hits.len(), 2, "one link per hit: {:?}", result.hits);
        let (parent, link) = (&result.hits[0], &result.hits[1]);
        assert_eq!(parent.memory.id, id(1));
        assert_eq!(link.memory.id, id(2));
        assert_eq!(link.via.as_deref(), Some("Limits"));
        assert!((link.score - parent.score * config.link_share).abs() < 1e-6);
        let two = run(tenant, &ScoringConfig::default());
        assert_eq!(two.hits.len(), 3);
    }
}
