//! Speed-run setup: engines filled with seeded synthetic corpora (given
//! vectors, so no model time is measured), and percentiles.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use recall::{
    Config, Engine, HashEmbedder, Kind, ModelSource, NewMemory, ProposalPolicy, Remembered,
};
use recall_datasets::{SyntheticCorpus, SyntheticMemory, query_near};
use uuid::Uuid;

/// Vector width of the default model, used for speed runs.
pub const DIM: usize = 384;
/// Tenant every bench writes to.
pub const TENANT: &str = "bench";

/// Opens an engine whose embedder is only a width placeholder: benches pass
/// vectors in, so the model's cost is excluded from what they time.
pub async fn open_engine(dir: &Path) -> recall::Result<Engine> {
    Engine::open(bench_config(dir)).await
}

/// The benches' engine settings in `dir`: the defaults, with the hash
/// embedder at [`DIM`] (the benches give vectors; nothing loads a model),
/// and no bank holding writes for review (the benches measure recall over
/// what they wrote).
pub fn bench_config(dir: &Path) -> Config {
    Config::new(dir)
        .model(ModelSource::Custom(Arc::new(HashEmbedder::new(DIM))))
        .proposals(ProposalPolicy::direct())
}

/// The bench corpus: `n` memories over `n / 50` topics, seed 42.
pub fn corpus(n: usize) -> Vec<SyntheticMemory> {
    bench_corpus(n).collect()
}

/// [`corpus`] one item at a time, for runs too large to hold it.
pub fn bench_corpus(n: usize) -> SyntheticCorpus {
    SyntheticCorpus::new(42, n, DIM, (n / 50).max(10))
}

/// The corpus item as a write.
pub fn to_new(m: &SyntheticMemory) -> NewMemory {
    let kind: Kind = m.kind.parse().unwrap_or(Kind::Note);
    NewMemory::new(TENANT, m.bank.clone(), kind, m.content.clone())
        .element(m.element.clone())
        .vector(m.vector.clone())
}

/// Corpus item `i` as a write with a vector per sentence of its content,
/// as a model would give it (two in this corpus: the fact and its
/// `(ref #i)`), each at cosine ≈ 0.9 to the memory's.
pub fn with_sentence_vectors(i: usize, m: &SyntheticMemory) -> NewMemory {
    let vectors = (0..recall::sentences(&m.content).len())
        .map(|k| query_near(((i as u64) << 8) | k as u64 | (1 << 63), &m.vector))
        .collect();
    to_new(m).sentence_vectors(vectors)
}

/// Writes the corpus in batches of 1,000 through the normal write path;
/// returns the id that holds each item (its own, or the memory it was
/// deduplicated into), in corpus order.
pub async fn fill(engine: &Engine, corpus: &[SyntheticMemory]) -> recall::Result<Vec<Uuid>> {
    let mut ids = Vec::with_capacity(corpus.len());
    for chunk in corpus.chunks(1000) {
        let outcomes = engine
            .remember_many(chunk.iter().map(to_new).collect())
            .await?;
        ids.extend(outcomes.iter().map(Remembered::id));
    }
    engine.flush().await?;
    Ok(ids)
}

/// Every bank the corpus uses.
pub fn banks(corpus: &[SyntheticMemory]) -> Vec<String> {
    let mut banks: Vec<String> = corpus.iter().map(|m| m.bank.clone()).collect();
    banks.sort();
    banks.dedup();
    banks
}

/// `count` recall queries over the first `n` corpus items: four words of
/// a stored memory's text, and a vector near its own.
pub fn queries_near(base: &[SyntheticMemory], n: usize, count: usize) -> Vec<(String, Vec<f32>)> {
    (0..count)
        .map(|q| {
            let target = &base[(q * 7919) % n];
            let words: Vec<&str> = target.content.split_whitespace().take(4).collect();
            (words.join(" "), query_near(q as u64, &target.vector))
        })
        .collect()
}

/// Sorted latencies in ms of one recall per query (text and query vector
/// given) over the banks `readable`.
pub async fn time_recalls(
    engine: &Engine,
    readable: &[String],
    queries: &[(String, Vec<f32>)],
) -> anyhow::Result<Vec<f64>> {
    let mut ms = Vec::with_capacity(queries.len());
    for (text, vector) in queries {
        let t = Instant::now();
        engine
            .recall(TENANT, text.clone())
            .read(readable.iter().cloned())
            .query_vector(vector.clone())
            .execute()
            .await?;
        ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    ms.sort_by(f64::total_cmp);
    Ok(ms)
}

/// The `p`-th percentile (0–100) of sorted samples.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}
