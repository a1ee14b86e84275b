//! `recall-bench scale --lean`: the sizes the full `scale` run cannot hold
//! (ten million memories), measured with only what an agent's process and
//! the exactness figure need.
//!
//! The full run keeps the corpus and a second vector set in memory beside
//! the engine (about 30 GB at 10M) and runs consolidation (10.9 GB peak at
//! 1M). This one streams the corpus ([`recall_datasets::SyntheticCorpus`]) into the engine,
//! keeping only the queries' targets; times recalls; reopens the store in
//! a process of its own ([`run_open_probe`]); and only then, with the
//! engine gone, streams the corpus a second time into a bare
//! [`VectorSet`] for the vector stage's recall@10 and @100 against the
//! exact scan. The corpus, queries and exactness probes are the full run's,
//! so its rows and these compare at the same size.

use std::collections::{BTreeSet, HashMap};

use recall::{Engine, ScoringConfig};
use recall_datasets::{SyntheticMemory, query_near};
use recall_indexer::{ScanConfig, VectorSet};
use serde_json::json;

use crate::open_probe::{ProbeQueries, run_open_probe, status_mib};
use crate::report::{markdown_path, write_json};
use crate::scale::{
    EXACTNESS_PROBES, EXTRA_WRITES, ScaleArgs, import_timed, scan_exactness, store_dir, write_of,
};
use crate::speed::{DIM, bench_corpus, percentile, time_recalls};

/// The queries `speed::queries_near` would ask of the first `n` items,
/// gathered while the corpus streams past: the item each query is near
/// is the same, so are the text and vector.
struct QueryTargets {
    /// Corpus index → the queries near it.
    wanted: HashMap<usize, Vec<usize>>,
    queries: Vec<Option<(String, Vec<f32>)>>,
}

impl QueryTargets {
    fn new(n: usize, count: usize) -> QueryTargets {
        let mut wanted: HashMap<usize, Vec<usize>> = HashMap::new();
        for q in 0..count {
            wanted.entry((q * 7919) % n).or_default().push(q);
        }
        QueryTargets {
            wanted,
            queries: vec![None; count],
        }
    }

    fn see(&mut self, i: usize, m: &SyntheticMemory) {
        for &q in self.wanted.get(&i).into_iter().flatten() {
            let words: Vec<&str> = m.content.split_whitespace().take(4).collect();
            self.queries[q] = Some((words.join(" "), query_near(q as u64, &m.vector)));
        }
    }

    fn into_queries(self) -> anyhow::Result<Vec<(String, Vec<f32>)>> {
        self.queries
            .into_iter()
            .map(|q| q.ok_or_else(|| anyhow::anyhow!("a query's target was not in the corpus")))
            .collect()
    }
}

/// The first `n` items of the corpus the full run generates for size `n`
/// (it generates [`EXTRA_WRITES`] more for its single writes, and the
/// corpus's topics follow its whole length).
fn scale_items(n: usize) -> impl Iterator<Item = SyntheticMemory> {
    bench_corpus(n + EXTRA_WRITES).take(n)
}

/// The vector stage's recall@10 and @100 against exact under each of
/// `scans` ([`scan_exactness`]), on a set built from a second pass over
/// the corpus (the engine is closed by then).
fn vector_exactness(n: usize, scans: &[ScanConfig]) -> Vec<[f64; 2]> {
    let mut set = VectorSet::new(DIM);
    for (i, m) in scale_items(n).enumerate() {
        set.push(i, &m.vector);
    }
    scan_exactness(&set, scans)
}

/// Runs `scale --lean`.
pub async fn lean_scale_command(args: &ScaleArgs, scan: ScanConfig) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    let mut md = String::from(
        "| memories | reopened with probe share | import /s (settle s) | bench peak RSS MiB after import | recall p50 / p99 ms (probe share of `--probe-share`) | open to first answer s (`Engine::open` s) | RSS MiB while recalling (anon / file) | probe peak RSS MiB | reopened recall p50 / p99 ms | vector recall@10 / @100 vs exact |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for &n in &args.sizes {
        let temp = tempfile::tempdir()?;
        let dir = store_dir(args.keep.as_deref(), temp.path(), n)?;
        let engine = Engine::open(crate::speed::bench_config(&dir).scoring(ScoringConfig {
            scan,
            ..ScoringConfig::default()
        }))
        .await?;
        let mut targets = QueryTargets::new(n, args.queries);
        let mut banks = BTreeSet::new();
        let (import_rate, settle_s) = import_timed(
            &engine,
            scale_items(n).enumerate().map(|(i, m)| {
                targets.see(i, &m);
                if !banks.contains(&m.bank) {
                    banks.insert(m.bank.clone());
                }
                write_of(i, &m, args.sentence_vectors)
            }),
            n,
            args.quiet,
            |_| {},
        )
        .await?;
        let peak_import = status_mib("VmHWM:");

        let readable: Vec<String> = banks.into_iter().collect();
        let queries = targets.into_queries()?;
        let recall_ms = time_recalls(&engine, &readable, &queries).await?;
        engine.flush().await?;
        engine.wait_for_maintenance().await?;
        engine.close().await?;
        drop(engine);

        let scans: Vec<ScanConfig> = std::iter::once(scan.probe_share)
            .chain(args.reopen_probe_shares.iter().copied())
            .map(|probe_share| ScanConfig {
                probe_share,
                ..scan
            })
            .collect();
        let asked = ProbeQueries {
            banks: readable,
            queries: queries.iter().take(100).cloned().collect(),
        };
        let probes = scans
            .iter()
            .map(|&scan| run_open_probe(&dir, &asked, scan))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let exactness = vector_exactness(n, &scans);
        let (p50, p99) = (percentile(&recall_ms, 50.0), percentile(&recall_ms, 99.0));
        for ((probe, [at_10, at_100]), scan) in probes.into_iter().zip(exactness).zip(&scans) {
            md.push_str(&format!(
                "| {n} | {} | {import_rate:.0} ({settle_s:.1}) | {peak_import:.0} | {p50:.2} / {p99:.2} | {:.2} ({:.2}) | {:.0} ({:.0} / {:.0}) | {:.0} | {:.2} / {:.2} | {at_10:.3} / {at_100:.3} |\n",
                scan.probe_share,
                probe.open_s,
                probe.engine_open_s,
                probe.rss_mib_recall,
                probe.rss_anon_mib_recall,
                probe.rss_file_mib_recall,
                probe.peak_rss_mib,
                probe.recall_p50_ms,
                probe.recall_p99_ms,
            ));
            rows.push(json!({
                "memories": n,
                "lean": true,
                "open_s": probe.open_s,
                "rss_mib_recall": probe.rss_mib_recall,
                "open": probe,
                "sentence_vectors": args.sentence_vectors,
                "import_per_s": import_rate,
                "settle_after_import_s": settle_s,
                "peak_rss_mib_import": peak_import,
                "recall_p50_ms": p50,
                "recall_p99_ms": p99,
                "recall_probe_share": args.probe_share,
                "rescore_pool": scan.rescore_pool,
                "probe_share": scan.probe_share,
                "vector_recall_at_10": at_10,
                "vector_recall_at_100": at_100,
            }));
        }
        println!("{md}");
    }
    md.push_str(&format!(
        "\n`scale --lean`, rescore pool {}: the corpus streamed in (never held), {} recalls timed in the importing process (query vectors given), then the store opened again in a process of its own for each probe share, answering 100; the vector stage's exactness at that share from {EXACTNESS_PROBES} queries on a second pass over the corpus after the engine closed.\n",
        scan.rescore_pool, args.queries,
    ));
    if let Some(parent) = args.json.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    write_json(
        &args.json,
        &json!({"command": "scale", "lean": true, "scale": rows}),
    )?;
    std::fs::write(markdown_path(&args.json), &md)?;
    println!(
        "wrote {} and {}",
        args.json.display(),
        markdown_path(&args.json).display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::speed::{corpus, queries_near};

    #[test]
    fn streamed_queries_are_the_full_runs() {
        let n = 3_000;
        let mut targets = QueryTargets::new(n, 40);
        for (i, m) in scale_items(n).enumerate() {
            targets.see(i, &m);
        }
        let streamed = targets.into_queries().unwrap();
        let full = corpus(n + EXTRA_WRITES);
        assert_eq!(streamed, queries_near(&full[..n], n, 40));
    }

    #[test]
    fn a_missing_target_is_an_error() {
        // Query 1 is near item 7919 % 100 = 19, which ten items never reach.
        let mut targets = QueryTargets::new(100, 2);
        for (i, m) in bench_corpus(10).enumerate() {
            targets.see(i, &m);
        }
        assert!(targets.into_queries().is_err());
    }
}
