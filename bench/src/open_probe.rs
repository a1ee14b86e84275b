//! `recall-bench open-probe` (hidden; `scale` runs it): opens a store that
//! `scale` built, in a process of its own, and answers recalls from it.
//!
//! The bench's own process holds the corpus and a second vector set for
//! its exactness figures, so its resident memory says little about an
//! agent's process that opens a store and recalls; this one holds only
//! what opening and recalling need. It prints one JSON object
//! ([`OpenProbe`]) on stdout.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::Context;
use recall::{Engine, ScoringConfig};
use recall_indexer::ScanConfig;
use serde::{Deserialize, Serialize};

use crate::speed::{TENANT, bench_config, percentile};

/// `recall-bench open-probe`.
#[derive(Debug, clap::Args)]
pub struct OpenProbeArgs {
    /// The data directory to open.
    #[arg(long)]
    pub data: PathBuf,
    /// The queries to answer ([`ProbeQueries`] as JSON).
    #[arg(long)]
    pub queries: PathBuf,
    /// `ScanConfig::rescore_pool` of the recalls.
    #[arg(long, default_value_t = ScanConfig::default().rescore_pool)]
    pub rescore_pool: usize,
    /// `ScanConfig::probe_share` of the recalls.
    #[arg(long, default_value_t = ScanConfig::default().probe_share)]
    pub probe_share: f64,
}

/// What the probe asks: the banks it reads and (text, query vector) pairs.
#[derive(Debug, Serialize, Deserialize)]
pub struct ProbeQueries {
    pub banks: Vec<String>,
    pub queries: Vec<(String, Vec<f32>)>,
}

/// What the probe measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OpenProbe {
    /// `Engine::open` alone, in seconds.
    pub engine_open_s: f64,
    /// From the start of `Engine::open` to the first recall's answer.
    pub open_s: f64,
    /// Resident memory right after the first answer, MiB.
    pub rss_mib_open: f64,
    /// Resident memory after every query was answered, MiB (`VmRSS`), and
    /// its anonymous and file-backed parts.
    pub rss_mib_recall: f64,
    pub rss_anon_mib_recall: f64,
    pub rss_file_mib_recall: f64,
    /// The process's peak resident memory (`VmHWM`): opening's peak.
    pub peak_rss_mib: f64,
    /// Recall p50 and p99 over the queries after the first, ms.
    pub recall_p50_ms: f64,
    pub recall_p99_ms: f64,
    /// [`recall::MemoryUse`] in MiB: memories, lookups, whole vectors
    /// (f32 rows, codes, partitions), sentence vectors (the same).
    pub state_mib: StateMib,
}

/// [`recall::MemoryUse`] in MiB.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StateMib {
    pub memories: f64,
    pub lookups: f64,
    pub vectors: f64,
    pub vector_codes: f64,
    pub vector_partitions: f64,
    pub sentence_vectors: f64,
    pub total: f64,
    /// Vector rows mapped from their files, not in `total`
    /// ([`recall::MemoryUse::mapped_vectors`]).
    #[serde(default)]
    pub mapped_vectors: f64,
}

/// One field of `/proc/self/status`, in MiB (Linux; 0 elsewhere).
pub fn status_mib(field: &str) -> f64 {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return 0.0;
    };
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kib| kib.parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0)
}

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// The probe itself (in the child process).
pub async fn open_probe_command(args: &OpenProbeArgs) -> anyhow::Result<()> {
    let asked: ProbeQueries = serde_json::from_slice(
        &std::fs::read(&args.queries).with_context(|| args.queries.display().to_string())?,
    )?;
    let Some(((first_text, first_vector), rest)) = asked.queries.split_first() else {
        anyhow::bail!("{}: no queries", args.queries.display());
    };
    let scoring = ScoringConfig {
        scan: ScanConfig {
            rescore_pool: args.rescore_pool,
            probe_share: args.probe_share,
            ..ScanConfig::default()
        },
        ..ScoringConfig::default()
    };
    let started = Instant::now();
    // As the `recall` binary opens (its main keeps freed pages).
    let returning = recall::allocator::ReturnFreedPages::start();
    let engine = Engine::open(bench_config(&args.data).scoring(scoring)).await?;
    drop(returning);
    let engine_open_s = started.elapsed().as_secs_f64();
    let recall = |text: &str, vector: &[f32]| {
        engine
            .recall(TENANT, text.to_string())
            .read(asked.banks.iter().cloned())
            .query_vector(vector.to_vec())
            .execute()
    };
    recall(first_text, first_vector).await?;
    let open_s = started.elapsed().as_secs_f64();
    let rss_mib_open = status_mib("VmRSS:");
    let mut recall_ms = Vec::with_capacity(rest.len());
    for (text, vector) in rest {
        let t = Instant::now();
        recall(text, vector).await?;
        recall_ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    recall_ms.sort_by(f64::total_cmp);
    let used = engine.memory_use()?;
    let probe = OpenProbe {
        engine_open_s,
        open_s,
        rss_mib_open,
        rss_mib_recall: status_mib("VmRSS:"),
        rss_anon_mib_recall: status_mib("RssAnon:"),
        rss_file_mib_recall: status_mib("RssFile:"),
        peak_rss_mib: status_mib("VmHWM:"),
        recall_p50_ms: percentile(&recall_ms, 50.0),
        recall_p99_ms: percentile(&recall_ms, 99.0),
        state_mib: StateMib {
            memories: mib(used.memories),
            lookups: mib(used.lookups),
            vectors: mib(used.vectors.vectors),
            vector_codes: mib(used.vectors.codes),
            vector_partitions: mib(used.vectors.partitions),
            sentence_vectors: mib(used.sentence_vectors.total()),
            total: mib(used.total()),
            mapped_vectors: mib(used.mapped_vectors),
        },
    };
    println!("{}", serde_json::to_string(&probe)?);
    Ok(())
}

/// Runs the probe on `data` in a child process of this executable (the
/// caller has closed its own handle on `data`), recalling with `scan`'s
/// re-scoring pool and probe share.
pub fn run_open_probe(
    data: &Path,
    asked: &ProbeQueries,
    scan: ScanConfig,
) -> anyhow::Result<OpenProbe> {
    // Beside the store, not in it: the probe opens the store as found.
    let queries = data.with_extension("queries.json");
    std::fs::write(&queries, serde_json::to_vec(asked)?)?;
    let output = Command::new(std::env::current_exe()?)
        .arg("open-probe")
        .arg("--data")
        .arg(data)
        .arg("--queries")
        .arg(&queries)
        .arg("--rescore-pool")
        .arg(scan.rescore_pool.to_string())
        .arg("--probe-share")
        .arg(scan.probe_share.to_string())
        .output()
        .context("starting the open probe")?;
    if !output.status.success() {
        anyhow::bail!(
            "the open probe failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    serde_json::from_slice(&output.stdout).context("reading the open probe's answer")
}
