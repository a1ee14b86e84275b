//! Reopening a store whose vectors are in block files: the open reads the
//! memories without their vectors and takes each tenant's rows from its
//! files by key; the rows no file names come from the tables.

use std::path::Path;
use std::sync::Arc;

use recall::{Config, Engine, Kind, ModelSource, NewMemory};
use recall_datasets::{SyntheticMemory, near_copy, synthetic_corpus};
use uuid::Uuid;

use super::{BANK, TENANT, t0};

/// Rows per vector block file (the indexer's `BLOCK_ROWS`).
const BLOCK_ROWS: usize = 16_384;

/// A tenant too small for vector files.
const SMALL: &str = "globex";

fn config(dir: &Path) -> Config {
    let mut config = super::config(dir).model(ModelSource::Custom(Arc::new(
        recall::HashEmbedder::new(384),
    )));
    config.write.vector_files_from = BLOCK_ROWS;
    config
}

/// Remembers each of `memories` in `tenant`, one write at a time.
async fn remember_each(engine: &Engine, tenant: &str, prefix: &str, memories: &[SyntheticMemory]) {
    for (i, m) in memories.iter().enumerate() {
        engine
            .remember(
                NewMemory::new(tenant, BANK, Kind::Note, format!("{prefix} {i}"))
                    .vector(m.vector.clone()),
            )
            .await
            .unwrap();
    }
}

/// Each query's hits in `tenant` as `(id, score)`, at one fixed time.
async fn answers(engine: &Engine, tenant: &str, queries: &[Vec<f32>]) -> Vec<Vec<(Uuid, f32)>> {
    let mut out = Vec::new();
    for query in queries {
        let result = engine
            .recall(tenant, "memory")
            .read([BANK])
            .query_vector(query.clone())
            .now(t0())
            .limit(10)
            .execute()
            .await
            .unwrap();
        out.push(
            result
                .hits
                .iter()
                .map(|hit| (hit.memory.id, hit.score))
                .collect(),
        );
    }
    out
}

/// `(files, tables, small)`: the answers of both tenants after an open.
async fn both(
    dir: &Path,
    queries: &[Vec<f32>],
    small: &[Vec<f32>],
) -> (Vec<Vec<(Uuid, f32)>>, Vec<Vec<(Uuid, f32)>>, u64) {
    let engine = Engine::open(config(dir)).await.unwrap();
    let status = engine.status().await.unwrap();
    let answers = (
        answers(&engine, TENANT, queries).await,
        answers(&engine, SMALL, small).await,
        status.without_vector as u64,
    );
    engine.close().await.unwrap();
    answers
}

/// What the test adds: the open's fast path (vectors taken from block
/// files by key, the tables' vector column not read) answers exactly as
/// an open that reads every vector from the tables, with rows written
/// after the files (past the last block and in a small tenant) and with a
/// file whose rows are in another order (rows the keys do not name in
/// order come from the tables), and with a file of an older format (every
/// vector comes from the tables and the file is written again). Without
/// the key check the two memories whose rows the file swapped would trade
/// vectors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_that_takes_vectors_from_their_files_answers_as_one_that_reads_the_tables() {
    let corpus = synthetic_corpus(11, BLOCK_ROWS + 400, 384, 300);
    let dir = tempfile::tempdir().unwrap();
    {
        let engine = Engine::open(config(dir.path())).await.unwrap();
        let items = corpus[..BLOCK_ROWS + 300].iter().enumerate().map(|(i, m)| {
            NewMemory::new(TENANT, BANK, Kind::Note, format!("memory {i}")).vector(m.vector.clone())
        });
        engine
            .import(items, recall::IMPORT_BATCH, |_| {})
            .await
            .unwrap();
        remember_each(
            &engine,
            SMALL,
            "small",
            &corpus[BLOCK_ROWS + 300..BLOCK_ROWS + 340],
        )
        .await;
        engine.close().await.unwrap();
    }
    let block = dir
        .path()
        .join("derived")
        .join("vectors")
        .read_dir()
        .unwrap()
        .map(|set| set.unwrap().path())
        .find(|set| set.to_string_lossy().ends_with(".whole"))
        .unwrap()
        .join("000000.f32");
    assert!(block.is_file(), "the full block went to its file");
    // Written after the files: rows past the last block.
    {
        let engine = Engine::open(config(dir.path())).await.unwrap();
        remember_each(&engine, TENANT, "later", &corpus[BLOCK_ROWS + 340..]).await;
        engine.close().await.unwrap();
    }
    let picks = [
        3,
        5_000,
        9_999,
        BLOCK_ROWS - 1,
        BLOCK_ROWS + 17,
        BLOCK_ROWS + 390,
    ];
    let queries: Vec<Vec<f32>> = picks
        .iter()
        .enumerate()
        .map(|(seed, &i)| near_copy(seed as u64, &corpus[i].vector, 0.95))
        .collect();
    let small: Vec<Vec<f32>> = (0..3)
        .map(|i| near_copy(40 + i, &corpus[BLOCK_ROWS + 300 + i as usize].vector, 0.95))
        .collect();

    let from_files = both(dir.path(), &queries, &small).await;
    let written = std::fs::read(&block).unwrap();

    // The same store without its block files reads every vector from the
    // tables (and writes the file again, byte for byte the same).
    std::fs::remove_dir_all(dir.path().join("derived").join("vectors")).unwrap();
    let from_tables = both(dir.path(), &queries, &small).await;
    assert_eq!(from_files, from_tables);
    assert_eq!(from_tables.2, 0, "every memory has its vector");
    assert!(from_tables.0.iter().all(|hits| !hits.is_empty()));
    assert!(std::fs::read(&block).unwrap() == written);

    // A file whose rows 5,000 and 5,001 trade places, keys and codes too,
    // as if the memories had been stored the other way round: the open
    // must not give either memory the other's vector.
    let (rows_at, keys_at) = (4096, 4096 + BLOCK_ROWS * 384 * 4);
    let codes_at = keys_at + BLOCK_ROWS * 24;
    let mut swapped = written.clone();
    for (start, width) in [(rows_at, 384 * 4), (keys_at, 24), (codes_at, 6 * 8)] {
        let (a, b) = (start + 5_000 * width, start + 5_001 * width);
        let row_a = swapped[a..a + width].to_vec();
        swapped.copy_within(b..b + width, a);
        swapped[b..b + width].copy_from_slice(&row_a);
    }
    assert_eq!(swapped.len(), written.len());
    assert_ne!(swapped, written);
    std::fs::write(&block, &swapped).unwrap();
    assert_eq!(both(dir.path(), &queries, &small).await, from_tables);
    // Memory 5,001 took its row from the file (its key named it there);
    // 5,000 came from the tables after it: the file's order, still named
    // right by its keys, so the file stays as it is.
    assert!(std::fs::read(&block).unwrap() == swapped);

    // A file of another format (as an older version wrote them): the open
    // reads every vector from the tables and writes the file again.
    let mut older = written.clone();
    older[7] = b'1';
    std::fs::write(&block, &older).unwrap();
    assert_eq!(both(dir.path(), &queries, &small).await, from_tables);
    assert!(std::fs::read(&block).unwrap() == written, "written again");
}
