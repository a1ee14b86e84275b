//! `recall-bench` commands: arguments (clap) and what each runs. The binary
//! only parses and dispatches, so tests drive the same code.

use std::path::{Path, PathBuf};

use anyhow::Context;
use recall::{Kind, ScoringConfig};
use recall_datasets::probes::{ProbeConfig, generate};
use recall_datasets::{chat_probes, locomo, longmemeval};
use serde_json::json;

use crate::eval::{Ranker, Report, RunStats, run};
use crate::report::{markdown, markdown_path, plot, write_json};
use crate::sources::{self, ContextIn, Granularity};
use crate::tunables::{Tunable, find, tunables};
use crate::vector_cache::{self, VectorCache};

/// recall's research runner: quality on LongMemEval-style and LoCoMo data,
/// scorer sweeps, and speed against corpus size. Every command prints a
/// markdown summary and writes it with JSON (see bench/README.md).
#[derive(Debug, clap::Parser)]
#[command(name = "recall-bench", version)]
pub struct Cli {
    /// What to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Score a LongMemEval-format file (real or generated): recall_any@k,
    /// recall_all@k, nDCG@k and MRR per question type, abstention accuracy,
    /// knowledge-update newest-first; engine defaults against dense and BM25.
    Longmemeval(LongMemEvalArgs),
    /// Score LoCoMo at turn level (categories 1–4), per category.
    Locomo(LocomoArgs),
    /// Write a generated LongMemEval-style probe set.
    Probes(ProbesArgs),
    /// Open a store `scale` built and answer its queries, in a process of
    /// its own (`scale` runs it).
    #[command(hide = true)]
    OpenProbe(crate::open_probe::OpenProbeArgs),
    /// Re-rank one dataset under a grid of scorer settings; table and plots.
    Sweep(Box<SweepArgs>),
    /// Speed against corpus size (synthetic vectors): recall latency,
    /// batched throughput on 1 vs 2 threads, remember and import rates, RSS.
    Scale(crate::scale::ScaleArgs),
    /// Compare two result files of the same command: every number that
    /// differs, with the change.
    Compare(CompareArgs),
    /// The whole write-and-recall path on a seeded agent-memory corpus with
    /// known answers (tenants, banks, kinds, elements over a year; repeats,
    /// paraphrases, updates, drift): what the write path kept apart and
    /// merged, recall per group, newest-first, VERIFY flags, isolation.
    Corpus(Box<crate::corpus_eval::CorpusArgs>),
    /// recall beside LanceDB (hybrid, flat and with a vector index),
    /// tantivy and the exact dense scan, on the same corpus and queries:
    /// latency, throughput, build time, memory, ratios to recall; with
    /// `--locomo`, LanceDB's hybrid scored beside the engine.
    Peers(crate::peers::PeersArgs),
    /// The default consolidation pass on a generated corpus with known
    /// groups: precision and recall of its proposals, a second pass, and
    /// recall and briefing lines before and after.
    Consolidation(crate::consolidation_eval::ConsolidationArgs),
    /// The engine on S3-compatible object storage (SeaweedFS on loopback)
    /// beside a local directory: import, write-ack and recall latency,
    /// open time, the server's own latency, and failover after SIGKILL.
    Storage(crate::storage::StorageArgs),
    /// A writer for `storage`'s failover rounds (run by it).
    #[command(hide = true)]
    StorageWriter(crate::storage::WriterArgs),
    /// `recall serve` nodes on one S3 root: a new tenant's first call,
    /// calls at a tenant's node and forwarded by another, and failover
    /// after SIGKILL.
    Nodes(crate::nodes::NodesArgs),
}

/// `recall-bench compare`.
#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// The baseline JSON.
    pub before: PathBuf,
    /// The new JSON.
    pub after: PathBuf,
    /// Only keys containing this text (e.g. `overall`).
    #[arg(long)]
    pub only: Option<String>,
    /// Also write the differences as JSON here (the table beside it, `.md`).
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Options every quality command takes.
#[derive(Debug, Clone, clap::Args)]
pub struct Common {
    /// Cut-offs, comma-separated.
    #[arg(long = "k", value_delimiter = ',', default_value = "1,5,10")]
    pub ks: Vec<usize>,
    /// Where the JSON goes (the markdown summary goes beside it, `.md`).
    #[arg(long)]
    pub json: Option<PathBuf>,
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
    /// Also rank with the engine's scorer without its relevance gate and
    /// decay (ranker `fusion`): the hybrid fusion alone, every candidate
    /// kept, for error analysis of the fusion against dense and BM25.
    #[arg(long)]
    pub fusion_only: bool,
    /// The kind every document is written as. Ranking depends on it
    /// through the newer-version lift, which applies to `fact`,
    /// `preference` and `convention` memories by default (kind weights
    /// are the same for every document, so they do not change the order).
    #[arg(long, default_value = "episode")]
    pub kind: Kind,
    /// Write each date's documents as one session and run the default
    /// consolidation pass (`Engine::consolidate`) before asking: a fact a
    /// pass makes is credited with the unit it quotes, a folded copy's
    /// units go to the memory it folded into.
    #[arg(long)]
    pub consolidate: bool,
}

/// `recall-bench longmemeval`.
#[derive(Debug, clap::Args)]
pub struct LongMemEvalArgs {
    /// A LongMemEval file (S, M, oracle, or `recall-bench probes` output).
    pub file: PathBuf,
    /// What one memory holds and what a hit is credited with.
    #[arg(long, value_enum, default_value = "turn")]
    pub granularity: Granularity,
    /// Shared options.
    #[command(flatten)]
    pub common: Common,
}

/// `recall-bench locomo`.
#[derive(Debug, clap::Args)]
pub struct LocomoArgs {
    /// `locomo10.json` (default: `../shared/datasets/locomo/locomo10.json`).
    #[arg(default_value = "../shared/datasets/locomo/locomo10.json")]
    pub file: PathBuf,
    /// Only the first N conversations (of the split).
    #[arg(long)]
    pub conversations: Option<usize>,
    /// Which conversations: `train` (the first five, the only ones tuned
    /// on), `test` (the last five, reported on) or `all`.
    #[arg(long, default_value = "all")]
    pub split: locomo::Split,
    /// Also ask each conversation the questions of the next one in the
    /// split (those naming only its own people): unanswerable questions,
    /// reported as abstention (group `cross`).
    #[arg(long)]
    pub cross: bool,
    /// Turns before each turn, in its session, written with it. Default 1
    /// (in the title): the way an agent would remember a conversation, and
    /// the "neighbour-turn context" lever; 0 is the reference
    /// setup (each turn alone).
    #[arg(long, default_value_t = 1)]
    pub context: usize,
    /// Where those turns go: the memory's title (BM25 only) or its content.
    #[arg(long, value_enum, default_value_t = ContextIn::Title)]
    pub context_in: ContextIn,
    /// Shared options.
    #[command(flatten)]
    pub common: Common,
}

/// `recall-bench probes`.
#[derive(Debug, clap::Args)]
pub struct ProbesArgs {
    /// Where to write the LongMemEval-format file.
    #[arg(long, default_value = "bench-results/probes.json")]
    pub out: PathBuf,
    /// Instances per answerable type (five types), and as many `_abs`.
    #[arg(long, default_value_t = 20)]
    pub per_type: usize,
    /// Sessions per haystack.
    #[arg(long, default_value_t = 10)]
    pub sessions: usize,
    /// Seed (default: 7 for `probes`, 11 for `chat`).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Which generator: `probes` (the first, tuned on) or `chat` (a second
    /// one sharing no templates, fillers or names with it; its seed 11 is
    /// never tuned on).
    #[arg(long, value_enum, default_value_t = Generator::Probes)]
    pub generator: Generator,
}

/// The probe generators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Generator {
    /// [`recall_datasets::probes`]: assistant chatter from slotted templates.
    Probes,
    /// [`recall_datasets::chat_probes`]: chatty messages mixing requests
    /// with statements, indirect preferences, near-topic unanswerables.
    Chat,
}

/// `recall-bench sweep`.
#[derive(Debug, clap::Args)]
pub struct SweepArgs {
    /// Sweep on LoCoMo (this file) …
    #[arg(long, conflicts_with = "longmemeval")]
    pub locomo: Option<PathBuf>,
    /// … or on a LongMemEval-format file.
    #[arg(long)]
    pub longmemeval: Option<PathBuf>,
    /// LongMemEval: what one memory holds (as `longmemeval`).
    #[arg(long, value_enum, default_value_t = Granularity::Turn)]
    pub granularity: Granularity,
    /// LoCoMo: turns before each turn written with it (as `locomo`).
    #[arg(long, default_value_t = 1)]
    pub context: usize,
    /// LoCoMo: where those turns go (title or content).
    #[arg(long, value_enum, default_value_t = ContextIn::Title)]
    pub context_in: ContextIn,
    /// LoCoMo: which conversations (as `locomo`). A sweep tunes, so it
    /// runs on `train` unless told otherwise.
    #[arg(long, default_value = "train")]
    pub split: locomo::Split,
    /// LoCoMo: with the cross-conversation questions (as `locomo`).
    #[arg(long)]
    pub cross: bool,
    /// Vector weights (the lexical weight is 1 − w).
    #[arg(long, value_delimiter = ',', default_value = "0.3,0.45,0.55,0.65,0.8")]
    pub vector_weight: Vec<f32>,
    /// BM25 normalizations: `sat:K` (saturation s/(s+K)), `att` (over the
    /// query's attainable score), `max`, `minmax`.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "sat:3,sat:5,sat:10,sat:20,att,max,minmax"
    )]
    pub bm25: Vec<String>,
    /// Decay half-lives in days.
    #[arg(long, value_delimiter = ',', default_value = "15,45,180,100000")]
    pub half_life: Vec<f64>,
    /// Decay floors (1 turns decay off).
    #[arg(long, value_delimiter = ',', default_value = "0.4,0.6,0.8,0.9,1")]
    pub decay_floor: Vec<f32>,
    /// The abstention gate's cosine half (`min_evidence_cosine`).
    #[arg(long, value_delimiter = ',', default_value = "0.15,0.2,0.22,0.25,0.3")]
    pub min_evidence_cosine: Vec<f32>,
    /// A further gate on the best hybrid relevance (`min_relevance`).
    #[arg(long, value_delimiter = ',', default_value = "0,0.1,0.15,0.2,0.25,0.3")]
    pub min_relevance: Vec<f32>,
    /// Relevance every hit must reach once the query passes the gate.
    #[arg(long, value_delimiter = ',', default_value = "0,0.05,0.1,0.15")]
    pub min_hit_relevance: Vec<f32>,
    /// Candidate pools (each stage).
    #[arg(long, value_delimiter = ',', default_value = "25,50,100,200")]
    pub pool: Vec<usize>,
    /// Newer-version lift cut-offs (cosine of the two memories' vectors
    /// closest to the query), `off` for none.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "0.2,0.25,0.3,0.4,0.5,off"
    )]
    pub update_similarity: Vec<String>,
    /// Cosine to a third top hit at which a pair of episodes (or notes …)
    /// no longer stands apart and is not lifted; `off`: such pairs never are.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "0.4,0.45,0.5,0.55,0.6,off"
    )]
    pub update_isolation: Vec<String>,
    /// Least relevance of a newer fact, preference or convention, as a share
    /// of the older hit's, for it to be lifted above it; `off`: any.
    #[arg(long, value_delimiter = ',', default_value = "0.8,0.85,0.9,0.95,off")]
    pub update_relevance_share: Vec<String>,
    /// Cosines over which a partial lexical match comes to count
    /// (`LO:HI`: nothing at or below LO, all of it from HI; `LO:HI:OFFSET`:
    /// and that much higher for a memory that only asks, default 0.2; the
    /// strong-match level stays the default), `off` for the whole lexical
    /// half always.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "0.1:0.3,0.2:0.4,0.3:0.5,0.4:0.6,0.2:0.4:0,0.2:0.4:0.1,0.2:0.4:0.3,off"
    )]
    pub lexical_support: Vec<String>,
    /// What the abstention gate asks of a memory that only asks (`COS:LEX`:
    /// its cosine or its normalized BM25 must reach these), `off` to judge
    /// it like any memory.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "0.25:0.5,0.28:0.6,0.32:0.6,0.35:0.6,0.4:0.6,off"
    )]
    pub question_evidence: Vec<String>,
    /// The score's factor for a memory that only asks (1: none).
    #[arg(long, value_delimiter = ',', default_value = "0.6,0.7,0.8,0.9,1")]
    pub question_weight: Vec<f32>,
    /// Any tunable of `recall_bench::tunables` (e.g. `--set
    /// link_share=0.3,0.5 --set lift_band=off,0.4:0.7`), repeatable; it
    /// replaces the grid of a flag above of the same name.
    #[arg(long, value_name = "NAME=V1,V2,…")]
    pub set: Vec<String>,
    /// Sweep only the `--set` axes, not the flags' default grids.
    #[arg(long)]
    pub only_set: bool,
    /// Every combination instead of one parameter at a time around the defaults.
    #[arg(long)]
    pub full: bool,
    /// The metric plotted.
    #[arg(long, default_value = "recall_any@10")]
    pub metric: String,
    /// Directory for the JSON, markdown and SVG plots.
    #[arg(long, default_value = "bench-results/sweep")]
    pub out: PathBuf,
    /// Shared options (`--json`: where the table's JSON goes, default
    /// `<out>/sweep.json`; the plots go to `--out`).
    #[command(flatten)]
    pub common: Common,
}

/// Runs a parsed command line.
pub async fn dispatch(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Longmemeval(a) => longmemeval_command(&a).await.map(|_| ()),
        Command::Locomo(a) => locomo_command(&a).await.map(|_| ()),
        Command::Probes(a) => probes_command(&a),
        Command::Sweep(a) => sweep_command(&a).await,
        Command::Scale(a) => crate::scale::scale_command(&a).await,
        Command::OpenProbe(a) => crate::open_probe::open_probe_command(&a).await,
        Command::Compare(a) => compare_command(&a),
        Command::Corpus(a) => crate::corpus_eval::corpus_command(&a).await,
        Command::Peers(a) => crate::peers::peers_command(&a).await,
        Command::Consolidation(a) => crate::consolidation_eval::consolidation_command(&a).await,
        Command::Storage(a) => crate::storage::storage_command(&a).await,
        Command::StorageWriter(a) => crate::storage::writer_command(&a).await,
        Command::Nodes(a) => crate::nodes::nodes_command(&a).await,
    }
}

/// Every numeric leaf of a JSON value, keyed by its path (`a.b[2].c`).
fn numeric_leaves(value: &serde_json::Value, path: &str, out: &mut Vec<(String, f64)>) {
    match value {
        serde_json::Value::Number(n) => {
            if let Some(v) = n.as_f64() {
                out.push((path.to_string(), v));
            }
        }
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                numeric_leaves(v, &p, out);
            }
        }
        serde_json::Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                numeric_leaves(v, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// `compare`: a markdown table of the numbers that changed.
pub fn compare_command(args: &CompareArgs) -> anyhow::Result<()> {
    let read = |p: &Path| -> anyhow::Result<serde_json::Value> {
        Ok(serde_json::from_slice(
            &std::fs::read(p).with_context(|| p.display().to_string())?,
        )?)
    };
    let (mut before, mut after) = (Vec::new(), Vec::new());
    numeric_leaves(&read(&args.before)?, "", &mut before);
    numeric_leaves(&read(&args.after)?, "", &mut after);
    let before: std::collections::BTreeMap<String, f64> = before.into_iter().collect();
    let mut md = String::from("| key | before | after | change |\n|---|---:|---:|---:|\n");
    let mut differences = Vec::new();
    for (key, new) in after {
        if args
            .only
            .as_ref()
            .is_some_and(|o| !key.contains(o.as_str()))
        {
            continue;
        }
        let old = before.get(&key).copied();
        if old == Some(new) {
            continue;
        }
        md.push_str(&match old {
            Some(old) => format!("| {key} | {old:.4} | {new:.4} | {:+.4} |\n", new - old),
            None => format!("| {key} | – | {new:.4} | new |\n"),
        });
        differences.push(json!({"key": key, "before": old, "after": new}));
    }
    md.push_str(&format!("\n{} numbers differ\n", differences.len()));
    print!("{md}");
    if let Some(path) = &args.json {
        let value = json!({
            "command": "compare",
            "before": args.before.display().to_string(),
            "after": args.after.display().to_string(),
            "differences": differences,
        });
        write_json(path, &value)?;
        std::fs::write(markdown_path(path), &md)?;
    }
    Ok(())
}

fn open_cache(common: &Common) -> anyhow::Result<VectorCache> {
    let dir = common
        .cache
        .clone()
        .unwrap_or_else(vector_cache::default_dir);
    Ok(VectorCache::open(
        &dir,
        vector_cache::embedder(common.model_dir.as_deref())?,
    )?)
}

/// The three rankers of a quality run: the engine's defaults, dense, BM25;
/// with `fusion_only`, also the engine's scorer with no gate and no decay.
pub fn default_rankers(fusion_only: bool) -> Vec<Ranker> {
    let mut rankers = vec![
        Ranker::engine("engine", ScoringConfig::default()),
        Ranker::dense(),
        Ranker::bm25(),
    ];
    if fusion_only {
        rankers.push(Ranker::engine("fusion", crate::eval::ungated()));
    }
    rankers
}

/// JSON of a quality run: the engine's `overall` (with
/// `abstention_accuracy`, `ku_newest_first`) and groups at the top level,
/// the baselines beside.
fn quality_json(
    command: &str,
    file: &Path,
    extra: serde_json::Value,
    ks: &[usize],
    reports: &[Report],
    stats: &RunStats,
) -> serde_json::Value {
    let engine = &reports[0];
    let baselines: serde_json::Map<String, serde_json::Value> = reports[1..]
        .iter()
        .map(|r| {
            (
                r.ranker.clone(),
                json!({"overall": r.overall_json(), "groups": r.groups}),
            )
        })
        .collect();
    json!({
        "command": command,
        "file": file.display().to_string(),
        "settings": extra,
        "ks": ks,
        "abstention_items_in_metrics": false,
        "scoring": ScoringConfig::default(),
        "overall": engine.overall_json(),
        "groups": engine.groups,
        "baselines": baselines,
        "stats": stats,
    })
}

fn finish(
    default_json: &str,
    common: &Common,
    title: &str,
    value: &serde_json::Value,
    reports: &[Report],
    stats: &RunStats,
    traces: &[serde_json::Value],
) -> anyhow::Result<()> {
    let path = common
        .json
        .clone()
        .unwrap_or_else(|| PathBuf::from(default_json));
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    let md = format!(
        "# {title}\n\n{}\n{} docs → {} memories ({} not written), {} questions; embedding {:.1} s, writing {:.1} s, recall {:.1} s (all rankers). Abstention items are excluded from the retrieval metrics.\n",
        markdown(reports, &crate::metrics::metric_columns(&common.ks)),
        stats.docs,
        stats.memories,
        stats.refused,
        stats.questions,
        stats.embed_s,
        stats.ingest_s,
        stats.recall_s,
    );
    println!("{md}");
    write_json(&path, value)?;
    std::fs::write(markdown_path(&path), &md)?;
    let questions = path.with_extension("questions.jsonl");
    let lines: Vec<String> = traces.iter().map(|t| t.to_string()).collect();
    std::fs::write(&questions, lines.join("\n") + "\n")?;
    println!(
        "wrote {}, {} and {} (every ranker's answer to every question)",
        path.display(),
        markdown_path(&path).display(),
        questions.display()
    );
    Ok(())
}

/// Scores the default rankers on `haystacks`, prints and writes the
/// results (JSON, markdown, per-question traces).
async fn quality_run(
    command: &str,
    file: &Path,
    haystacks: Vec<crate::eval::Haystack>,
    settings: serde_json::Value,
    title: &str,
    common: &Common,
) -> anyhow::Result<Vec<Report>> {
    let mut cache = open_cache(common)?;
    let mut haystacks = written_as(haystacks, common.kind);
    for h in &mut haystacks {
        h.consolidate = common.consolidate;
    }
    let rankers = default_rankers(common.fusion_only);
    let (reports, stats, outcomes) =
        run(haystacks, &rankers, &common.ks, &mut cache, !common.quiet).await?;
    let value = quality_json(command, file, settings, &common.ks, &reports, &stats);
    let traces: Vec<serde_json::Value> = outcomes
        .iter()
        .flat_map(|o| o.traces.iter().cloned())
        .collect();
    finish(
        &format!("bench-results/{command}.json"),
        common,
        title,
        &value,
        &reports,
        &stats,
        &traces,
    )?;
    Ok(reports)
}

/// Every document of `haystacks` written as a `kind` memory.
fn written_as(mut haystacks: Vec<crate::eval::Haystack>, kind: Kind) -> Vec<crate::eval::Haystack> {
    for h in &mut haystacks {
        h.kind = kind;
    }
    haystacks
}

/// `longmemeval`: returns the reports (engine, dense, bm25).
pub async fn longmemeval_command(args: &LongMemEvalArgs) -> anyhow::Result<Vec<Report>> {
    let instances = longmemeval::load(&args.file)?;
    let (haystacks, skipped) = sources::longmemeval(&instances, args.granularity);
    let title = format!(
        "LongMemEval-format run: {} ({:?} level, {} instances, {skipped} skipped without gold)",
        args.file.display(),
        args.granularity,
        instances.len()
    );
    let settings = json!({"granularity": args.granularity, "skipped_without_gold": skipped});
    quality_run(
        "longmemeval",
        &args.file,
        haystacks,
        settings,
        &title,
        &args.common,
    )
    .await
}

/// `locomo`: returns the reports (engine, dense, bm25).
pub async fn locomo_command(args: &LocomoArgs) -> anyhow::Result<Vec<Report>> {
    let mut conversations = args.split.select(&locomo::load(&args.file)?);
    if let Some(n) = args.conversations {
        conversations.truncate(n);
    }
    let haystacks = sources::locomo(&conversations, args.context, args.context_in, args.cross);
    let ids: Vec<&str> = conversations.iter().map(|c| c.sample_id.as_str()).collect();
    let title = format!(
        "LoCoMo, turn level, categories 1–4{}: {} ({} split: {})",
        if args.cross {
            ", with cross-conversation questions"
        } else {
            ""
        },
        args.file.display(),
        args.split.name(),
        ids.join(", ")
    );
    let settings = json!({
        "level": "turn",
        "categories": [1, 2, 3, 4],
        "split": args.split.name(),
        "cross": args.cross,
        "conversation_ids": ids,
        "conversations": conversations.len(),
        "context": args.context,
        "context_in": args.context_in,
    });
    quality_run(
        "locomo",
        &args.file,
        haystacks,
        settings,
        &title,
        &args.common,
    )
    .await
}

/// `probes`.
pub fn probes_command(args: &ProbesArgs) -> anyhow::Result<()> {
    let probes = match args.generator {
        Generator::Probes => generate(&ProbeConfig {
            seed: args.seed.unwrap_or(ProbeConfig::default().seed),
            per_type: args.per_type,
            sessions: args.sessions,
            ..ProbeConfig::default()
        }),
        Generator::Chat => chat_probes::generate(&chat_probes::ChatProbeConfig {
            seed: args
                .seed
                .unwrap_or(chat_probes::ChatProbeConfig::default().seed),
            per_type: args.per_type,
            sessions: args.sessions,
            ..chat_probes::ChatProbeConfig::default()
        }),
    };
    if let Some(parent) = args.out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    longmemeval::save(&args.out, &probes)?;
    let md = probes_summary(&probes);
    std::fs::write(markdown_path(&args.out), &md)?;
    println!("{md}");
    println!(
        "wrote {} instances to {} (summary {})",
        probes.len(),
        args.out.display(),
        markdown_path(&args.out).display()
    );
    Ok(())
}

/// Per question type: instances, and the mean sessions, user turns and
/// gold turns of their haystacks.
fn probes_summary(probes: &[longmemeval::Instance]) -> String {
    let mut by_type: std::collections::BTreeMap<&str, (usize, usize, usize, usize)> =
        std::collections::BTreeMap::new();
    for p in probes {
        let row = by_type.entry(p.question_type.as_str()).or_default();
        let turns = p
            .haystack_sessions
            .iter()
            .flatten()
            .filter(|t| t.role == "user");
        let (users, gold) = turns.fold((0, 0), |(u, g), t| {
            (u + 1, g + usize::from(t.is_evidence()))
        });
        *row = (
            row.0 + 1,
            row.1 + p.haystack_sessions.len(),
            row.2 + users,
            row.3 + gold,
        );
    }
    let mut md = String::from(
        "| question type | instances | sessions | user turns | gold turns |\n|---|---:|---:|---:|---:|\n",
    );
    for (kind, (n, sessions, users, gold)) in by_type {
        let mean = |x: usize| x as f64 / n.max(1) as f64;
        md.push_str(&format!(
            "| {kind} | {n} | {:.1} | {:.1} | {:.2} |\n",
            mean(sessions),
            mean(users),
            mean(gold)
        ));
    }
    md
}

/// One sweep point: a scorer setting and the text of every tunable's value
/// in it ([`crate::tunables`]).
#[derive(Debug, Clone)]
struct Point {
    config: ScoringConfig,
    /// Tunable name → its value as text, for every row of the table.
    values: Vec<(&'static str, String)>,
}

impl Point {
    fn of(config: ScoringConfig, table: &[Tunable]) -> Point {
        let values = table.iter().map(|t| (t.name, (t.get)(&config))).collect();
        Point { config, values }
    }

    /// The values that differ from `base`'s, as `name=value;…`, or
    /// `defaults`.
    fn name(&self, base: &Point) -> String {
        let changed: Vec<String> = self
            .values
            .iter()
            .zip(&base.values)
            .filter(|(a, b)| a.1 != b.1)
            .map(|((name, v), _)| format!("{name}={v}"))
            .collect();
        if changed.is_empty() {
            "defaults".into()
        } else {
            changed.join(";")
        }
    }

    fn value(&self, name: &str) -> &str {
        self.values
            .iter()
            .find(|(n, _)| *n == name)
            .map_or("", |(_, v)| v.as_str())
    }

    /// Whether it differs from `base` in `name` alone (or nowhere).
    fn varies_only(&self, base: &Point, name: &str) -> bool {
        self.values
            .iter()
            .zip(&base.values)
            .all(|((n, a), (_, b))| *n == name || a == b)
    }
}

/// The axes a sweep varies: each named flag's values as text, then each
/// `--set NAME=V1,V2,…` (which replaces a flag's grid of the same name);
/// with `--only-set`, the `--set` axes alone.
fn sweep_axes(args: &SweepArgs) -> anyhow::Result<Vec<(String, Vec<String>)>> {
    fn text<T: ToString>(values: &[T]) -> Vec<String> {
        values.iter().map(ToString::to_string).collect()
    }
    let mut axes: Vec<(String, Vec<String>)> = if args.only_set {
        Vec::new()
    } else {
        [
            ("vector_weight", text(&args.vector_weight)),
            ("bm25", args.bm25.clone()),
            ("half_life_days", text(&args.half_life)),
            ("decay_floor", text(&args.decay_floor)),
            ("min_evidence_cosine", text(&args.min_evidence_cosine)),
            ("min_relevance", text(&args.min_relevance)),
            ("min_hit_relevance", text(&args.min_hit_relevance)),
            ("candidate_pool", text(&args.pool)),
            ("update_similarity", args.update_similarity.clone()),
            ("update_isolation", args.update_isolation.clone()),
            (
                "update_relevance_share",
                args.update_relevance_share.clone(),
            ),
            ("lexical_support", args.lexical_support.clone()),
            ("question_evidence", args.question_evidence.clone()),
            ("question_weight", text(&args.question_weight)),
        ]
        .into_iter()
        .map(|(name, values)| (name.to_string(), values))
        .collect()
    };
    for set in &args.set {
        let (name, values) = set
            .split_once('=')
            .with_context(|| format!("--set {set:?}: NAME=V1,V2,…"))?;
        let values: Vec<String> = values.split(',').map(|v| v.trim().to_string()).collect();
        match axes.iter_mut().find(|(n, _)| n == name.trim()) {
            Some(axis) => axis.1 = values,
            None => axes.push((name.trim().to_string(), values)),
        }
    }
    Ok(axes)
}

/// The defaults first, then each axis's values one at a time around them
/// (each setting once), or with `--full` every combination.
fn sweep_points(args: &SweepArgs, table: &[Tunable]) -> anyhow::Result<Vec<Point>> {
    let mut settings: Vec<(Tunable, Vec<String>)> = Vec::new();
    for (name, values) in sweep_axes(args)? {
        let tunable = find(&name)?;
        // Every value is checked before anything runs.
        for v in &values {
            (tunable.set)(&mut ScoringConfig::default(), v)
                .with_context(|| format!("{name}: {}", tunable.values))?;
        }
        settings.push((tunable, values));
    }
    let base = Point::of(ScoringConfig::default(), table);
    if args.full {
        let mut grid = vec![ScoringConfig::default()];
        for (tunable, values) in &settings {
            let mut next = Vec::with_capacity(grid.len() * values.len());
            for config in &grid {
                for v in values {
                    let mut c = config.clone();
                    (tunable.set)(&mut c, v)?;
                    next.push(c);
                }
            }
            grid = next;
        }
        return Ok(grid.into_iter().map(|c| Point::of(c, table)).collect());
    }
    let mut points = vec![base.clone()];
    for (tunable, values) in &settings {
        for v in values {
            let mut config = ScoringConfig::default();
            (tunable.set)(&mut config, v)?;
            let point = Point::of(config, table);
            if !points.iter().any(|p| p.values == point.values) {
                points.push(point);
            }
        }
    }
    Ok(points)
}

/// `sweep`: every point ranks the same ingested data; a table of all
/// points, and per numeric parameter a plot of the metric (and abstention
/// accuracy on LongMemEval-format data) with the others at their defaults.
pub async fn sweep_command(args: &SweepArgs) -> anyhow::Result<()> {
    let (haystacks, data) = match (&args.locomo, &args.longmemeval) {
        (Some(file), _) => (
            sources::locomo(
                &args.split.select(&locomo::load(file)?),
                args.context,
                args.context_in,
                args.cross,
            ),
            file.clone(),
        ),
        (None, Some(file)) => {
            let instances = longmemeval::load(file)?;
            (
                sources::longmemeval(&instances, args.granularity).0,
                file.clone(),
            )
        }
        (None, None) => anyhow::bail!("name the data: --locomo FILE or --longmemeval FILE"),
    };
    let haystacks = written_as(haystacks, args.common.kind);
    let table = tunables();
    let points = sweep_points(args, &table)?;
    let base = Point::of(ScoringConfig::default(), &table);
    let mut rankers: Vec<Ranker> = points
        .iter()
        .map(|p| Ranker::engine(&p.name(&base), p.config.clone()))
        .collect();
    rankers.push(Ranker::dense());
    rankers.push(Ranker::bm25());
    let mut cache = open_cache(&args.common)?;
    let (reports, stats, _) = run(
        haystacks,
        &rankers,
        &args.common.ks,
        &mut cache,
        !args.common.quiet,
    )
    .await?;
    std::fs::create_dir_all(&args.out)?;

    let metrics = [
        args.metric.clone(),
        "ndcg@10".to_string(),
        "recall_any@5".to_string(),
    ];
    // The columns: every tunable some point sets apart from the defaults.
    let varied: Vec<&Tunable> = table
        .iter()
        .filter(|t| points.iter().any(|p| p.value(t.name) != base.value(t.name)))
        .collect();
    let mut md = format!("# Sweep on {}\n\n|", data.display());
    for t in &varied {
        md.push_str(&format!(" {} |", t.name));
    }
    md.push_str(&format!(
        " {} | {} | {} | abstention acc | KU newest-first |\n|",
        metrics[0], metrics[1], metrics[2]
    ));
    md.push_str(&"---|".repeat(varied.len()));
    md.push_str("---:|---:|---:|---:|---:|\n");
    let rate = |v: Option<f64>| v.map_or("–".into(), |v| format!("{v:.3}"));
    let mut rows = Vec::new();
    for (point, report) in points.iter().zip(&reports) {
        let vals: Vec<f64> = metrics.iter().map(|m| report.overall(m)).collect();
        md.push('|');
        let mut row = serde_json::Map::new();
        for t in &varied {
            md.push_str(&format!(" {} |", point.value(t.name)));
            row.insert(t.name.into(), point.value(t.name).into());
        }
        md.push_str(&format!(
            " {:.3} | {:.3} | {:.3} | {} | {} |\n",
            vals[0],
            vals[1],
            vals[2],
            rate(report.abstention_accuracy),
            rate(report.ku_newest_first),
        ));
        row.insert("name".into(), point.name(&base).into());
        row.insert("overall".into(), report.overall_json());
        rows.push(serde_json::Value::Object(row));
    }
    for baseline in &reports[points.len()..] {
        md.push_str(&format!(
            "| {} only |{} {:.3} | {:.3} | {:.3} | – | {} |\n",
            baseline.ranker,
            " |".repeat(varied.len().saturating_sub(1)),
            baseline.overall(&metrics[0]),
            baseline.overall(&metrics[1]),
            baseline.overall(&metrics[2]),
            rate(baseline.ku_newest_first),
        ));
    }
    let mut plots = Vec::new();
    for t in &varied {
        let mut line: Vec<(f64, f64)> = Vec::new();
        let mut abst: Vec<(f64, f64)> = Vec::new();
        for (point, report) in points.iter().zip(&reports) {
            if !point.varies_only(&base, t.name) {
                continue;
            }
            if let Some(x) = (t.axis)(&point.config) {
                line.push((x, report.overall(&args.metric)));
                if let Some(a) = report
                    .abstention_accuracy
                    .filter(|_| args.longmemeval.is_some())
                {
                    abst.push((x, a));
                }
            }
        }
        if line.len() < 2 {
            continue;
        }
        line.sort_by(|a, b| a.0.total_cmp(&b.0));
        abst.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut series = vec![(args.metric.clone(), line)];
        if !abst.is_empty() {
            series.push(("abstention accuracy".into(), abst));
        }
        let path = args.out.join(format!("{}.svg", t.name));
        plot(
            &path,
            &format!("{} vs {}", args.metric, t.name),
            t.name,
            "score",
            &series,
            t.log_axis,
        )?;
        plots.push(path.display().to_string());
    }
    md.push_str(&format!(
        "\n{} points (others at the defaults when one varies); {} questions per point; embedding {:.1} s, writing {:.1} s, recall {:.1} s.\n\nPlots: {}\n",
        points.len(),
        stats.questions,
        stats.embed_s,
        stats.ingest_s,
        stats.recall_s,
        plots.join(", ")
    ));
    println!("{md}");
    let json_path = args
        .common
        .json
        .clone()
        .unwrap_or_else(|| args.out.join("sweep.json"));
    if let Some(parent) = json_path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    write_json(
        &json_path,
        &json!({"command": "sweep", "data": data.display().to_string(), "metric": args.metric, "points": rows, "stats": stats}),
    )?;
    std::fs::write(markdown_path(&json_path), &md)?;
    println!(
        "wrote {} and {}",
        json_path.display(),
        markdown_path(&json_path).display()
    );
    Ok(())
}
