//! `recall-bench corpus`: the whole write-and-recall path on a seeded
//! agent-memory corpus with known answers ([`recall_datasets::corpus`]):
//! several tenants, banks, kinds and elements over a year, with exact
//! repeats, paraphrases, knowledge updates and drifted elements.
//!
//! Every write goes through [`Engine::remember_many`] in daily batches with
//! the clock at that day's last write, then the drifts are marked, then
//! every question is recalled at the end of the year by each ranker (the
//! engine's defaults, dense, BM25), reading all of its tenant's banks.
//!
//! What it reports:
//! - **the write path**: repeats deduplicated into their original;
//!   paraphrases deduplicated into it or stored with it among their similar
//!   memories; updates stored apart (an update deduplicated into the value
//!   it replaces loses the new value); distinct facts merged into another
//!   memory (lost); deduplications across tenants (must be 0);
//! - **recall** per group (`plain`, `repeated`, `paraphrased`, `updated`,
//!   `drifted`, `task`: what to watch out for before a change, whose
//!   answers are pitfalls and conventions, and `relearned`: a fact of a
//!   drifted service written again with a new value after the drift):
//!   recall_any@k, recall_all@k, nDCG@k, MRR against the gold
//!   writes (a hit credits every write held by its memory), abstention
//!   accuracy over the answerable and the `unanswerable` questions,
//!   newest-first on the updated facts (the first hit holding the answer
//!   holds the update and no stale value), the share of drifted answers
//!   shown with their VERIFY flag, and hits from another tenant (must be 0).
//!
//! With `--vectors model` (default) the engine embeds through the vector
//! cache, so a corpus is embedded once; `--vectors synthetic` gives every
//! write and question a clustered vector with the corpus's structure
//! ([`Corpus::synthetic_vectors`]) and no model, for runs at sizes the
//! model cannot embed in time.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use recall::{
    Config, Engine, FixedClock, HashEmbedder, Kind, KindWeights, ModelSource, NewMemory,
    ProposalPolicy, Remembered, ScoringConfig,
};
use recall_datasets::corpus::{Corpus, CorpusConfig, CorpusQuery, CorpusWrite, Role, generate};
use serde_json::json;
use uuid::Uuid;

use crate::eval::{Ranker, Report};
use crate::metrics::{Tally, ranked_units, score_question};
use crate::progress::bar;
use crate::report::{cell, markdown, markdown_path, write_json};
use crate::speed::DIM;
use crate::vector_cache::{self, VectorCache};

/// Where a corpus run's vectors come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum VectorMode {
    /// The embedding model, through the on-disk vector cache.
    Model,
    /// Clustered synthetic vectors (no model; the machinery at scale).
    Synthetic,
}

/// `recall-bench corpus`.
#[derive(Debug, clap::Args)]
pub struct CorpusArgs {
    /// Distinct facts over all tenants (repeats, paraphrases, updates on top).
    #[arg(long, default_value_t = 3_000)]
    pub facts: usize,
    /// Tenants.
    #[arg(long, default_value_t = 3)]
    pub tenants: usize,
    /// Questions over all tenants.
    #[arg(long, default_value_t = 300)]
    pub queries: usize,
    /// Questions before a change ("what should I watch out for?"), over
    /// all tenants, on top of `--queries`: group `task`.
    #[arg(long, default_value_t = 60)]
    pub tasks: usize,
    /// Facts of each drifted service re-learned (with a new value) after
    /// the drift, each asked about: group `relearned`.
    #[arg(long, default_value_t = 4)]
    pub relearned_per_drift: usize,
    /// Seed; same seed and sizes, same corpus.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Share of facts written again word for word.
    #[arg(long, default_value_t = 0.05)]
    pub repeat_share: f64,
    /// Share of facts written again in other words.
    #[arg(long, default_value_t = 0.05)]
    pub paraphrase_share: f64,
    /// Share of facts updated with a new value.
    #[arg(long, default_value_t = 0.05)]
    pub update_share: f64,
    /// Share of services whose code drifts after the last write about them.
    #[arg(long, default_value_t = 0.1)]
    pub drift_share: f64,
    /// Where the vectors come from.
    #[arg(long, value_enum, default_value = "model")]
    pub vectors: VectorMode,
    /// Cut-offs, comma-separated.
    #[arg(long = "k", value_delimiter = ',', default_value = "1,5,10")]
    pub ks: Vec<usize>,
    /// Where the JSON goes (the markdown summary goes beside it, `.md`).
    #[arg(long, default_value = "bench-results/corpus.json")]
    pub json: PathBuf,
    /// The model directory (default: `$RECALL_MODEL_DIR`, `./models`, …).
    #[arg(long)]
    pub model_dir: Option<PathBuf>,
    /// The vector cache directory (default `$RECALL_VECTOR_CACHE` or
    /// `~/.cache/recall/vectors`).
    #[arg(long)]
    pub cache: Option<PathBuf>,
    /// No progress bars.
    #[arg(long)]
    pub quiet: bool,
    /// Also rank with the engine minus one factor at a time (kind weights,
    /// decay, drift) and with the fusion alone.
    #[arg(long)]
    pub ablations: bool,
}

impl CorpusArgs {
    fn config(&self) -> CorpusConfig {
        CorpusConfig {
            seed: self.seed,
            facts: self.facts,
            tenants: self.tenants,
            queries: self.queries,
            task_queries: self.tasks,
            relearned_per_drift: self.relearned_per_drift,
            repeat_share: self.repeat_share,
            paraphrase_share: self.paraphrase_share,
            update_share: self.update_share,
            drift_share: self.drift_share,
            ..CorpusConfig::default()
        }
    }
}

/// What the write path did with each role of write: `(right, n)` pairs.
#[derive(Debug, Default, Clone, Copy, PartialEq, serde::Serialize)]
pub struct WritePath {
    /// Repeats deduplicated into their original.
    pub repeats_deduplicated: (usize, usize),
    /// Paraphrases deduplicated into their original.
    pub paraphrases_deduplicated: (usize, usize),
    /// Paraphrases stored with their original among `similar_to`.
    pub paraphrases_flagged_similar: (usize, usize),
    /// Updates stored as memories of their own.
    pub updates_stored_apart: (usize, usize),
    /// Updates stored with the value they replace among `similar_to`.
    pub updates_flagged_similar: (usize, usize),
    /// First statements of distinct facts deduplicated into another memory.
    pub facts_merged: (usize, usize),
    /// Writes deduplicated into a memory of another tenant.
    pub cross_tenant_merges: usize,
}

fn rate((right, n): (usize, usize)) -> Option<f64> {
    (n > 0).then(|| right as f64 / n as f64)
}

/// A distinct fact or an update that the write path deduplicated into
/// another memory: its text was not stored.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Merge {
    /// What was written.
    pub written: String,
    /// The memory it was deduplicated into.
    pub into: String,
    /// Their cosine, as the write path measured it.
    pub cosine: f32,
}

/// A corpus written into a fresh engine.
pub struct Written {
    engine: Engine,
    _dir: tempfile::TempDir,
    /// Memory → the keys of the writes it holds.
    keys_of: HashMap<Uuid, Vec<String>>,
    /// Write key → its memory.
    memory_of: HashMap<String, Uuid>,
    /// Tenant → the banks it wrote.
    banks: BTreeMap<String, BTreeSet<String>>,
    /// What the write path did.
    pub write_path: WritePath,
    /// Facts and updates deduplicated into another memory.
    pub merges: Vec<Merge>,
}

fn new_memory(w: &CorpusWrite, vector: Option<&Vec<f32>>) -> anyhow::Result<NewMemory> {
    let kind: Kind = w.kind.parse()?;
    let mut m =
        NewMemory::new(w.tenant.clone(), w.bank.clone(), kind, w.content.clone()).observed_at(w.at);
    if let Some(e) = &w.element {
        m = m.element(e.clone());
    }
    if let Some(v) = vector {
        m = m.vector(v.clone());
    }
    Ok(m)
}

/// Writes `corpus` (in daily batches, the clock at each day's last write)
/// and marks its drifts. `vectors`, when given, are the writes' own.
pub async fn write(
    corpus: &Corpus,
    model: ModelSource,
    vectors: Option<&[Vec<f32>]>,
    progress: bool,
) -> anyhow::Result<Written> {
    let dir = tempfile::tempdir()?;
    let start = corpus.writes.first().map_or(corpus.asked_at, |w| w.at);
    let clock = Arc::new(FixedClock::new(start));
    // The harness measures recall over what it wrote: nothing waits for review.
    let config = Config::new(dir.path())
        .model(model)
        .clock(clock.clone())
        .proposals(ProposalPolicy::direct());
    let engine = Engine::open(config).await?;
    let bar = progress.then(|| bar(corpus.writes.len() as u64, "writing"));
    let mut outcomes: Vec<Remembered> = Vec::with_capacity(corpus.writes.len());
    let mut i = 0;
    while i < corpus.writes.len() {
        let day = corpus.writes[i].at.date_naive();
        let mut j = i;
        while j < corpus.writes.len() && corpus.writes[j].at.date_naive() == day {
            j += 1;
        }
        clock.set(corpus.writes[j - 1].at);
        let batch = corpus.writes[i..j]
            .iter()
            .enumerate()
            .map(|(n, w)| new_memory(w, vectors.and_then(|v| v.get(i + n))))
            .collect::<anyhow::Result<Vec<_>>>()?;
        outcomes.extend(engine.remember_many(batch).await?);
        if let Some(bar) = &bar {
            bar.inc((j - i) as u64);
        }
        i = j;
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    for d in &corpus.drifts {
        clock.set(d.at);
        engine.mark_drift(&d.tenant, &d.element, Some(d.at)).await?;
    }
    clock.set(corpus.asked_at);
    engine.flush().await?;

    let mut keys_of: HashMap<Uuid, Vec<String>> = HashMap::new();
    let mut memory_of = HashMap::new();
    let mut tenant_of: HashMap<Uuid, &str> = HashMap::new();
    let mut banks: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut path = WritePath::default();
    let mut text_of: HashMap<Uuid, &str> = HashMap::new();
    let mut merges = Vec::new();
    for (w, outcome) in corpus.writes.iter().zip(&outcomes) {
        let id = outcome.id();
        text_of.entry(id).or_insert(w.content.as_str());
        if let Remembered::Deduplicated { cosine, .. } = outcome
            && matches!(w.role, Role::Original | Role::Update(_))
        {
            merges.push(Merge {
                written: w.content.clone(),
                into: text_of.get(&id).copied().unwrap_or_default().to_string(),
                cosine: *cosine,
            });
        }
        keys_of.entry(id).or_default().push(w.key.clone());
        memory_of.insert(w.key.clone(), id);
        banks
            .entry(w.tenant.clone())
            .or_default()
            .insert(w.bank.clone());
        let owner = *tenant_of.entry(id).or_insert(w.tenant.as_str());
        path.cross_tenant_merges += usize::from(owner != w.tenant);
        let original = |of: &String| memory_of.get(of).copied();
        let (deduplicated_into, similar) = match outcome {
            Remembered::Deduplicated { id, .. } => (Some(*id), Vec::new()),
            Remembered::Stored { similar_to, .. } | Remembered::Proposed { similar_to, .. } => {
                (None, similar_to.iter().map(|s| s.id).collect())
            }
        };
        match &w.role {
            Role::Original => count(&mut path.facts_merged, deduplicated_into.is_some()),
            Role::Repeat(of) => count(
                &mut path.repeats_deduplicated,
                deduplicated_into.is_some() && deduplicated_into == original(of),
            ),
            Role::Paraphrase(of) => {
                let of = original(of);
                count(
                    &mut path.paraphrases_deduplicated,
                    deduplicated_into.is_some() && deduplicated_into == of,
                );
                count(
                    &mut path.paraphrases_flagged_similar,
                    of.is_some_and(|o| similar.contains(&o)),
                );
            }
            Role::Update(of) => {
                let of = original(of);
                count(&mut path.updates_stored_apart, deduplicated_into.is_none());
                count(
                    &mut path.updates_flagged_similar,
                    of.is_some_and(|o| similar.contains(&o)),
                );
            }
        }
    }
    Ok(Written {
        engine,
        _dir: dir,
        keys_of,
        memory_of,
        banks,
        write_path: path,
        merges,
    })
}

/// One ranker's judgement of every question.
#[derive(Debug, Default)]
struct Judged {
    tally: Tally,
    abstained_right: (usize, usize),
    abstained_on_unanswerable: (usize, usize),
    abstained_on_answerable: (usize, usize),
    newest_first: (usize, usize),
    drift_flagged: (usize, usize),
    foreign_hits: usize,
    /// One JSON line per question: what was asked, what came back and why.
    traces: Vec<serde_json::Value>,
}

impl Judged {
    fn report(&self, ranker: &Ranker) -> Report {
        let judged = |t| rate(t).filter(|_| ranker.judged_on_abstention);
        Report {
            ranker: ranker.name.clone(),
            groups: self.tally.summaries(),
            abstention_accuracy: judged(self.abstained_right),
            abstained_when_unanswerable: judged(self.abstained_on_unanswerable),
            abstained_when_answerable: judged(self.abstained_on_answerable),
            ku_newest_first: rate(self.newest_first),
        }
    }
}

impl Written {
    /// Recalls every question with `ranker`. `query_vectors`, when given,
    /// are the questions' own (in order).
    async fn judge(
        &self,
        queries: &[CorpusQuery],
        query_vectors: Option<&[Vec<f32>]>,
        ranker: &Ranker,
        ks: &[usize],
        now: chrono::DateTime<chrono::Utc>,
    ) -> anyhow::Result<Judged> {
        let depth = ks.iter().copied().max().unwrap_or(10);
        let mut judged = Judged::default();
        for (i, q) in queries.iter().enumerate() {
            let banks = self.banks.get(&q.tenant).cloned().unwrap_or_default();
            let mut recall = self
                .engine
                .recall(q.tenant.clone(), q.text.clone())
                .read(banks)
                .limit(depth)
                .now(now)
                .scoring(ranker.scoring.clone());
            if let Some(v) = query_vectors.and_then(|v| v.get(i)) {
                recall = recall.query_vector(v.clone());
            }
            let result = recall.execute().await?;
            judged.foreign_hits += result
                .hits
                .iter()
                .filter(|h| h.memory.tenant != q.tenant)
                .count();
            let abstained = result.abstained || result.hits.is_empty();
            judged
                .traces
                .push(self.trace(&ranker.name, q, &result, abstained));
            let unanswerable = q.gold.is_empty();
            count(&mut judged.abstained_right, abstained == unanswerable);
            if unanswerable {
                count(&mut judged.abstained_on_unanswerable, abstained);
                continue;
            }
            count(&mut judged.abstained_on_answerable, abstained);
            let gold: Vec<&str> = q.gold.iter().map(String::as_str).collect();
            let (ranked, ideal) = ranked_units(&result.hits, &self.keys_of, &gold, &self.memory_of);
            judged
                .tally
                .add(q.group, &score_question(&ranked, &gold, ideal, ks));
            if q.group == "updated" {
                // The first hit that says anything about the fact must say
                // the new value and only that. (A `relearned` fact's old
                // value also drifted: its group's recall@1 says the same.)
                let first = ranked.iter().find(|keys| {
                    keys.iter()
                        .any(|k| q.gold.iter().chain(&q.stale).any(|g| g == k))
                });
                let newest = first.is_some_and(|keys| {
                    keys.iter().any(|k| gold.contains(k))
                        && !keys.iter().any(|k| q.stale.iter().any(|s| s == k))
                });
                count(&mut judged.newest_first, newest);
            }
            if q.drifted {
                for (h, keys) in result.hits.iter().zip(&ranked) {
                    if keys.iter().any(|k| gold.contains(k)) {
                        count(&mut judged.drift_flagged, h.memory.verify);
                    }
                }
            }
        }
        Ok(judged)
    }

    /// The per-question record: the question, its gold and stale writes,
    /// and the hits with the writes they hold and their score breakdown.
    fn trace(
        &self,
        ranker: &str,
        q: &CorpusQuery,
        result: &recall::RecallResult,
        abstained: bool,
    ) -> serde_json::Value {
        let hits: Vec<serde_json::Value> = result
            .hits
            .iter()
            .map(|h| {
                let keys = self.keys_of.get(&h.memory.id).cloned().unwrap_or_default();
                let b = &h.breakdown;
                json!({
                    "keys": keys,
                    "gold": keys.iter().any(|k| q.gold.contains(k)),
                    "stale": keys.iter().any(|k| q.stale.contains(k)),
                    "kind": h.memory.kind.as_str(),
                    "cosine": b.cosine(),
                    "b": b.b(),
                    "rel": b.rel(),
                    "kind_weight": b.kind_weight(),
                    "decay": b.decay(),
                    "drift": b.drift(),
                    "verify": h.memory.verify,
                    "score": h.score,
                    "text": h.memory.content,
                })
            })
            .collect();
        json!({
            "ranker": ranker,
            "id": q.id,
            "group": q.group,
            "question": q.text,
            "gold": q.gold,
            "stale": q.stale,
            "abstained": abstained,
            "hits": hits,
        })
    }
}

fn count(tally: &mut (usize, usize), yes: bool) {
    tally.0 += usize::from(yes);
    tally.1 += 1;
}

/// Every text the model embeds for `corpus`: writes, their sentences, questions.
fn texts(corpus: &Corpus) -> Vec<String> {
    corpus
        .writes
        .iter()
        .flat_map(|w| std::iter::once(w.content.clone()).chain(recall::sentences(&w.content)))
        .chain(corpus.queries.iter().map(|q| q.text.clone()))
        .collect()
}

/// The rankers: the engine's defaults, dense and BM25; with `ablations`,
/// also the engine without one factor at a time (kind weights all 1, the
/// same without drift demotion either, no decay, no drift demotion, no
/// newer-version lift, no unknown-name rule, the lift of facts by
/// similarity alone without `update_relevance_share`) and the fusion alone
/// (no gate, floors, decay or lift), to see what each factor does to the
/// order.
fn rankers(ablations: bool) -> Vec<Ranker> {
    let mut rankers = vec![
        Ranker::engine("engine", ScoringConfig::default()),
        Ranker::dense(),
        Ranker::bm25(),
    ];
    if ablations {
        let defaults = ScoringConfig::default;
        rankers.extend([
            Ranker::engine(
                "engine, kinds 1",
                ScoringConfig {
                    kind_weights: KindWeights::flat(),
                    ..defaults()
                },
            ),
            Ranker::engine(
                "engine, kinds 1, no drift",
                ScoringConfig {
                    kind_weights: KindWeights::flat(),
                    drift_factor: 1.0,
                    ..defaults()
                },
            ),
            Ranker::engine(
                "engine, no decay",
                ScoringConfig {
                    decay_floor: 1.0,
                    ..defaults()
                },
            ),
            Ranker::engine(
                "engine, no drift",
                ScoringConfig {
                    drift_factor: 1.0,
                    ..defaults()
                },
            ),
            Ranker::engine(
                "engine, no lift",
                ScoringConfig {
                    update_similarity: None,
                    ..defaults()
                },
            ),
            Ranker::engine(
                "engine, no unknown-name rule",
                ScoringConfig {
                    unknown_names: false,
                    ..defaults()
                },
            ),
            Ranker::engine(
                "engine, lift by similarity",
                ScoringConfig {
                    update_relevance_share: None,
                    ..defaults()
                },
            ),
            Ranker::engine("fusion", crate::eval::ungated()),
        ]);
    }
    rankers
}

/// A corpus run's results.
pub struct CorpusRun {
    /// One report per ranker, the engine's first.
    pub reports: Vec<Report>,
    /// What the write path did.
    pub write_path: WritePath,
    /// Drifted answers among the engine's hits shown with VERIFY: `(flagged, n)`.
    pub drift_flagged: (usize, usize),
    /// Hits from another tenant, all rankers together.
    pub foreign_hits: usize,
    /// Every ranker's answer to every question.
    pub traces: Vec<serde_json::Value>,
    /// Facts and updates deduplicated into another memory.
    pub merges: Vec<Merge>,
}

/// Writes `corpus` and judges every ranker on its questions.
pub async fn run_corpus(
    corpus: &Corpus,
    vectors: VectorMode,
    cache: Option<&mut VectorCache>,
    ks: &[usize],
    ablations: bool,
    progress: bool,
) -> anyhow::Result<CorpusRun> {
    let synthetic = (vectors == VectorMode::Synthetic).then(|| corpus.synthetic_vectors(7, DIM));
    let model = match (&synthetic, cache) {
        (Some(_), _) => ModelSource::Custom(Arc::new(HashEmbedder::new(DIM))),
        (None, Some(cache)) => {
            let texts = texts(corpus);
            let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
            cache.fill(&texts, progress)?;
            ModelSource::Custom(cache.cached_embedder())
        }
        (None, None) => anyhow::bail!("a model run needs the vector cache"),
    };
    let written = write(
        corpus,
        model,
        synthetic.as_ref().map(|s| s.0.as_slice()),
        progress,
    )
    .await?;
    let mut reports = Vec::new();
    let (mut drift_flagged, mut foreign_hits, mut traces) = ((0, 0), 0, Vec::new());
    for (n, ranker) in rankers(ablations).iter().enumerate() {
        let query_vectors = synthetic.as_ref().map(|s| s.1.as_slice());
        let judged = written
            .judge(&corpus.queries, query_vectors, ranker, ks, corpus.asked_at)
            .await?;
        if n == 0 {
            drift_flagged = judged.drift_flagged;
        }
        foreign_hits += judged.foreign_hits;
        reports.push(judged.report(ranker));
        traces.extend(judged.traces);
    }
    Ok(CorpusRun {
        reports,
        write_path: written.write_path,
        drift_flagged,
        foreign_hits,
        traces,
        merges: written.merges,
    })
}

/// The write-path table.
fn write_path_markdown(w: &WritePath) -> String {
    let rows = [
        (
            "repeats deduplicated into their original",
            w.repeats_deduplicated,
        ),
        (
            "paraphrases deduplicated into their original",
            w.paraphrases_deduplicated,
        ),
        (
            "paraphrases stored beside it, flagged similar",
            w.paraphrases_flagged_similar,
        ),
        (
            "updates stored apart (not merged into the old value)",
            w.updates_stored_apart,
        ),
        (
            "updates flagged similar to the old value",
            w.updates_flagged_similar,
        ),
        (
            "distinct facts merged into another memory (lost)",
            w.facts_merged,
        ),
    ];
    let mut out = String::from("| write path | share | of |\n|---|---:|---:|\n");
    for (label, t) in rows {
        out.push_str(&format!("| {label} | {} | {} |\n", cell(rate(t)), t.1));
    }
    out.push_str(&format!(
        "| deduplications across tenants | {} | |\n",
        w.cross_tenant_merges
    ));
    out
}

/// Runs the command.
pub async fn corpus_command(args: &CorpusArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let corpus = generate(&args.config());
    let mut cache = match args.vectors {
        VectorMode::Model => {
            let dir = args.cache.clone().unwrap_or_else(vector_cache::default_dir);
            let embedder = vector_cache::embedder(args.model_dir.as_deref())?;
            Some(VectorCache::open(&dir, embedder)?)
        }
        VectorMode::Synthetic => None,
    };
    let run = run_corpus(
        &corpus,
        args.vectors,
        cache.as_mut(),
        &args.ks,
        args.ablations,
        !args.quiet,
    )
    .await?;
    let metrics = crate::metrics::metric_columns(&args.ks);
    let groups: BTreeMap<&str, usize> = corpus.queries.iter().fold(BTreeMap::new(), |mut m, q| {
        *m.entry(q.group).or_default() += 1;
        m
    });
    let engine = &run.reports[0];
    let md = format!(
        "# Agent corpus: {} facts, {} tenants, seed {}, {:?} vectors\n\n{} writes, {} drifts, {} questions ({}); {:.1} s.\n\n{}\n{}\n| engine | |\n|---|---:|\n| drifted answers shown with VERIFY | {} |\n| abstained when unanswerable | {} |\n| abstained when answerable | {} |\n| hits from another tenant (all rankers) | {} |\n\nKU newest-first: the first hit about an updated fact holds the update and no stale value.\n",
        args.facts,
        args.tenants,
        args.seed,
        args.vectors,
        corpus.writes.len(),
        corpus.drifts.len(),
        corpus.queries.len(),
        groups
            .iter()
            .map(|(g, n)| format!("{g} {n}"))
            .collect::<Vec<_>>()
            .join(", "),
        started.elapsed().as_secs_f64(),
        write_path_markdown(&run.write_path),
        markdown(&run.reports, &metrics),
        cell(rate(run.drift_flagged)),
        cell(engine.abstained_when_unanswerable),
        cell(engine.abstained_when_answerable),
        run.foreign_hits,
    );
    let mut md = md;
    if !run.merges.is_empty() {
        md.push_str("\nFacts and updates deduplicated into another memory (their text was not stored):\n\n| cosine | written | deduplicated into |\n|---:|---|---|\n");
        for m in run.merges.iter().take(20) {
            md.push_str(&format!(
                "| {:.3} | {} | {} |\n",
                m.cosine, m.written, m.into
            ));
        }
    }
    println!("{md}");
    let baselines: serde_json::Map<String, serde_json::Value> = run.reports[1..]
        .iter()
        .map(|r| {
            (
                r.ranker.clone(),
                json!({"overall": r.overall_json(), "groups": r.groups}),
            )
        })
        .collect();
    let value = json!({
        "command": "corpus",
        "settings": {
            "facts": args.facts, "tenants": args.tenants, "queries": args.queries,
            "tasks": args.tasks, "relearned_per_drift": args.relearned_per_drift,
            "seed": args.seed, "repeat_share": args.repeat_share,
            "paraphrase_share": args.paraphrase_share, "update_share": args.update_share,
            "drift_share": args.drift_share, "vectors": format!("{:?}", args.vectors),
        },
        "ks": args.ks,
        "scoring": ScoringConfig::default(),
        "write_path": {
            "repeats_deduplicated": rate(run.write_path.repeats_deduplicated),
            "paraphrases_deduplicated": rate(run.write_path.paraphrases_deduplicated),
            "paraphrases_flagged_similar": rate(run.write_path.paraphrases_flagged_similar),
            "updates_stored_apart": rate(run.write_path.updates_stored_apart),
            "updates_flagged_similar": rate(run.write_path.updates_flagged_similar),
            "facts_merged": rate(run.write_path.facts_merged),
            "cross_tenant_merges": run.write_path.cross_tenant_merges,
        },
        "overall": engine.overall_json(),
        "groups": engine.groups,
        "merges": run.merges,
        "drift_flagged": rate(run.drift_flagged),
        "foreign_hits": run.foreign_hits,
        "baselines": baselines,
    });
    if let Some(parent) = args.json.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    write_json(&args.json, &value)?;
    std::fs::write(markdown_path(&args.json), &md)?;
    let questions = args.json.with_extension("questions.jsonl");
    let lines: Vec<String> = run.traces.iter().map(|t| t.to_string()).collect();
    std::fs::write(&questions, lines.join("\n") + "\n")?;
    println!(
        "wrote {}, {} and {} (every ranker's answer to every question)",
        args.json.display(),
        markdown_path(&args.json).display(),
        questions.display()
    );
    Ok(())
}
