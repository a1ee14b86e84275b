//! criterion benches of the hot paths, with `Throughput` set. Run in the dev
//! profile the rest of the workspace uses (see bench/README.md):
//! `cargo bench --profile dev -p recall-bench`.

use criterion::measurement::WallTime;
use criterion::{
    BenchmarkGroup, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main,
};
use recall::{
    Config, Engine, Kind, ModelSource, NewMemory, ProposalPolicy, ScoringConfig, decay_multiplier,
    drift_multiplier, normalize_bm25, relevance, usage_multiplier,
};
use recall_bench::{TENANT, banks, corpus, fill, open_engine, to_new, with_sentence_vectors};
use recall_datasets::{SyntheticMemory, query_near};
use recall_indexer::{ScanConfig, VectorSet};

/// Queries in the batched scan bench.
const BATCH_QUERIES: usize = 64;

fn vector_scan(c: &mut Criterion) {
    let mut group = c.benchmark_group("vector_scan");
    for n in [10_000usize, 100_000] {
        let data = corpus(n);
        let mut set = VectorSet::new(recall_bench::DIM);
        for (i, m) in data.iter().enumerate() {
            set.push(i, &m.vector);
        }
        let query = query_near(1, &data[n / 2].vector);
        group.throughput(criterion::Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::new("exact", n), &n, |b, _| {
            b.iter(|| set.nearest_exact(&query, 100, |_| true))
        });
        let coded = ScanConfig {
            exact_limit: 0,
            ..ScanConfig::default()
        };
        group.bench_with_input(BenchmarkId::new("coded", n), &n, |b, _| {
            b.iter(|| set.nearest(&query, 100, coded, |_| true))
        });
        // With a filter that reads per-row state, as recall's eligibility
        // check does (bank readable, active): it takes 4 rows in 5.
        let state: Vec<(usize, bool)> = (0..n).map(|i| (i % 5, i % 50 != 7)).collect();
        let readable = [true, true, false, true, true];
        group.bench_with_input(BenchmarkId::new("coded_filtered", n), &n, |b, _| {
            b.iter(|| {
                set.nearest(&query, 100, coded, |owner| {
                    let (bank, active) = state[owner];
                    readable[bank] && active
                })
            })
        });
        // A batch in one call: rows × queries compared per second.
        let batch: Vec<Vec<f32>> = (0..BATCH_QUERIES)
            .map(|q| query_near(100 + q as u64, &data[(q * 7_919) % n].vector))
            .collect();
        let batch: Vec<&[f32]> = batch.iter().map(Vec::as_slice).collect();
        group.throughput(Throughput::Elements((n * BATCH_QUERIES) as u64));
        group.bench_with_input(BenchmarkId::new("coded_batch_64", n), &n, |b, _| {
            b.iter(|| set.nearest_many(&batch, 100, coded, |_, _| true))
        });
    }
    group.finish();
}

/// One recall per iteration, each for the first words of another stored
/// memory, with a query vector near its own.
fn bench_recall(
    group: &mut BenchmarkGroup<'_, WallTime>,
    runtime: &tokio::runtime::Runtime,
    engine: &Engine,
    base: &[SyntheticMemory],
    readable: &[String],
) {
    let mut q = 0usize;
    group.bench_function("recall", |b| {
        b.iter(|| {
            q += 1;
            let target = &base[(q * 7919) % base.len()];
            let words: Vec<&str> = target.content.split_whitespace().take(4).collect();
            runtime.block_on(
                engine
                    .recall(TENANT, words.join(" "))
                    .read(readable.iter().cloned())
                    .query_vector(query_near(q as u64, &target.vector))
                    .execute(),
            )
        })
    });
}

fn engine_paths(c: &mut Criterion) {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => panic!("tokio runtime: {e}"),
    };
    for n in [10_000usize, 100_000] {
        let dir = tempfile::tempdir().expect("temp dir");
        let data = corpus(n + 5_000);
        let (base, extra) = data.split_at(n);
        let engine = runtime.block_on(async {
            let engine = open_engine(dir.path()).await.expect("open");
            fill(&engine, base).await.expect("fill");
            engine
        });
        let readable = banks(&data);
        let mut group = c.benchmark_group(format!("engine_{n}"));
        group.throughput(Throughput::Elements(1));
        bench_recall(&mut group, &runtime, &engine, base, &readable);
        let mut next = extra.iter().cycle();
        group.bench_function("remember", |b| {
            b.iter(|| runtime.block_on(engine.remember(to_new(next.next().expect("cycle")))))
        });
        group.finish();
    }

    // Recall where every memory has two sentence vectors, as model-embedded
    // memories of two sentences do: a second scan, over twice the rows.
    {
        let n = 100_000;
        let dir = tempfile::tempdir().expect("temp dir");
        let base = corpus(n);
        let engine = runtime.block_on(async {
            let engine = open_engine(dir.path()).await.expect("open");
            let writes = base
                .iter()
                .enumerate()
                .map(|(i, m)| with_sentence_vectors(i, m));
            engine
                .import(writes, recall::IMPORT_BATCH, |_| {})
                .await
                .expect("import");
            engine.flush().await.expect("flush");
            engine.wait_for_maintenance().await.expect("maintenance");
            engine
        });
        let readable = banks(&base);
        let mut group = c.benchmark_group(format!("engine_{n}_sentences"));
        group.throughput(Throughput::Elements(1));
        bench_recall(&mut group, &runtime, &engine, &base, &readable);
        group.finish();
    }

    let mut group = c.benchmark_group("import");
    group.sample_size(10);
    let empty_engine = || {
        let dir = tempfile::tempdir().expect("temp dir");
        let engine = runtime.block_on(open_engine(dir.path())).expect("open");
        (dir, engine)
    };
    let batch = corpus(1_000);
    group.throughput(Throughput::Elements(batch.len() as u64));
    group.bench_function("remember_many_1000_into_empty", |b| {
        b.iter_batched(
            empty_engine,
            |(dir, engine)| {
                runtime
                    .block_on(engine.remember_many(batch.iter().map(to_new).collect()))
                    .expect("import");
                drop(dir);
            },
            criterion::BatchSize::PerIteration,
        )
    });
    // What `recall import` and `recall-bench scale` run: calls of
    // IMPORT_BATCH with the next call prepared beside the apply.
    let bulk = corpus(2 * recall::IMPORT_BATCH);
    group.throughput(Throughput::Elements(bulk.len() as u64));
    group.bench_function("engine_import_10000_into_empty", |b| {
        b.iter_batched(
            empty_engine,
            |(dir, engine)| {
                runtime
                    .block_on(engine.import(bulk.iter().map(to_new), recall::IMPORT_BATCH, |_| {}))
                    .expect("import");
                drop(dir);
            },
            criterion::BatchSize::PerIteration,
        )
    });
    group.finish();
}

/// Scoring a candidate set: relevance and every multiplier of §4.5 for 200
/// candidates (the union of two pools of 100).
fn scoring(c: &mut Criterion) {
    let config = ScoringConfig::default();
    let candidates: Vec<(f32, f32, i64, u32, u32)> = (0..200u32)
        .map(|i| {
            let f = i as f32 / 200.0;
            (f, 20.0 * (1.0 - f), i64::from(i) * 86_400_000, i % 4, i % 7)
        })
        .collect();
    let mut group = c.benchmark_group("score");
    group.throughput(Throughput::Elements(candidates.len() as u64));
    group.bench_function("candidate_set_200", |b| {
        b.iter(|| {
            candidates
                .iter()
                .map(|&(cos, bm25, age, confirmations, citations)| {
                    let b = normalize_bm25(config.bm25, bm25, 0.0, 20.0, 12.0);
                    relevance(&config, Some(cos), b, true, || false)
                        * decay_multiplier(&config, age, confirmations)
                        * usage_multiplier(&config, citations, 3)
                        * drift_multiplier(&config, confirmations == 0)
                })
                .fold(0f32, f32::max)
        })
    });
    group.finish();
}

/// A BM25 query through the engine: an engine without an embedder recalls
/// by BM25 alone, so this times tantivy's query plus candidate bookkeeping.
fn bm25_query(c: &mut Criterion) {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => panic!("tokio runtime: {e}"),
    };
    let n = 10_000usize;
    let dir = tempfile::tempdir().expect("temp dir");
    let data = corpus(n);
    let engine = runtime.block_on(async {
        let config = Config::new(dir.path())
            .model(ModelSource::None)
            .proposals(ProposalPolicy::direct());
        let engine = Engine::open(config).await.expect("open");
        for chunk in data.chunks(1000) {
            let writes = chunk
                .iter()
                .map(|m| {
                    let kind: Kind = m.kind.parse().unwrap_or(Kind::Note);
                    NewMemory::new(TENANT, m.bank.clone(), kind, m.content.clone())
                })
                .collect();
            engine.remember_many(writes).await.expect("fill");
        }
        engine
    });
    let readable = banks(&data);
    let mut group = c.benchmark_group("bm25");
    group.throughput(Throughput::Elements(1));
    let mut q = 0usize;
    group.bench_function(BenchmarkId::new("query", n), |b| {
        b.iter(|| {
            q += 1;
            let words: Vec<&str> = data[(q * 7919) % n]
                .content
                .split_whitespace()
                .take(4)
                .collect();
            runtime.block_on(
                engine
                    .recall(TENANT, words.join(" "))
                    .read(readable.iter().cloned())
                    .execute(),
            )
        })
    });
    group.finish();
}

criterion_group!(benches, vector_scan, scoring, bm25_query, engine_paths);
criterion_main!(benches);
