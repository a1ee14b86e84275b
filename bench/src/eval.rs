//! The evaluation harness shared by `longmemeval`, `locomo` and `sweep`.
//!
//! A [`Haystack`] (one LongMemEval instance, one LoCoMo conversation) is
//! written into a fresh engine in its own temporary directory — so BM25
//! statistics are the haystack's own, as in the reference numbers — through
//! the normal write path (redaction, screening, dedup). The clock is set to
//! each document's date while it is written, and each question is recalled
//! "as of" its own date. The engine embeds what it writes itself (each
//! document and its sentences, [`recall::sentences`]) through a
//! [`VectorCache`]'s embedder, so it gets the vectors the model computes
//! and a sweep embeds nothing twice.
//!
//! Rankers are scorer settings: the engine's (defaults unless a sweep says
//! otherwise) and two baselines for "the hybrid must never lose to its
//! better half": `dense` (cosine only) and `bm25` (BM25 only), both without
//! decay, kind weights, drift demotion or abstention, over the same
//! candidate union.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use recall::{
    Bm25Normalization, Config, Engine, FixedClock, Kind, ModelSource, NewMemory, ProposalPolicy,
    ScoringConfig,
};
use serde::Serialize;
use uuid::Uuid;

use crate::metrics::{OVERALL, Summary, Tally, ranked_units, score_question};
use crate::vector_cache::VectorCache;

/// The tenant and bank every haystack is written to (each has its own engine).
pub const TENANT: &str = "eval";
/// See [`TENANT`].
pub const BANK: &str = "user:eval";

/// One unit written as a memory.
#[derive(Debug, Clone)]
pub struct Doc {
    /// The evaluation unit it stands for (a turn or session id).
    pub unit: String,
    /// The text written.
    pub text: String,
    /// When it was said (`observed_at`, and the clock while writing it).
    pub at: DateTime<Utc>,
    /// A title (searched by BM25, not embedded), if any.
    pub title: Option<String>,
}

/// One question over a haystack.
#[derive(Debug, Clone)]
pub struct Question {
    /// Its id.
    pub id: String,
    /// Its group: question type or LoCoMo category.
    pub group: String,
    /// The text recalled.
    pub text: String,
    /// Gold units (empty for abstention questions).
    pub gold: Vec<String>,
    /// The haystack does not answer it: the right result is an abstention.
    pub abstain: bool,
    /// A knowledge update: the newest gold unit must rank above older ones.
    pub newest_first: bool,
    /// When it is asked (the recall's `now`).
    pub at: DateTime<Utc>,
}

/// Documents and the questions asked over them.
#[derive(Debug, Clone)]
pub struct Haystack {
    /// Its name (instance or conversation id).
    pub name: String,
    /// In the order written.
    pub docs: Vec<Doc>,
    /// The questions.
    pub questions: Vec<Question>,
    /// The kind every document is written as (sources: episode).
    pub kind: Kind,
    /// Written with a session id per date, then consolidated
    /// (`Engine::consolidate`) before it is asked (`--consolidate`).
    pub consolidate: bool,
}

/// A haystack written into its own engine.
pub struct Ingested {
    engine: Engine,
    _dir: tempfile::TempDir,
    /// Memory → the units written into it (the original and its repeats).
    units: HashMap<Uuid, Vec<String>>,
    /// Unit → its memory.
    memory_of: HashMap<String, Uuid>,
    /// Unit → its date.
    dates: HashMap<String, DateTime<Utc>>,
    /// The questions.
    pub questions: Vec<Question>,
    /// Units the engine refused (too long after truncation, empty …).
    pub refused: usize,
    /// Proposals a consolidation pass applied (`--consolidate`).
    pub consolidated: usize,
}

/// Longest text written; longer turns are cut at a character boundary
/// (the engine's default limit is 16 KiB).
const MAX_TEXT_BYTES: usize = 16 * 1024;

fn clip(text: &str) -> &str {
    if text.len() <= MAX_TEXT_BYTES {
        return text;
    }
    let mut end = MAX_TEXT_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The write of one document: a memory of `kind` in the eval bank,
/// observed at its date. The engine embeds it (and its sentences) as it
/// would any memory, through the cache.
fn write_of(doc: &Doc, kind: Kind, session: Option<&str>) -> NewMemory {
    let mut memory = NewMemory::new(TENANT, BANK, kind, clip(&doc.text)).observed_at(doc.at);
    memory.session_id = session.map(str::to_string);
    if let Some(title) = &doc.title {
        memory = memory.title(title.clone());
    }
    memory
}

/// Writes `haystack` into a fresh engine. Texts the cache misses (see
/// [`texts`]) are embedded by the model, without being saved.
pub async fn ingest(haystack: Haystack, cache: &VectorCache) -> anyhow::Result<Ingested> {
    let dir = tempfile::tempdir()?;
    let start = haystack.docs.first().map_or_else(Utc::now, |d| d.at);
    let clock = Arc::new(FixedClock::new(start));
    let engine = Engine::open(
        Config::new(dir.path())
            .model(ModelSource::Custom(cache.cached_embedder()))
            .clock(clock.clone())
            // The harness measures recall over what it wrote.
            .proposals(ProposalPolicy::direct()),
    )
    .await?;
    let mut units: HashMap<Uuid, Vec<String>> = HashMap::new();
    let mut memory_of = HashMap::new();
    let mut dates = HashMap::new();
    let mut refused = 0;
    // One batch per date (a session), in order, with the clock at that date.
    let mut i = 0;
    let mut sessions = 0;
    while i < haystack.docs.len() {
        let at = haystack.docs[i].at;
        let mut j = i;
        while j < haystack.docs.len() && haystack.docs[j].at == at {
            j += 1;
        }
        clock.set(at);
        let batch: Vec<&Doc> = haystack.docs[i..j]
            .iter()
            .filter(|d| !d.text.trim().is_empty())
            .collect();
        refused += (j - i) - batch.len();
        sessions += 1;
        let session = haystack.consolidate.then(|| format!("s{sessions}"));
        let session = session.as_deref();
        let writes: Vec<NewMemory> = batch
            .iter()
            .map(|d| write_of(d, haystack.kind, session))
            .collect();
        let outcomes: Vec<Option<Uuid>> = match engine.remember_many(writes).await {
            Ok(o) => o.iter().map(|o| Some(o.id())).collect(),
            Err(e) => {
                // A batch with one unacceptable item is refused whole; write
                // one by one so the rest still goes in.
                tracing::warn!(haystack = %haystack.name, error = %e, "batch refused; writing one by one");
                let mut one_by_one = Vec::with_capacity(batch.len());
                for d in &batch {
                    one_by_one.push(
                        engine
                            .remember(write_of(d, haystack.kind, session))
                            .await
                            .ok()
                            .map(|o| o.id()),
                    );
                }
                one_by_one
            }
        };
        for (d, id) in batch.iter().zip(outcomes) {
            dates.insert(d.unit.clone(), d.at);
            let Some(id) = id else {
                refused += 1;
                continue;
            };
            units.entry(id).or_default().push(d.unit.clone());
            memory_of.insert(d.unit.clone(), id);
        }
        i = j;
    }
    let mut consolidated = 0;
    if haystack.consolidate {
        // A fact quotes one of its sources verbatim: a hit on it is
        // credited with that source's units.
        let pass = engine.consolidate(TENANT).execute().await?;
        for outcome in pass.proposals.iter().filter(|p| p.applied) {
            if let (
                recall::Proposal::Add {
                    derived_from,
                    content,
                    ..
                },
                Some(fact),
            ) = (&outcome.proposal, outcome.memory)
            {
                let mut quoted = Vec::new();
                for id in derived_from {
                    if engine.get(TENANT, *id).await?.content == *content {
                        quoted.extend(units.get(id).cloned().unwrap_or_default());
                    }
                }
                units.entry(fact).or_default().extend(quoted);
            }
            // Folded copies leave recall: the memory they folded into
            // answers for them, as a write-time dedup would have.
            if let recall::Proposal::Fold { into, copies } = &outcome.proposal {
                for copy in copies {
                    let moved = units.get(copy).cloned().unwrap_or_default();
                    units.entry(*into).or_default().extend(moved);
                }
            }
            consolidated += 1;
        }
    }
    engine.flush().await?;
    Ok(Ingested {
        engine,
        _dir: dir,
        units,
        memory_of,
        dates,
        questions: haystack.questions,
        refused,
        consolidated,
    })
}

/// Every text a haystack embeds: its docs (as written), their sentences
/// ([`recall::sentences`]) and its questions.
pub fn texts(haystack: &Haystack) -> impl Iterator<Item = String> + '_ {
    haystack
        .docs
        .iter()
        .flat_map(|d| {
            std::iter::once(clip(&d.text).to_string()).chain(recall::sentences(clip(&d.text)))
        })
        .chain(haystack.questions.iter().map(|q| q.text.clone()))
}

/// The engine's scorer with every hit kept (no abstention gate, hit
/// floors or decay) and no newer-version lift: the baselines' base.
pub fn ungated() -> ScoringConfig {
    ScoringConfig {
        min_evidence_cosine: 0.0,
        min_evidence_margin: None,
        min_evidence_lexical: 0.0,
        question_evidence: None,
        question_weight: 1.0,
        min_relevance: 0.0,
        min_hit_relevance: 0.0,
        min_hit_share: 0.0,
        decay_floor: 1.0,
        update_similarity: None,
        unknown_names: false,
        ..ScoringConfig::default()
    }
}

/// A baseline's base: [`ungated`] with every kind weighing the same, no
/// drift demotion and the whole lexical half whatever the cosine, so a half
/// of the relevance ranks on its own. (LongMemEval and LoCoMo write one
/// kind and mark no drift.)
fn half() -> ScoringConfig {
    ScoringConfig {
        kind_weights: recall::KindWeights::flat(),
        drift_factor: 1.0,
        lexical_support: None,
        ..ungated()
    }
}

/// A named scorer setting.
#[derive(Debug, Clone, Serialize)]
pub struct Ranker {
    /// `engine`, `dense`, `bm25`, or a sweep point.
    pub name: String,
    /// The settings.
    pub scoring: ScoringConfig,
    /// Whether abstention and newest-first are meaningful for it.
    pub judged_on_abstention: bool,
}

impl Ranker {
    /// The engine with these settings.
    pub fn engine(name: &str, scoring: ScoringConfig) -> Ranker {
        Ranker {
            name: name.into(),
            scoring,
            judged_on_abstention: true,
        }
    }

    /// Cosine only: no lexical part, and none of the engine's other
    /// factors (no decay, kind weights, drift demotion, abstention gate or
    /// newer-version lift).
    pub fn dense() -> Ranker {
        Ranker {
            name: "dense".into(),
            scoring: ScoringConfig {
                vector_weight: 1.0,
                lexical_weight: 0.0,
                ..half()
            },
            judged_on_abstention: false,
        }
    }

    /// BM25 only (saturation is monotone, so the order is raw BM25's), and
    /// none of the engine's other factors, as for [`Ranker::dense`].
    pub fn bm25() -> Ranker {
        Ranker {
            name: "bm25".into(),
            scoring: ScoringConfig {
                vector_weight: 0.0,
                lexical_weight: 1.0,
                bm25: Bm25Normalization::Saturation { k: 10.0 },
                ..half()
            },
            judged_on_abstention: false,
        }
    }
}

/// What one ranker scored over a set of haystacks.
#[derive(Debug, Default)]
pub struct Outcome {
    tally: Tally,
    abstention_right: usize,
    abstention_n: usize,
    abstained_on_answerable: usize,
    answerable: usize,
    abs_abstained: usize,
    abs_n: usize,
    newest_first: usize,
    newest_n: usize,
    /// One JSON line per question: what was asked, what came back and why.
    pub traces: Vec<serde_json::Value>,
}

/// A ranker's report: means per group and overall, and the two
/// judgement rates.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The ranker.
    pub ranker: String,
    /// Group → means (abstention questions excluded), `overall` included.
    pub groups: BTreeMap<String, Summary>,
    /// Share of all questions where the engine abstained exactly when it
    /// should (`_abs`: abstained; others: did not).
    pub abstention_accuracy: Option<f64>,
    /// Share of `_abs` questions abstained on.
    pub abstained_when_unanswerable: Option<f64>,
    /// Share of answerable questions wrongly abstained on.
    pub abstained_when_answerable: Option<f64>,
    /// Share of knowledge-update questions whose first relevant hit holds
    /// the newest evidence.
    pub ku_newest_first: Option<f64>,
}

fn share(right: usize, n: usize) -> Option<f64> {
    (n > 0).then(|| right as f64 / n as f64)
}

impl Outcome {
    /// The report.
    pub fn report(&self, ranker: &Ranker) -> Report {
        let judged = ranker.judged_on_abstention;
        Report {
            ranker: ranker.name.clone(),
            groups: self.tally.summaries(),
            abstention_accuracy: share(self.abstention_right, self.abstention_n).filter(|_| judged),
            abstained_when_unanswerable: share(self.abs_abstained, self.abs_n).filter(|_| judged),
            abstained_when_answerable: share(self.abstained_on_answerable, self.answerable)
                .filter(|_| judged),
            ku_newest_first: share(self.newest_first, self.newest_n),
        }
    }
}

impl Report {
    /// The overall means with the judgement rates, as the JSON `overall` object.
    pub fn overall_json(&self) -> serde_json::Value {
        let mut o = serde_json::Map::new();
        if let Some(s) = self.groups.get(OVERALL) {
            o.insert("n".into(), s.n.into());
            for (k, v) in &s.means {
                o.insert(k.clone(), (*v).into());
            }
        }
        o.insert(
            "abstention_accuracy".into(),
            self.abstention_accuracy.into(),
        );
        o.insert(
            "abstained_when_unanswerable".into(),
            self.abstained_when_unanswerable.into(),
        );
        o.insert(
            "abstained_when_answerable".into(),
            self.abstained_when_answerable.into(),
        );
        o.insert("ku_newest_first".into(), self.ku_newest_first.into());
        serde_json::Value::Object(o)
    }

    /// An overall metric (`recall_any@10` …), or NaN when absent.
    pub fn overall(&self, metric: &str) -> f64 {
        self.groups
            .get(OVERALL)
            .and_then(|s| s.means.get(metric))
            .copied()
            .unwrap_or(f64::NAN)
    }
}

impl Ingested {
    /// Recalls every question with `ranker` and adds the scores to `outcome`.
    pub async fn evaluate(
        &self,
        ranker: &Ranker,
        ks: &[usize],
        cache: &VectorCache,
        outcome: &mut Outcome,
    ) -> anyhow::Result<()> {
        let depth = ks.iter().copied().max().unwrap_or(10);
        for q in &self.questions {
            let mut recall = self
                .engine
                .recall(TENANT, q.text.clone())
                .read([BANK])
                .limit(depth)
                .now(q.at)
                .scoring(ranker.scoring.clone());
            if let Some(v) = cache.get(&q.text) {
                recall = recall.query_vector(v.clone());
            }
            let result = recall.execute().await?;
            let abstained = result.abstained || result.hits.is_empty();
            outcome
                .traces
                .push(self.trace(&ranker.name, q, &result, abstained));
            outcome.abstention_n += 1;
            outcome.abstention_right += usize::from(abstained == q.abstain);
            if q.abstain {
                outcome.abs_n += 1;
                outcome.abs_abstained += usize::from(abstained);
                continue;
            }
            outcome.answerable += 1;
            outcome.abstained_on_answerable += usize::from(abstained);
            let gold: Vec<&str> = q.gold.iter().map(String::as_str).collect();
            let (ranked, ideal) = ranked_units(&result.hits, &self.units, &gold, &self.memory_of);
            let scores = score_question(&ranked, &gold, ideal, ks);
            outcome.tally.add(&q.group, &scores);
            if q.newest_first {
                outcome.newest_n += 1;
                outcome.newest_first += usize::from(self.newest_ranks_first(&ranked, &gold));
            }
        }
        Ok(())
    }

    /// The per-question record: the question, its gold, and the top hits
    /// with their units and score breakdown.
    fn trace(
        &self,
        ranker: &str,
        q: &Question,
        result: &recall::RecallResult,
        abstained: bool,
    ) -> serde_json::Value {
        let hits: Vec<serde_json::Value> = result
            .hits
            .iter()
            .map(|h| {
                let units = self.units.get(&h.memory.id).cloned().unwrap_or_default();
                serde_json::json!({
                    "units": units,
                    "gold": units.iter().any(|u| q.gold.contains(u)),
                    "cosine": h.breakdown.cosine(),
                    "bm25": h.breakdown.bm25(),
                    "b": h.breakdown.b(),
                    "rel": h.breakdown.rel(),
                    "age_days": (q.at - h.memory.last_confirmed_at).num_seconds() as f64 / 86_400.0,
                    "decay": h.breakdown.decay(),
                    "score": h.score,
                    "text": h.memory.content.chars().take(120).collect::<String>(),
                })
            })
            .collect();
        serde_json::json!({
            "ranker": ranker,
            "id": q.id,
            "group": q.group,
            "question": q.text,
            "gold": q.gold,
            "should_abstain": q.abstain,
            "abstained": abstained,
            "candidates": result.candidates,
            "background": result.background,
            "hits": hits,
        })
    }

    /// Whether the first hit holding gold holds the newest gold unit.
    fn newest_ranks_first(&self, ranked: &[Vec<&str>], gold: &[&str]) -> bool {
        let Some(newest) = gold.iter().filter_map(|g| self.dates.get(*g)).max() else {
            return false;
        };
        ranked
            .iter()
            .find(|units| units.iter().any(|u| gold.contains(u)))
            .is_some_and(|units| {
                units
                    .iter()
                    .any(|u| gold.contains(u) && self.dates.get(*u) == Some(newest))
            })
    }
}

/// Ingests every haystack and scores every ranker on it, with a progress bar.
pub async fn run(
    haystacks: Vec<Haystack>,
    rankers: &[Ranker],
    ks: &[usize],
    cache: &mut VectorCache,
    progress: bool,
) -> anyhow::Result<(Vec<Report>, RunStats, Vec<Outcome>)> {
    let all: Vec<String> = haystacks.iter().flat_map(texts).collect();
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let embed_started = std::time::Instant::now();
    cache.fill(&all, progress)?;
    let embed_s = embed_started.elapsed().as_secs_f64();
    let mut outcomes: Vec<Outcome> = rankers.iter().map(|_| Outcome::default()).collect();
    let bar = if progress {
        crate::progress::bar(haystacks.len() as u64, "haystacks")
    } else {
        indicatif::ProgressBar::hidden()
    };
    let mut stats = RunStats {
        embed_s,
        ..RunStats::default()
    };
    for haystack in haystacks {
        stats.docs += haystack.docs.len();
        stats.questions += haystack.questions.len();
        let t = std::time::Instant::now();
        let ingested = ingest(haystack, cache).await?;
        stats.ingest_s += t.elapsed().as_secs_f64();
        stats.refused += ingested.refused;
        stats.consolidated += ingested.consolidated;
        stats.memories += ingested.units.len();
        let t = std::time::Instant::now();
        for (ranker, outcome) in rankers.iter().zip(&mut outcomes) {
            ingested.evaluate(ranker, ks, cache, outcome).await?;
        }
        stats.recall_s += t.elapsed().as_secs_f64();
        bar.inc(1);
    }
    bar.finish_and_clear();
    let reports = rankers
        .iter()
        .zip(&outcomes)
        .map(|(r, o)| o.report(r))
        .collect();
    Ok((reports, stats, outcomes))
}

/// Sizes and times of a run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunStats {
    /// Documents offered.
    pub docs: usize,
    /// Memories they became (fewer when repeats deduplicated).
    pub memories: usize,
    /// Documents not written (empty text, refused input).
    pub refused: usize,
    /// Proposals consolidation passes applied (`--consolidate`).
    pub consolidated: usize,
    /// Questions asked (per ranker).
    pub questions: usize,
    /// Seconds embedding texts not yet cached.
    pub embed_s: f64,
    /// Seconds writing haystacks (engine opens included).
    pub ingest_s: f64,
    /// Seconds recalling, all rankers.
    pub recall_s: f64,
}
