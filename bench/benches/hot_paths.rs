//! criterion benches of the hot paths, with `Throughput` set. Run in the dev
//! profile the rest of the workspace uses (see bench/README.md):
//! `cargo bench --profile dev -p recall-bench`.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use recall_bench::{TENANT, banks, corpus, fill, open_engine, to_new};
use recall_datasets::query_near;
use recall_indexer::{ScanConfig, VectorSet};

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
    }
    group.finish();
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
        let mut q = 0usize;
        group.bench_function("recall", |b| {
            b.iter(|| {
                q += 1;
                let target = &base[(q * 7919) % n];
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
        let mut next = extra.iter().cycle();
        group.bench_function("remember", |b| {
            b.iter(|| runtime.block_on(engine.remember(to_new(next.next().expect("cycle")))))
        });
        group.finish();
    }

    let mut group = c.benchmark_group("import");
    group.sample_size(10);
    let batch = corpus(1_000);
    group.throughput(Throughput::Elements(batch.len() as u64));
    group.bench_function("remember_many_1000_into_empty", |b| {
        b.iter_batched(
            || {
                let dir = tempfile::tempdir().expect("temp dir");
                let engine = runtime.block_on(open_engine(dir.path())).expect("open");
                (dir, engine)
            },
            |(dir, engine)| {
                runtime
                    .block_on(engine.remember_many(batch.iter().map(to_new).collect()))
                    .expect("import");
                drop(dir);
            },
            criterion::BatchSize::PerIteration,
        )
    });
    group.finish();
}

criterion_group!(benches, vector_scan, engine_paths);
criterion_main!(benches);
