//! `recall-bench scale`: speed against corpus size, one tenant, synthetic
//! clustered vectors given with each write (so neither writes nor queries
//! time the model).
//!
//! Per size: bulk-import rate ([`Engine::import`] in calls of
//! [`IMPORT_BATCH`], as `recall import` writes, and a flush at the end;
//! the table compaction and index merges the import leaves running are
//! waited for before anything else is timed, and that wait is reported
//! apart), the share of near copies of stored memories (cosine
//! 0.83–0.98, dedup band and similar band apart) whose write finds the
//! original, `remember` p50/p99, recall p50/p99 (query vector given), the
//! vector stage's recall@10 against the exact scan, throughput of the
//! vector stage over a batch in a rayon pool of 1 and of 2 threads (the
//! batch in one call, and query by query), end-to-end
//! recall throughput with 1 and 2 concurrent callers, one review queue, one
//! knowledge map over the corpus's services and 1,000 undocumented paths,
//! and the process's peak RSS so far (VmHWM: sizes run in order in one process, so it is the
//! peak up to and including that size).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Instant;

use rayon::prelude::*;
use recall::{Engine, IMPORT_BATCH, Kind, NewMemory, Remembered, ScoringConfig, WriteConfig};
use recall_datasets::{SyntheticMemory, near_copy, query_near};
use recall_indexer::{ScanConfig, VectorSet};
use serde_json::json;
use uuid::Uuid;

use crate::open_probe::{ProbeQueries, run_open_probe};
use crate::report::{Series, markdown_path, plot, write_json};
use crate::speed::{
    DIM, TENANT, banks, bench_config, corpus, percentile, queries_near, time_recalls, to_new,
    with_sentence_vectors,
};

/// `recall-bench scale`.
#[derive(Debug, clap::Args)]
pub struct ScaleArgs {
    /// Corpus sizes, comma-separated (e.g. 10000,100000,1000000).
    #[arg(long, value_delimiter = ',', default_value = "10000,100000")]
    pub sizes: Vec<usize>,
    /// Timed recalls per size.
    #[arg(long, default_value_t = 500)]
    pub queries: usize,
    /// Where the JSON goes (markdown beside it, plot as `.svg`).
    #[arg(long, default_value = "bench-results/scale.json")]
    pub json: PathBuf,
    /// No progress bars.
    #[arg(long)]
    pub quiet: bool,
    /// Give each memory a vector per sentence of its content, as a model
    /// would (two in this corpus: the fact and its `(ref #i)`), each at
    /// cosine ≈ 0.9 to the memory's: recall then scans a sentence set twice
    /// the size of the memories' as well.
    #[arg(long)]
    pub sentence_vectors: bool,
    /// Rows each vector scan re-scores exactly after its sign-code pass
    /// (`ScanConfig::rescore_pool`), in the engine's recalls and in the
    /// vector-stage measurements alike: the knob that trades the scan's
    /// exactness (vector recall@10 and @100 in the table) for latency.
    #[arg(long, default_value_t = ScanConfig::default().rescore_pool)]
    pub rescore_pool: usize,
    /// Share of a partitioned tenant's rows each vector scan's code pass
    /// visits (`ScanConfig::probe_share`; 1.0 visits every row), in the
    /// recalls and the vector-stage measurements alike: the other knob
    /// that trades exactness for latency.
    #[arg(long, default_value_t = ScanConfig::default().probe_share)]
    pub probe_share: f64,
    /// Keep each size's store in `DIR/<size>` (replaced if there), with the
    /// open probe's queries beside it in `DIR/<size>.queries.json`, for
    /// `recall-bench open-probe --data DIR/<size> --queries …`.
    #[arg(long, value_name = "DIR")]
    pub keep: Option<PathBuf>,
    /// Only what a size too large to hold twice allows (ten million
    /// memories): the corpus streamed in, recalls timed, the open probe,
    /// and the vector stage's exactness from a second pass after the
    /// engine closed. No single writes, review queue, knowledge map,
    /// throughput tables or consolidation (`lean.rs`).
    #[arg(long)]
    pub lean: bool,
    /// With `--lean`: further probe shares at which the reopened store is
    /// probed and the vector stage's exactness measured, each a row of
    /// its own (comma-separated, e.g. 0.25,0.1).
    #[arg(long, value_delimiter = ',', requires = "lean")]
    pub reopen_probe_shares: Vec<f64>,
}

/// Memories generated beyond each size for the single writes timed after
/// the import.
pub(crate) const EXTRA_WRITES: usize = 200;

/// Queries the vector stage's exactness is measured with.
pub(crate) const EXACTNESS_PROBES: usize = 200;

/// Recall@10 and @100 of the coded scan against the exact one under each
/// of `scans`, over [`EXACTNESS_PROBES`] queries near rows of `set` (the
/// corpus item `i` at row `i`), whose exact hits are computed once for
/// all of them. 100 is recall's candidate pool, what recall asks the scan
/// for.
pub(crate) fn scan_exactness(set: &VectorSet, scans: &[ScanConfig]) -> Vec<[f64; 2]> {
    let n = set.len();
    let owners =
        |hits: Vec<(usize, f32)>| -> Vec<usize> { hits.into_iter().map(|h| h.0).collect() };
    let queries: Vec<Vec<f32>> = (0..EXACTNESS_PROBES.min(n))
        .filter_map(|q| Some(query_near(10_000 + q as u64, set.row((q * 104_729) % n)?)))
        .collect();
    let exact: Vec<Vec<usize>> = queries
        .par_iter()
        .map(|query| owners(set.nearest_exact(query, 100, |_| true)))
        .collect();
    scans
        .iter()
        .map(|&scan| {
            let got: Vec<Vec<usize>> = queries
                .par_iter()
                .map(|query| owners(set.nearest(query, 100, scan, |_| true)))
                .collect();
            [10, 100].map(|k| {
                let overlap: usize = exact
                    .iter()
                    .zip(&got)
                    .map(|(exact, got)| {
                        let exact: HashSet<usize> = exact.iter().take(k).copied().collect();
                        got.iter().take(k).filter(|o| exact.contains(o)).count()
                    })
                    .sum();
                overlap as f64 / (exact.len() * k).max(1) as f64
            })
        })
        .collect()
}

/// Imports `n` memories as `recall import` writes them (calls of
/// [`IMPORT_BATCH`], a flush at the end), with a progress bar unless
/// `quiet`; returns the rate in memories/s and how long the table
/// compaction and index merges the import left running took to finish
/// (waited for, so that later timings do not share the cores with them).
pub(crate) async fn import_timed<I>(
    engine: &Engine,
    memories: I,
    n: usize,
    quiet: bool,
    mut committed: impl FnMut(&[Remembered]),
) -> anyhow::Result<(f64, f64)>
where
    I: IntoIterator<Item = NewMemory>,
    I::IntoIter: Send,
{
    let bar = crate::progress::bar(n as u64, "importing");
    if quiet {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let started = Instant::now();
    engine
        .import(memories, IMPORT_BATCH, |outcomes| {
            committed(outcomes);
            bar.inc(outcomes.len() as u64);
        })
        .await?;
    engine.flush().await?;
    let rate = n as f64 / started.elapsed().as_secs_f64();
    let settling = Instant::now();
    engine.wait_for_maintenance().await?;
    let settle_s = settling.elapsed().as_secs_f64();
    bar.finish_and_clear();
    Ok((rate, settle_s))
}

/// Where size `n`'s store goes: `keep/<n>` (emptied first) when asked to
/// keep it, else inside `temp`.
pub(crate) fn store_dir(keep: Option<&Path>, temp: &Path, n: usize) -> anyhow::Result<PathBuf> {
    let Some(keep) = keep else {
        return Ok(temp.join("store"));
    };
    let dir = keep.join(n.to_string());
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Corpus item `i` as a write, with sentence vectors when asked.
pub(crate) fn write_of(i: usize, m: &SyntheticMemory, sentence_vectors: bool) -> NewMemory {
    if sentence_vectors {
        with_sentence_vectors(i, m)
    } else {
        to_new(m)
    }
}

/// Peak resident set size of this process so far, in MiB (Linux).
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// A consolidation pass over the whole tenant (`Engine::consolidate`),
/// timed: a dry run (the batch and the default's proposals), then the pass
/// applied. The process's peak resident memory is reset before it
/// (`/proc/self/clear_refs`), so `peak_rss_mib` is the pass's own.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ConsolidationTimed {
    pub dry_run_ms: f64,
    pub proposals: usize,
    pub apply_ms: f64,
    pub applied: usize,
    pub rss_mib_before: f64,
    pub peak_rss_mib: f64,
}

async fn consolidate_timed(engine: &Engine) -> anyhow::Result<ConsolidationTimed> {
    let rss_mib_before = crate::open_probe::status_mib("VmRSS:");
    // "5" resets the peak to the current resident size (proc(5)); without
    // it (an older kernel) the peak is the whole run's.
    if let Err(e) = std::fs::write("/proc/self/clear_refs", "5") {
        tracing::warn!(error = %e, "peak RSS not reset: the consolidation's peak is the run's");
    }
    let t = Instant::now();
    let preview = engine.consolidate(TENANT).dry_run(true).execute().await?;
    let dry_run_ms = t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let pass = engine.consolidate(TENANT).execute().await?;
    let apply_ms = t.elapsed().as_secs_f64() * 1e3;
    Ok(ConsolidationTimed {
        dry_run_ms,
        proposals: preview.proposals.len(),
        apply_ms,
        applied: pass.proposals.iter().filter(|p| p.applied).count(),
        rss_mib_before,
        peak_rss_mib: crate::open_probe::status_mib("VmHWM:"),
    })
}

/// How the vector stage is handed a batch of queries.
#[derive(Clone, Copy)]
enum Batching {
    /// One [`VectorSet::nearest_many`] call for the whole batch: each tile
    /// of sign codes is read once per group of queries.
    Together,
    /// [`VectorSet::nearest`] per query, the queries spread over the pool
    /// (and each query's scan over its chunks, where threads are idle): what
    /// concurrent recalls do.
    OneByOne,
}

/// Queries per second of the vector stage over the batch `queries` in a
/// rayon pool of 1 thread and in one of 2. The two pools take turns pass
/// by pass, and each rate comes from its median pass: a stall of the
/// machine or a background task then slows both alike instead of the one
/// that happened to run, and the ratio of the two is measured in one run;
/// the speed-up is also given as the median of the pairs' own ratios
/// ([`ScanRates::paired_speedup`]). (Timed one after the other, a second
/// each, the batched ratio at a million rows ranged 1.12–1.96 in 13 runs
/// on the 2-core machine.)
fn scan_throughputs(
    set: &VectorSet,
    queries: &[Vec<f32>],
    scan: ScanConfig,
    batching: Batching,
) -> anyhow::Result<ScanRates> {
    let pools = [1, 2].map(|threads| rayon::ThreadPoolBuilder::new().num_threads(threads).build());
    let [Ok(one), Ok(two)] = pools else {
        anyhow::bail!("could not start the rayon pools of 1 and 2 threads");
    };
    let refs: Vec<&[f32]> = queries.iter().map(Vec::as_slice).collect();
    let pass = |pool: &rayon::ThreadPool| {
        let started = Instant::now();
        pool.install(|| match batching {
            Batching::Together => {
                std::hint::black_box(set.nearest_many(&refs, 100, scan, |_, _| true));
            }
            Batching::OneByOne => refs.par_iter().for_each(|q| {
                std::hint::black_box(set.nearest(q, 100, scan, |_| true));
            }),
        });
        started.elapsed().as_secs_f64()
    };
    // A pool's first pass meets cold threads and caches; in 2 of 3 runs at
    // a million rows the first batched pair's speed-up was the lowest of
    // nine (×1.72 and ×1.64, medians ×1.94). It is not timed.
    pass(&one);
    pass(&two);
    let (mut times_one, mut times_two) = (Vec::new(), Vec::new());
    let enough = |times: &[f64]| {
        times.len() >= MIN_SCAN_PASSES && times.iter().sum::<f64>() >= MIN_SCAN_TIME
    };
    while !enough(&times_one) || !enough(&times_two) {
        times_one.push(pass(&one));
        times_two.push(pass(&two));
    }
    let paired_speedup = median_pair_speedup(&times_one, &times_two);
    let rate = |times: &mut Vec<f64>| {
        times.sort_by(f64::total_cmp);
        queries.len() as f64 / percentile(times, 50.0)
    };
    Ok(ScanRates {
        one: rate(&mut times_one),
        two: rate(&mut times_two),
        paired_speedup,
    })
}

/// The median over pairs of passes `(times_one[i], times_two[i])` of the
/// pair's speed-up `times_one[i] / times_two[i]`.
fn median_pair_speedup(times_one: &[f64], times_two: &[f64]) -> f64 {
    let mut speedups: Vec<f64> = times_one
        .iter()
        .zip(times_two)
        .map(|(one, two)| one / two)
        .collect();
    speedups.sort_by(f64::total_cmp);
    percentile(&speedups, 50.0)
}

/// What [`scan_throughputs`] measures.
struct ScanRates {
    /// Queries per second on 1 thread, from its median pass.
    one: f64,
    /// Queries per second on 2 threads, from its median pass.
    two: f64,
    /// The median over adjacent pairs of passes (one on each pool) of the
    /// pair's speed-up: a drift of the host's speed that lasts longer than
    /// a pair cancels out of each pair, where [`ScanRates::medians_speedup`] compares the
    /// median passes, which may come from different stretches.
    paired_speedup: f64,
}

impl ScanRates {
    /// The speed-up as the ratio of the two median passes' rates.
    fn medians_speedup(&self) -> f64 {
        self.two / self.one
    }
}

/// The fewest passes over the batch each pool runs, and the least time (in
/// seconds) each spends: a batched pass of 100 queries took 0.15–0.4 s at
/// a million rows and 35–70 ms at 100k on the 2-core machine.
const MIN_SCAN_PASSES: usize = 9;
/// See [`MIN_SCAN_PASSES`].
const MIN_SCAN_TIME: f64 = 1.0;

/// Near copies written after the import, at cosines spread evenly over
/// 0.83–0.98 to a stored memory.
const NEAR_COPIES: usize = 200;

/// Of [`NEAR_COPIES`] near copies of stored memories, the share whose write
/// finds the original (deduplicated into it, or stored with it among
/// `similar_to`): `(dedup band, similar band)`, i.e. copies at cosine
/// ≥ 0.94 and below it. The write path's search visits only the lists
/// nearest each item in a large tenant; this is what that shortcut costs.
/// `ids[i]` holds `base[i]`.
async fn near_copies_found(
    engine: &Engine,
    base: &[SyntheticMemory],
    ids: &[Uuid],
    dedup_threshold: f32,
) -> anyhow::Result<(f64, f64)> {
    // (found, written) per band: dedup, similar.
    let mut bands = [(0usize, 0usize); 2];
    for i in 0..NEAR_COPIES {
        let row = (i * 104_729 + 17) % base.len();
        let cosine = 0.83 + 0.15 * i as f32 / (NEAR_COPIES - 1) as f32;
        let copy = NewMemory::new(
            TENANT,
            base[row].bank.clone(),
            Kind::Note,
            format!("near copy {i} of memory {row}"),
        )
        .vector(near_copy(i as u64, &base[row].vector, cosine));
        let original = ids[row];
        let found = match engine.remember(copy).await? {
            Remembered::Deduplicated { id, .. } => id == original,
            Remembered::Stored { similar_to, .. } | Remembered::Proposed { similar_to, .. } => {
                similar_to.iter().any(|s| s.id == original)
            }
        };
        let band = &mut bands[usize::from(cosine < dedup_threshold)];
        band.0 += usize::from(found);
        band.1 += 1;
    }
    let share = |(found, written): (usize, usize)| found as f64 / written.max(1) as f64;
    Ok((share(bands[0]), share(bands[1])))
}

/// Runs the command.
pub async fn scale_command(args: &ScaleArgs) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    let mut md = String::from(
        "| memories | import /s | near copies found ≥ 0.94 / < 0.94 | remember p50 / p99 ms | recall p50 / p99 ms | vector recall@10 / @100 vs exact | batched scan q/s 1 thr | 2 thr | × (medians / paired) | one-by-one scan q/s 1 thr | 2 thr | × (medians / paired) | recall q/s 1 caller | 2 callers | × | review queue ms (similar pairs) | knowledge map ms (elements documented / asked) | peak RSS MiB |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let mut md_open = String::from(
        "| memories | open to first answer s (`Engine::open` s) | RSS MiB after the first answer / while recalling (anon / file) | peak RSS MiB | recall p50 / p99 ms | state MiB: memories / lookups / vectors / codes / partitions / sentence vectors (total) | vector rows mapped MiB |\n|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let (mut p50s, mut p99s) = (Vec::new(), Vec::new());
    let scan = ScanConfig {
        rescore_pool: args.rescore_pool,
        probe_share: args.probe_share,
        ..ScanConfig::default()
    };
    if args.lean {
        return crate::lean::lean_scale_command(args, scan).await;
    }
    for &n in &args.sizes {
        let temp = tempfile::tempdir()?;
        let dir = store_dir(args.keep.as_deref(), temp.path(), n)?;
        let scoring = ScoringConfig {
            scan,
            ..ScoringConfig::default()
        };
        let engine = Engine::open(bench_config(&dir).scoring(scoring)).await?;
        let data = corpus(n + EXTRA_WRITES);
        let (base, extra) = data.split_at(n);
        let mut ids = Vec::with_capacity(n);
        let (import_rate, settle_s) = import_timed(
            &engine,
            base.iter()
                .enumerate()
                .map(|(i, m)| write_of(i, m, args.sentence_vectors)),
            n,
            args.quiet,
            |outcomes| ids.extend(outcomes.iter().map(Remembered::id)),
        )
        .await?;

        let mut remember_ms = Vec::new();
        for (i, m) in extra[..100].iter().enumerate() {
            let t = Instant::now();
            engine
                .remember(write_of(n + i, m, args.sentence_vectors))
                .await?;
            remember_ms.push(t.elapsed().as_secs_f64() * 1e3);
        }
        remember_ms.sort_by(f64::total_cmp);
        let (dedup_found, similar_found) =
            near_copies_found(&engine, base, &ids, WriteConfig::default().dedup_threshold).await?;

        // The review queue, whose similar-pair search asks for the
        // neighbours of the most recent memories (the near copies just
        // written among them).
        let reviewing = Instant::now();
        let similar_pairs = engine.review_queue(TENANT).await?.similar.len();
        let review_ms = reviewing.elapsed().as_secs_f64() * 1e3;

        // The knowledge map a host asks for over its own files: the
        // corpus's services and 1,000 paths nothing was written about.
        let mut elements: Vec<String> = base.iter().map(|m| m.element.clone()).collect();
        elements.sort_unstable();
        elements.dedup();
        elements.extend((0..1_000).map(|i| format!("src/module_{i}.rs")));
        let mapping = Instant::now();
        let documented = engine.knowledge_map(TENANT, &elements).await?.documented;
        let map_ms = mapping.elapsed().as_secs_f64() * 1e3;

        let readable = banks(&data);
        let queries = queries_near(base, n, args.queries);
        let recall_ms = time_recalls(&engine, &readable, &queries).await?;

        // End-to-end throughput, 1 then 2 concurrent callers.
        let mut callers_qps = Vec::new();
        for callers in [1usize, 2] {
            let started = Instant::now();
            let mut tasks = Vec::new();
            for c in 0..callers {
                let engine = engine.clone();
                let readable = readable.clone();
                let mine: Vec<(String, Vec<f32>)> =
                    queries.iter().skip(c).step_by(callers).cloned().collect();
                tasks.push(tokio::spawn(async move {
                    for (text, vector) in mine {
                        engine
                            .recall(TENANT, text)
                            .read(readable.iter().cloned())
                            .query_vector(vector)
                            .execute()
                            .await?;
                    }
                    Ok::<(), recall::Error>(())
                }));
            }
            for t in tasks {
                t.await??;
            }
            callers_qps.push(queries.len() as f64 / started.elapsed().as_secs_f64());
        }

        // The vector stage alone: recall@10 and @100 of the coded scan vs
        // exact, both from one scan of each kind for 100 (recall's candidate
        // pool, what recall asks the scan for), and batched throughput on
        // 1 vs 2 rayon threads. The writes above may have started index
        // merges: the throughputs would share the cores with them.
        engine.wait_for_maintenance().await?;
        let mut set = VectorSet::new(DIM);
        for (i, m) in base.iter().enumerate() {
            set.push(i, &m.vector);
        }
        let [vector_recall, vector_recall_100] = scan_exactness(&set, &[scan])[0];
        let batch: Vec<Vec<f32>> = queries.iter().map(|q| q.1.clone()).collect();
        let batched = scan_throughputs(&set, &batch, scan, Batching::Together)?;
        let alone = scan_throughputs(&set, &batch, scan, Batching::OneByOne)?;
        drop(set);
        let rss = peak_rss_mib();
        let consolidation = consolidate_timed(&engine).await?;

        // Opening the store again, in a process of its own.
        engine.flush().await?;
        engine.wait_for_maintenance().await?;
        drop(engine);
        let probe = run_open_probe(
            &dir,
            &ProbeQueries {
                banks: readable.clone(),
                queries: queries.iter().take(100).cloned().collect(),
            },
            scan,
        )?;

        let (p50, p99) = (percentile(&recall_ms, 50.0), percentile(&recall_ms, 99.0));
        p50s.push((n as f64, p50));
        p99s.push((n as f64, p99));
        md.push_str(&format!(
            "| {n} | {import_rate:.0} | {dedup_found:.3} / {similar_found:.3} | {:.2} / {:.2} | {p50:.2} / {p99:.2} | {vector_recall:.3} / {vector_recall_100:.3} | {:.0} | {:.0} | {:.2} / {:.2} | {:.0} | {:.0} | {:.2} / {:.2} | {:.0} | {:.0} | {:.2} | {review_ms:.0} ({similar_pairs}) | {map_ms:.0} ({documented} / {}) | {} |\n",
            percentile(&remember_ms, 50.0),
            percentile(&remember_ms, 99.0),
            batched.one,
            batched.two,
            batched.medians_speedup(),
            batched.paired_speedup,
            alone.one,
            alone.two,
            alone.medians_speedup(),
            alone.paired_speedup,
            callers_qps[0],
            callers_qps[1],
            callers_qps[1] / callers_qps[0],
            elements.len(),
            rss.map_or("–".into(), |r| format!("{r:.0}")),
        ));
        let st = &probe.state_mib;
        md_open.push_str(&format!(
            "| {n} | {:.2} ({:.2}) | {:.0} / {:.0} ({:.0} / {:.0}) | {:.0} | {:.2} / {:.2} | {:.0} / {:.0} / {:.0} / {:.0} / {:.0} / {:.0} ({:.0}) | {:.0} |\n",
            probe.open_s,
            probe.engine_open_s,
            probe.rss_mib_open,
            probe.rss_mib_recall,
            probe.rss_anon_mib_recall,
            probe.rss_file_mib_recall,
            probe.peak_rss_mib,
            probe.recall_p50_ms,
            probe.recall_p99_ms,
            st.memories,
            st.lookups,
            st.vectors,
            st.vector_codes,
            st.vector_partitions,
            st.sentence_vectors,
            st.total,
            st.mapped_vectors,
        ));
        rows.push(json!({
            "memories": n,
            "open_s": probe.open_s,
            "rss_mib_recall": probe.rss_mib_recall,
            "open": probe,
            "sentence_vectors": args.sentence_vectors,
            "import_per_s": import_rate,
            "settle_after_import_s": settle_s,
            "near_copies_found_dedup_band": dedup_found,
            "near_copies_found_similar_band": similar_found,
            "remember_p50_ms": percentile(&remember_ms, 50.0),
            "remember_p99_ms": percentile(&remember_ms, 99.0),
            "recall_p50_ms": p50,
            "recall_p99_ms": p99,
            "rescore_pool": args.rescore_pool,
            "probe_share": args.probe_share,
            "vector_recall_at_10": vector_recall,
            "vector_recall_at_100": vector_recall_100,
            "scan_qps_1_thread": batched.one,
            "scan_qps_2_threads": batched.two,
            "scan_speedup_2_vs_1": batched.medians_speedup(),
            "scan_speedup_2_vs_1_paired": batched.paired_speedup,
            "scan_one_by_one_qps_1_thread": alone.one,
            "scan_one_by_one_qps_2_threads": alone.two,
            "scan_one_by_one_speedup_2_vs_1": alone.medians_speedup(),
            "scan_one_by_one_speedup_2_vs_1_paired": alone.paired_speedup,
            "recall_qps_1_caller": callers_qps[0],
            "recall_qps_2_callers": callers_qps[1],
            "review_queue_ms": review_ms,
            "review_similar_pairs": similar_pairs,
            "knowledge_map_ms": map_ms,
            "knowledge_map_elements": elements.len(),
            "knowledge_map_documented": documented,
            "peak_rss_mib": rss,
            "consolidation": consolidation,
        }));
        println!(
            "consolidation of {n}: dry run {:.0} ms ({} proposals), applied {:.0} ms ({} applied), peak RSS during it {:.0} MiB (before {:.0})",
            consolidation.dry_run_ms,
            consolidation.proposals,
            consolidation.apply_ms,
            consolidation.applied,
            consolidation.peak_rss_mib,
            consolidation.rss_mib_before,
        );
        println!("{md}\n{md_open}");
    }
    md.push_str("\nOpened again in a process of its own (`recall-bench open-probe`: no corpus, no second vector set), answering 100 recalls:\n\n");
    md.push_str(&md_open);
    if let Some(parent) = args.json.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    let svg = args.json.with_extension("svg");
    let series: Vec<Series> = vec![
        ("recall p50 ms".into(), p50s),
        ("recall p99 ms".into(), p99s),
    ];
    if args.sizes.len() > 1 {
        plot(
            &svg,
            "recall latency vs memories (one tenant)",
            "memories",
            "ms",
            &series,
            true,
        )?;
    }
    if args.sentence_vectors {
        md.push_str("\nEvery memory has a vector per sentence (2 each), so recall also scans twice as many sentence rows.\n");
    }
    md.push_str("\nQuery embedding excluded (vectors given). In the first table, peak RSS is the bench process's VmHWM after that size (cumulative, the corpus and a second vector set included); in the second, the probe's own.\n");
    write_json(&args.json, &json!({"command": "scale", "scale": rows}))?;
    std::fs::write(markdown_path(&args.json), &md)?;
    println!(
        "wrote {}, {} and {}",
        args.json.display(),
        markdown_path(&args.json).display(),
        svg.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::speed::{fill, open_engine};

    #[tokio::test]
    async fn near_copies_are_credited_only_to_their_originals() {
        let data = corpus(3_000);
        let dedup = WriteConfig::default().dedup_threshold;
        let (dir, other) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        // Small enough for the write path to search every row: all found.
        let engine = open_engine(dir.path()).await.unwrap();
        let ids = fill(&engine, &data).await.unwrap();
        let found = near_copies_found(&engine, &data, &ids, dedup)
            .await
            .unwrap();
        assert_eq!(found, (1.0, 1.0));
        // The same copies, in a fresh engine, credited to the wrong memories.
        let engine = open_engine(other.path()).await.unwrap();
        let mut ids = fill(&engine, &data).await.unwrap();
        ids.rotate_left(1);
        let found = near_copies_found(&engine, &data, &ids, dedup)
            .await
            .unwrap();
        assert_eq!(found, (0.0, 0.0));
    }

    #[test]
    fn paired_speedup_cancels_a_change_of_host_speed_that_the_medians_do_not() {
        // The host halves its speed between the two passes of the third
        // pair; every other pair shows a speed-up of 2.
        let one = [1.0, 1.0, 1.0, 2.0, 2.0];
        let two = [0.5, 0.5, 1.0, 1.0, 1.0];
        assert_eq!(median_pair_speedup(&one, &two), 2.0);
        // The median passes come from different stretches of the run.
        assert_eq!(percentile(&one, 50.0) / percentile(&two, 50.0), 1.0);
        // One stalled pass moves the median of five pairs not at all.
        let stalled = [0.5, 0.5, 2.0, 0.5, 0.5];
        assert_eq!(median_pair_speedup(&[1.0; 5], &stalled), 2.0);
    }
}
