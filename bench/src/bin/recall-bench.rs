//! `recall-bench`: speed runs that print tables and write JSON.
//!
//! `recall-bench scale [--sizes 10000,100000] [--queries 500] [--json OUT]`:
//! per corpus size (one tenant), bulk-import rate with given vectors,
//! `remember` latency, recall p50/p99 (query embedding excluded: the query
//! vector is given), and the coded scan's recall@10 against the exact scan.

use std::time::Instant;

use anyhow::{Context, bail};
use recall_bench::{TENANT, banks, corpus, fill, open_engine, percentile, to_new};
use recall_datasets::query_near;
use recall_indexer::{ScanConfig, VectorSet};
use serde_json::json;

struct Args {
    sizes: Vec<usize>,
    queries: usize,
    json: Option<String>,
}

fn parse(mut argv: impl Iterator<Item = String>) -> anyhow::Result<Args> {
    let Some(cmd) = argv.next() else {
        bail!("usage: recall-bench scale [--sizes 10000,100000] [--queries 500] [--json OUT]");
    };
    if cmd != "scale" {
        bail!("unknown command {cmd:?}; try `recall-bench scale`");
    }
    let mut args = Args {
        sizes: vec![10_000, 100_000],
        queries: 500,
        json: None,
    };
    while let Some(flag) = argv.next() {
        let value = argv
            .next()
            .with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--sizes" => {
                args.sizes = value.split(',').map(str::parse).collect::<Result<_, _>>()?;
            }
            "--queries" => args.queries = value.parse()?,
            "--json" => args.json = Some(value),
            other => bail!("unknown flag {other}"),
        }
    }
    Ok(args)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = parse(std::env::args().skip(1))?;
    let mut rows = Vec::new();
    println!(
        "| memories | import /s | remember p50 ms | recall p50 ms | recall p99 ms | coded recall@10 |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    for &n in &args.sizes {
        let dir = tempfile::tempdir()?;
        let engine = open_engine(dir.path()).await?;
        let data = corpus(n + 200);
        let (base, extra) = data.split_at(n);
        let started = Instant::now();
        fill(&engine, base).await?;
        let import_rate = n as f64 / started.elapsed().as_secs_f64();

        let mut remember_ms = Vec::new();
        for m in &extra[..100] {
            let t = Instant::now();
            engine.remember(to_new(m)).await?;
            remember_ms.push(t.elapsed().as_secs_f64() * 1e3);
        }
        remember_ms.sort_by(f64::total_cmp);

        let readable = banks(&data);
        let mut recall_ms = Vec::new();
        for q in 0..args.queries {
            let target = &base[(q * 7919) % n];
            let query = query_near(q as u64, &target.vector);
            let words: Vec<&str> = target.content.split_whitespace().take(4).collect();
            let t = Instant::now();
            engine
                .recall(TENANT, words.join(" "))
                .read(readable.iter().cloned())
                .query_vector(query)
                .execute()
                .await?;
            recall_ms.push(t.elapsed().as_secs_f64() * 1e3);
        }
        recall_ms.sort_by(f64::total_cmp);

        // The scan alone: coded (sign codes + re-scoring) against exact.
        let mut set = VectorSet::new(recall_bench::DIM);
        for (i, m) in base.iter().enumerate() {
            set.push(i, &m.vector);
        }
        let coded_scan = ScanConfig {
            exact_limit: 0,
            ..ScanConfig::default()
        };
        let mut overlap = 0usize;
        let probes = 200;
        for q in 0..probes {
            let query = query_near(10_000 + q as u64, &base[(q * 104_729) % n].vector);
            let exact: Vec<usize> = set
                .nearest_exact(&query, 10, |_| true)
                .into_iter()
                .map(|h| h.0)
                .collect();
            let coded = set.nearest(&query, 10, coded_scan, |_| true);
            overlap += coded.iter().filter(|h| exact.contains(&h.0)).count();
        }
        let coded_recall = overlap as f64 / (probes * 10) as f64;

        let row = json!({
            "memories": n,
            "import_per_s": import_rate,
            "remember_p50_ms": percentile(&remember_ms, 50.0),
            "remember_p99_ms": percentile(&remember_ms, 99.0),
            "recall_p50_ms": percentile(&recall_ms, 50.0),
            "recall_p99_ms": percentile(&recall_ms, 99.0),
            "coded_recall_at_10": coded_recall,
        });
        println!(
            "| {n} | {:.0} | {:.2} | {:.2} | {:.2} | {:.3} |",
            import_rate,
            percentile(&remember_ms, 50.0),
            percentile(&recall_ms, 50.0),
            percentile(&recall_ms, 99.0),
            coded_recall
        );
        rows.push(row);
    }
    if let Some(path) = args.json {
        std::fs::write(
            &path,
            serde_json::to_string_pretty(&json!({"scale": rows}))?,
        )?;
        println!("wrote {path}");
    }
    Ok(())
}
