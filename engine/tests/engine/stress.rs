//! Crash and concurrency safety (§3.8, §7): SIGKILL rounds under concurrent
//! remember/confirm/forget/erase, and readers racing writers.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use recall::{
    Config, Engine, EraseScope, Error, HashEmbedder, Kind, ModelSource, NewMemory, WriteConfig,
};
use uuid::Uuid;

/// The hash embedder keeps these tests about storage, not the model. The
/// log is flushed to the tables every few records, so kills and reads land
/// during background flushes (a sealed log beside the active one) too.
fn fast_config(dir: &std::path::Path) -> Config {
    super::config(dir)
        .model(ModelSource::Custom(Arc::new(HashEmbedder::new(384))))
        .write(WriteConfig {
            flush_every: 4,
            ..WriteConfig::default()
        })
}

fn unique_text(prefix: &str) -> (String, String) {
    let tag = Uuid::now_v7().simple().to_string();
    (format!("{prefix} {tag} ledger snapshot"), tag)
}

/// Helper process: three tasks share one engine — a writer, a writer that
/// confirms or forgets what it wrote, and an eraser — each printing `ACK
/// <op> <id>` once the call returned. Runs only when the parent asks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "helper process for acknowledged_operations_survive_sigkill_rounds"]
async fn concurrent_load_child() {
    let Ok(dir) = std::env::var("RECALL_CRASH_DIR") else {
        return;
    };
    let engine = Engine::open(fast_config(std::path::Path::new(&dir)))
        .await
        .unwrap();
    let remember = |engine: Engine, prefix: &'static str| async move {
        let (text, tag) = unique_text(prefix);
        let id = engine
            .remember(NewMemory::new(
                "acme",
                format!("load:{tag}"),
                Kind::Note,
                text,
            ))
            .await
            .unwrap()
            .id();
        println!("ACK remember {id}");
        id
    };
    let writer = {
        let engine = engine.clone();
        tokio::spawn(async move {
            loop {
                remember(engine.clone(), "writer").await;
            }
        })
    };
    let changer = {
        let engine = engine.clone();
        tokio::spawn(async move {
            for i in 0u64.. {
                let id = remember(engine.clone(), "changer").await;
                if i % 2 == 0 {
                    engine.confirm("acme", id).await.unwrap();
                    println!("ACK confirm {id}");
                } else {
                    engine.forget("acme", id).await.unwrap();
                    println!("ACK forget {id}");
                }
            }
        })
    };
    let eraser = {
        let engine = engine.clone();
        tokio::spawn(async move {
            loop {
                let id = remember(engine.clone(), "eraser").await;
                // A kill after the erasure is durable but before its ACK
                // is printed is no loss: the parent accepts it as begun.
                println!("BEGIN erase {id}");
                engine
                    .erase("acme", EraseScope::Memory(id), "test")
                    .await
                    .unwrap();
                println!("ACK erase {id}");
            }
        })
    };
    let _ = tokio::join!(writer, changer, eraser);
}

#[tokio::test]
async fn acknowledged_operations_survive_sigkill_rounds() {
    let dir = tempfile::tempdir().unwrap();
    let mut remembered: Vec<Uuid> = Vec::new();
    let mut confirmed: HashSet<Uuid> = HashSet::new();
    let mut forgotten: HashSet<Uuid> = HashSet::new();
    let mut erased: HashSet<Uuid> = HashSet::new();
    let mut erase_begun: HashSet<Uuid> = HashSet::new();
    let rounds = 20;
    for round in 0..rounds {
        // Kill points spread over 6..=40 acknowledgements.
        let n = 6 + (round * 13) % 35;
        let printed = super::run_and_kill_begun("stress::concurrent_load_child", dir.path(), n);
        for line in &printed.begun {
            let id = line.strip_prefix("erase ").unwrap();
            erase_begun.insert(Uuid::parse_str(id).unwrap());
        }
        for line in printed.acked {
            let (op, id) = line.split_once(' ').unwrap();
            let id = Uuid::parse_str(id.trim()).unwrap();
            match op {
                "remember" => remembered.push(id),
                "confirm" => {
                    confirmed.insert(id);
                }
                "forget" => {
                    forgotten.insert(id);
                }
                "erase" => {
                    erased.insert(id);
                }
                other => panic!("unknown op {other}"),
            }
        }

        let engine = Engine::open(fast_config(dir.path())).await.unwrap();
        assert!(
            !dir.path().join("ERASING").exists(),
            "round {round}: erasure left unfinished"
        );
        for id in &remembered {
            match engine.get("acme", *id).await {
                Ok(m) => {
                    assert!(!erased.contains(id), "round {round}: erased {id} is back");
                    assert!(
                        !forgotten.contains(id) || m.forgotten,
                        "round {round}: forget of {id} lost"
                    );
                    assert!(
                        !confirmed.contains(id) || m.confirmations >= 1,
                        "round {round}: confirm of {id} lost"
                    );
                }
                Err(Error::NotFound { .. }) => assert!(
                    erased.contains(id) || erase_begun.contains(id),
                    "round {round}: acknowledged {id} lost"
                ),
                Err(e) => panic!("round {round}: {e}"),
            }
        }
        // The BM25 index and the state agree with the table: the newest
        // surviving memory is found by its unique text.
        let live: Vec<_> = engine.list("acme", None).await.unwrap();
        assert_eq!(engine.status().await.unwrap().active, live.len());
        if let Some(last) = live.last() {
            let hits = engine
                .recall("acme", &last.content)
                .read([last.bank.clone()])
                .execute()
                .await
                .unwrap();
            assert_eq!(
                hits.hits[0].memory.id, last.id,
                "round {round}: index out of step"
            );
        }
    }
    println!(
        "{rounds} SIGKILL rounds: {} remembers, {} confirms, {} forgets, {} erasures acknowledged, 0 lost",
        remembered.len(),
        confirmed.len(),
        forgotten.len(),
        erased.len()
    );
    assert!(!erased.is_empty() && !forgotten.is_empty());
}

#[test]
fn the_engine_is_shared_across_tasks() {
    fn send_sync<T: Send + Sync + Clone + 'static>() {}
    send_sync::<Engine>();
}

/// Batches of this many memories share a marker; a reader that sees some
/// but not all of a batch saw a torn write.
const BATCH: usize = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_never_see_a_partial_write() {
    let seconds: u64 = std::env::var("RECALL_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    let dir = tempfile::tempdir().unwrap();
    // Deduplication off: the hash embedder's few buckets make unrelated
    // short texts collide, and a batch must be stored whole to be checked.
    let config = fast_config(dir.path()).write(WriteConfig {
        dedup_threshold: f32::INFINITY,
        flush_every: 4,
        ..WriteConfig::default()
    });
    let engine = Engine::open(config).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let stop = Arc::new(AtomicBool::new(false));
    let (reads, writes, errors, torn, whole_batches) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
    );
    let mut tasks = Vec::new();
    for w in 0..2 {
        let (engine, stop, writes, errors) =
            (engine.clone(), stop.clone(), writes.clone(), errors.clone());
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let marker = format!("marker{w}x{n}");
                let batch: Vec<NewMemory> = (0..BATCH)
                    .map(|k| {
                        let tag = Uuid::now_v7().simple().to_string();
                        NewMemory::new(
                            "acme",
                            "soak",
                            Kind::Note,
                            format!("{marker} {tag} part {k}"),
                        )
                    })
                    .collect();
                // The same batch goes to a second tenant first, so that a
                // recall of "acme" leaking another tenant's rows is seen.
                let other: Vec<NewMemory> = batch
                    .iter()
                    .map(|m| NewMemory::new("globex", "soak", Kind::Note, m.content.clone()))
                    .collect();
                if engine.remember_many(other).await.is_err() {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
                match engine.remember_many(batch).await {
                    Ok(out) => {
                        if out
                            .iter()
                            .any(|o| !matches!(o, recall::Remembered::Stored { .. }))
                        {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                        if let Some(first) = out.first() {
                            // Confirmations race the readers too.
                            if engine.confirm("acme", first.id()).await.is_err() {
                                errors.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        writes.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(_) => {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
                n += 1;
            }
        }));
    }
    for r in 0..8 {
        let (engine, stop, reads, errors, torn, whole_batches) = (
            engine.clone(),
            stop.clone(),
            reads.clone(),
            errors.clone(),
            torn.clone(),
            whole_batches.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let ok = if (i + r).is_multiple_of(2) {
                    match engine.list("acme", Some("soak")).await {
                        Ok(list) => {
                            let mut per_marker: HashMap<&str, usize> = HashMap::new();
                            for m in &list {
                                let marker = m.content.split(' ').next().unwrap_or("");
                                *per_marker.entry(marker).or_default() += 1;
                            }
                            if per_marker.values().any(|c| *c != BATCH) {
                                torn.fetch_add(1, Ordering::Relaxed);
                            }
                            true
                        }
                        Err(_) => false,
                    }
                } else {
                    let marker = format!("marker{}x{}", r % 2, i % 50);
                    let query = format!("{marker} part");
                    let recalled = engine
                        .recall("acme", query)
                        .read(["soak"])
                        .limit(20)
                        .execute()
                        .await;
                    match recalled {
                        Ok(result) => {
                            // A batch is seen whole or not at all, and only
                            // this tenant's copy of it.
                            let prefix = format!("{marker} ");
                            let of_batch = result
                                .hits
                                .iter()
                                .filter(|h| h.memory.content.starts_with(&prefix))
                                .count();
                            if result.hits.iter().any(|h| h.memory.tenant != "acme")
                                || (of_batch != 0 && of_batch != BATCH)
                            {
                                torn.fetch_add(1, Ordering::Relaxed);
                            }
                            if of_batch == BATCH {
                                whole_batches.fetch_add(1, Ordering::Relaxed);
                            }
                            true
                        }
                        Err(_) => false,
                    }
                };
                if !ok {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
                reads.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    tokio::time::sleep_until(deadline.into()).await;
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.unwrap();
    }
    let (reads, writes) = (
        reads.load(Ordering::Relaxed),
        writes.load(Ordering::Relaxed),
    );
    println!(
        "{seconds} s, 8 readers + 2 writers: {reads} reads, {writes} batch writes, {} errors, {} torn reads, {} recalls saw a whole batch",
        errors.load(Ordering::Relaxed),
        torn.load(Ordering::Relaxed),
        whole_batches.load(Ordering::Relaxed)
    );
    assert_eq!(errors.load(Ordering::Relaxed), 0);
    assert_eq!(torn.load(Ordering::Relaxed), 0);
    assert!(
        reads > 100 && writes > 10,
        "the soak did too little to mean anything"
    );
    assert!(
        whole_batches.load(Ordering::Relaxed) > 0,
        "no recall found a batch: the recall half checked nothing"
    );
}
