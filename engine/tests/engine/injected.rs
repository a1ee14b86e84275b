//! Faults injected at the store's file boundary (`recall_indexer::faults`,
//! the cargo feature `faults`): the log, the audit log, the erase intent,
//! the BM25 index's files and the LanceDB tables' objects.
//!
//! The walk: each scenario (a remember, a batch import, a flush, a
//! compaction, an erase) runs once to count its write-path file
//! operations, then once per operation with exactly that one failing
//! (EIO, ENOSPC or a short write, in turn). After each run: the error is
//! typed, reads work, a later write succeeds or is refused as read-only
//! (never anything else), and a reopen shows exactly what the faulted
//! engine showed, which holds everything acknowledged.
//!
//! The soak: readers and writers for a while with faults at random.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use recall::{Config, Engine, EraseScope, Error, IndexerError, Kind, NewMemory, WriteConfig};
use recall_indexer::faults::{self, Fault, FileOp, Plan, Trigger};

use super::model;

const TENANT: &str = "acme";
const FAULTS: [Fault; 3] = [Fault::Io, Fault::NoSpace, Fault::Short];

/// A unit vector per name, no two near copies (the write path never
/// deduplicates them).
fn vector(name: &str) -> Vec<f32> {
    let h = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    let mut v = vec![0.0f32; 384];
    v[(h % 384) as usize] = 1.0;
    v[((h >> 9) % 384) as usize] += 0.5;
    v[((h >> 18) % 384) as usize] += 0.25;
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter().map(|x| x / norm).collect()
}

/// The memory named `name`: alone in its bank (named the same), with a
/// token no other memory has.
fn memory(name: &str) -> NewMemory {
    NewMemory::new(
        TENANT,
        name,
        Kind::Note,
        format!("Walk memory {name}: the {name}zq ledger replica rotates nightly."),
    )
    .vector(vector(name))
}

async fn open(dir: &Path, write: WriteConfig) -> Engine {
    Engine::open(config(dir, write)).await.unwrap()
}

fn config(dir: &Path, write: WriteConfig) -> Config {
    super::config(dir).model(model()).write(write)
}

/// The banks (one memory each) the engine lists; every listed memory can
/// also be fetched.
async fn visible(engine: &Engine) -> BTreeSet<String> {
    let listed = engine.list(TENANT, None).await.expect("reads work");
    for m in &listed {
        let got = engine
            .get(TENANT, m.id)
            .await
            .expect("a listed memory can be fetched");
        assert_eq!(got.content, m.content);
    }
    listed.into_iter().map(|m| m.bank).collect()
}

/// After a reopen: every listed memory is found by recall in its bank
/// (its text, vector and BM25 document are all there), and nothing is
/// found in a bank that lists nothing.
async fn all_recallable(label: &str, engine: &Engine, banks: &BTreeSet<String>, absent: &[String]) {
    for bank in banks {
        assert!(
            recalled_in(engine, bank).await,
            "{label}: {bank} is listed but recall does not find it"
        );
    }
    for bank in absent {
        assert!(
            !recalled_in(engine, bank).await,
            "{label}: {bank} is not listed but recall finds it"
        );
    }
}

/// Whether a recall of the bank's own token, within the bank, finds anything.
async fn recalled_in(engine: &Engine, bank: &str) -> bool {
    let hits = engine
        .recall(TENANT, format!("{bank}zq ledger replica"))
        .read([bank])
        .execute()
        .await
        .unwrap()
        .hits;
    assert!(
        hits.iter().all(|h| h.memory.bank == bank),
        "a hit outside the bank read"
    );
    !hits.is_empty()
}

#[derive(Debug, Clone, Copy)]
enum Scenario {
    Remember,
    /// A remember that fills the log: it is sealed (renamed aside) and
    /// flushed in the background.
    Seal,
    Import,
    Flush,
    Compaction,
    Erase,
}

impl Scenario {
    /// The write settings of the engine the step runs on: a compaction
    /// after every table flush, or a background flush once the log holds
    /// the step's memory and the one before it.
    fn write(self) -> WriteConfig {
        let (compact_every, flush_every) = match self {
            Scenario::Compaction => (1, WriteConfig::default().flush_every),
            Scenario::Seal => (0, 2),
            _ => (0, WriteConfig::default().flush_every),
        };
        WriteConfig {
            compact_every,
            flush_every,
            ..WriteConfig::default()
        }
    }

    /// What is in the store before the step, flushed to the tables in
    /// three table fragments (a compaction has something to merge).
    async fn setup(self, dir: &Path) -> Vec<String> {
        let engine = open(dir, WriteConfig::default()).await;
        let mut names = Vec::new();
        for round in 0..3 {
            for i in 0..2 {
                let name = format!("s{round}{i}");
                engine.remember(memory(&name)).await.unwrap();
                names.push(name);
            }
            engine.flush().await.unwrap();
        }
        names.push("p0".into());
        names
    }

    /// The engine the step runs on, with one memory only in its log (a
    /// flush or an erase has something to move: an open replays the log
    /// into the tables).
    async fn engine(self, dir: &Path) -> Engine {
        let engine = open(dir, self.write()).await;
        engine.remember(memory("p0")).await.unwrap();
        engine
    }

    /// The memories the step tries to write.
    fn attempted(self) -> Vec<String> {
        match self {
            Scenario::Remember | Scenario::Seal | Scenario::Compaction => vec!["n0".into()],
            Scenario::Import => (0..5).map(|i| format!("i{i}")).collect(),
            Scenario::Flush | Scenario::Erase => Vec::new(),
        }
    }

    /// Runs the step; returns its outcome and the memories it was told
    /// are written.
    async fn run(self, engine: &Engine) -> (recall::Result<()>, Vec<String>) {
        match self {
            Scenario::Remember => match engine.remember(memory("n0")).await {
                Ok(_) => (Ok(()), vec!["n0".into()]),
                Err(e) => (Err(e), Vec::new()),
            },
            Scenario::Import => {
                let mut acknowledged = Vec::new();
                let outcome = engine
                    .import(self.attempted().iter().map(|n| memory(n)), 2, |outcomes| {
                        for o in outcomes {
                            acknowledged.push(o.id());
                        }
                    })
                    .await;
                let mut names = Vec::new();
                for id in acknowledged {
                    // Read back while the fault may still be armed: reads never fail.
                    names.push(engine.get(TENANT, id).await.unwrap().bank);
                }
                (outcome, names)
            }
            Scenario::Seal => match engine.remember(memory("n0")).await {
                Err(e) => (Err(e), Vec::new()),
                // A flush waits for the background one (and retries it
                // once if it failed).
                Ok(_) => (engine.flush().await, vec!["n0".into()]),
            },
            Scenario::Flush => (engine.flush().await, Vec::new()),
            Scenario::Compaction => match engine.remember(memory("n0")).await {
                Err(e) => (Err(e), Vec::new()),
                Ok(_) => {
                    // The flush starts a compaction in the background; the
                    // wait lets it finish (its failure is logged and retried).
                    let outcome = async {
                        engine.flush().await?;
                        engine.wait_for_maintenance().await
                    }
                    .await;
                    (outcome, vec!["n0".into()])
                }
            },
            Scenario::Erase => (
                engine
                    .erase(TENANT, EraseScope::Bank("s11".into()), "dpo")
                    .await
                    .map(|_| ()),
                Vec::new(),
            ),
        }
    }
}

/// An error a fault may cause: storage, typed, never a panic or a task error.
fn is_storage(e: &Error) -> bool {
    matches!(
        e,
        Error::Storage(
            IndexerError::Io { .. }
                | IndexerError::Lance { .. }
                | IndexerError::Tantivy(_)
                | IndexerError::ReadOnly { .. }
                | IndexerError::Background { .. }
        )
    )
}

/// One run of `scenario` under `plan`, checked; whether the step failed.
async fn step(scenario: Scenario, plan: Plan) -> bool {
    let dir = tempfile::tempdir().unwrap();
    let setup: BTreeSet<String> = scenario.setup(dir.path()).await.into_iter().collect();
    let engine = scenario.engine(dir.path()).await;
    let armed = faults::arm(dir.path(), plan);
    let (outcome, told) = scenario.run(&engine).await;
    armed.heal();
    let failed = outcome.is_err();
    if let Err(e) = &outcome {
        assert!(
            is_storage(e),
            "{scenario:?} {plan:?}: untyped failure {e:?}"
        );
    }
    let label = format!("{scenario:?} {plan:?} ({outcome:?})");

    // Reads work; what they show holds everything acknowledged.
    let before = visible(&engine).await;
    for name in &told {
        assert!(
            before.contains(name),
            "{label}: acknowledged {name} is not served"
        );
    }
    let attempted: BTreeSet<String> = scenario.attempted().into_iter().collect();
    for name in &before {
        assert!(
            setup.contains(name) || attempted.contains(name),
            "{label}: {name} came from nowhere"
        );
    }
    for name in &setup {
        if !matches!(scenario, Scenario::Erase) || name != "s11" {
            assert!(
                before.contains(name),
                "{label}: {name} from before the step is gone"
            );
        }
    }

    if matches!(scenario, Scenario::Erase) && !failed {
        assert!(!before.contains("s11"), "{label}: erased and still served");
    }

    // Once the fault clears, a write works or is refused as read-only.
    let later = match engine.remember(memory("w0")).await {
        Ok(_) => Some("w0".to_string()),
        Err(Error::Storage(IndexerError::ReadOnly { reason })) => {
            assert!(reason.contains("reopen"), "{label}: {reason}");
            None
        }
        Err(e) => panic!("{label}: a write after the fault cleared failed: {e:?}"),
    };
    drop(engine);
    drop(armed);

    // A reopen (no faults) shows exactly what the faulted engine showed.
    let engine = open(dir.path(), WriteConfig::default()).await;
    let after = visible(&engine).await;
    let mut expected = before.clone();
    expected.extend(later.clone());
    assert_eq!(after, expected, "{label}: the reopened store differs");
    let absent: Vec<String> = setup
        .iter()
        .chain(&attempted)
        .filter(|n| !after.contains(*n))
        .cloned()
        .collect();
    all_recallable(&label, &engine, &after, &absent).await;
    drop(engine);
    if matches!(scenario, Scenario::Erase) && !after.contains("s11") {
        // Erased everywhere: not one BM25 document of it is left.
        let (store, _) =
            recall_indexer::Store::open(recall_indexer::StoreOptions::new(dir.path(), 384))
                .await
                .unwrap();
        assert_eq!(
            store.lexical().doc_freq(TENANT, "s11zq").unwrap(),
            0,
            "{label}"
        );
    }
    failed
}

/// Counts a scenario's write-path file operations (nothing fails).
async fn count(scenario: Scenario) -> Vec<faults::Seen> {
    let dir = tempfile::tempdir().unwrap();
    scenario.setup(dir.path()).await;
    let engine = scenario.engine(dir.path()).await;
    let armed = faults::arm(
        dir.path(),
        Plan {
            trigger: Trigger::Never,
            fault: Fault::Io,
        },
    );
    let (outcome, _) = scenario.run(&engine).await;
    outcome.unwrap();
    let seen = armed.seen();
    drop(engine);
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fault_at_every_write_path_file_operation_loses_nothing_acknowledged() {
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    let mut total = 0;
    for scenario in [
        Scenario::Remember,
        Scenario::Seal,
        Scenario::Import,
        Scenario::Flush,
        Scenario::Compaction,
        Scenario::Erase,
    ] {
        let seen = count(scenario).await;
        assert!(!seen.is_empty(), "{scenario:?} wrote nothing?");
        let mut failed = 0;
        for (n, _) in seen.iter().enumerate() {
            let plan = Plan {
                trigger: Trigger::Nth(n as u64),
                fault: FAULTS[n % FAULTS.len()],
            };
            failed += usize::from(step(scenario, plan).await);
        }
        for (op, file) in &seen {
            let area = match file.split('/').next() {
                Some("") | None => ".".to_string(),
                Some(top) => top.to_string(),
            };
            *kinds.entry(format!("{op:?} {area}")).or_default() += 1;
        }
        println!(
            "{scenario:?}: {} file operations, a fault at each; {failed} steps returned the error",
            seen.len()
        );
        total += seen.len();
    }
    println!("{total} faulted runs; operations by kind and area: {kinds:?}");
    // Every kind of operation the layer can fail was hit by the walk.
    for op in [
        FileOp::Write,
        FileOp::Sync,
        FileOp::Truncate,
        FileOp::Rename,
        FileOp::Remove,
        FileOp::DirSync,
        FileOp::Create,
    ] {
        assert!(
            kinds.keys().any(|k| k.starts_with(&format!("{op:?} "))),
            "no {op:?} was walked: {kinds:?}"
        );
    }
    // And every file the write path has.
    for area in ["wal.log", "audit.jsonl", "ERASING", "lexical", "tables"] {
        assert!(
            kinds.keys().any(|k| k.ends_with(&format!(" {area}"))),
            "no operation on {area} was walked: {kinds:?}"
        );
    }
}

/// A random unit vector per `i` (seeded; any two are near-orthogonal in
/// 384 dimensions, so 100,000 of them never deduplicate).
fn bulk_vector(i: usize) -> Vec<f32> {
    let mut x = (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let v: Vec<f32> = (0..384)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 2001) as f32 / 1000.0 - 1.0
        })
        .collect();
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter().map(|x| x / norm).collect()
}

fn bulk_memory(i: usize) -> NewMemory {
    NewMemory::new(
        TENANT,
        "bulk",
        Kind::Note,
        format!("Bulk memory {i}: the bulk{i}zq shard moved."),
    )
    .vector(bulk_vector(i))
}

/// The disk fills in the middle of a 100,000-memory import (calls of
/// 5,000; from the 11th call on every file operation fails with ENOSPC):
/// the import stops with ENOSPC as a typed storage error, the caller
/// knows which call failed (the first line it did not acknowledge), reads
/// serve exactly the acknowledged calls while the disk is full, and a
/// reopen once there is space finds exactly those.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enospc_in_the_middle_of_a_100k_import_keeps_every_acknowledged_call() {
    const TOTAL: usize = 100_000;
    const CALL: usize = 5_000;
    const FULL_AFTER: usize = 10;
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), WriteConfig::default()).await;
    let mut calls = 0usize;
    let mut acknowledged = 0usize;
    let mut full: Option<faults::Armed> = None;
    let err = engine
        .import((0..TOTAL).map(bulk_memory), CALL, |outcomes| {
            calls += 1;
            acknowledged += outcomes.len();
            if calls == FULL_AFTER {
                full = Some(faults::arm(
                    dir.path(),
                    Plan {
                        trigger: Trigger::From(0),
                        fault: Fault::NoSpace,
                    },
                ));
            }
        })
        .await
        .expect_err("the disk is full from the 11th call on");
    let full = full.expect("the disk filled");
    assert!(
        matches!(&err, Error::Storage(IndexerError::Io { source, .. })
            if source.raw_os_error() == Some(28)),
        "expected ENOSPC as a typed storage error, got {err:?}"
    );
    assert_eq!((calls, acknowledged), (FULL_AFTER, FULL_AFTER * CALL));
    println!(
        "import of {TOTAL}: calls 1-{calls} acknowledged ({acknowledged} memories); call {} \
         (lines {}-{}) failed: {err}; {} file operations refused",
        calls + 1,
        acknowledged + 1,
        acknowledged + CALL,
        full.failed().len()
    );

    let expected: BTreeSet<String> = (0..acknowledged).map(|i| bulk_memory(i).content).collect();
    let contents = |listed: Vec<recall::Memory>| -> BTreeSet<String> {
        listed.into_iter().map(|m| m.content).collect()
    };
    // Reads while the disk is full: exactly the acknowledged calls.
    let listed = engine.list(TENANT, None).await.expect("reads while full");
    assert_eq!(contents(listed), expected, "while the disk is full");
    // By its vector: the BM25 index cannot commit while the disk is full
    // and serves its last commit (the store says read-only until reopened).
    let last = acknowledged - 1;
    let hits = engine
        .recall(TENANT, format!("bulk{last}zq shard"))
        .query_vector(bulk_vector(last))
        .read(["bulk"])
        .execute()
        .await
        .expect("recall while full")
        .hits;
    assert!(
        hits.iter()
            .any(|h| h.memory.content == bulk_memory(last).content),
        "the last acknowledged memory is recalled while the disk is full"
    );

    // Space again; a reopen finds exactly the acknowledged calls.
    full.heal();
    drop(engine);
    drop(full);
    let engine = open(dir.path(), WriteConfig::default()).await;
    let listed = engine.list(TENANT, None).await.unwrap();
    assert_eq!(contents(listed), expected, "after the reopen");
    // The reopen caught the BM25 index up: the last memory by its word alone.
    let hits = engine
        .recall(TENANT, format!("bulk{last}zq shard"))
        .read(["bulk"])
        .execute()
        .await
        .unwrap()
        .hits;
    assert_eq!(
        hits.first().map(|h| &h.memory.content),
        Some(&bulk_memory(last).content),
        "after the reopen, by its word"
    );
    let hits = engine
        .recall(TENANT, format!("bulk{acknowledged}zq shard"))
        .read(["bulk"])
        .execute()
        .await
        .unwrap()
        .hits;
    assert!(
        hits.iter()
            .all(|h| h.memory.content != bulk_memory(acknowledged).content),
        "the failed call's first memory is not there"
    );
    // Writes work again after the reopen.
    engine.remember(bulk_memory(TOTAL)).await.unwrap();
}

/// The engine the soak's tasks share; replaced by a reopened one when a
/// fault leaves it read-only.
struct Shared {
    dir: std::path::PathBuf,
    engine: tokio::sync::RwLock<Option<Arc<Engine>>>,
    reopens: AtomicUsize,
}

impl Shared {
    async fn current(&self) -> Arc<Engine> {
        loop {
            if let Some(engine) = self.engine.read().await.as_ref() {
                return engine.clone();
            }
            tokio::task::yield_now().await;
        }
    }

    /// Reopens the store `old` was on (unless another task already did).
    async fn reopen(&self, old: Arc<Engine>) {
        // Let go of the old engine before waiting: the task holding the
        // slot waits for every other holder to let go.
        // (Shadowing would not drop it: the parameter lives to the end of
        // the function.)
        let old_ptr = Arc::as_ptr(&old) as usize;
        drop(old);
        let mut slot = self.engine.write().await;
        // Another task reopened it already.
        if slot
            .as_ref()
            .is_none_or(|e| Arc::as_ptr(e) as usize != old_ptr)
        {
            return;
        }
        let Some(engine) = slot.take() else { return };
        // Calls in flight finish on the old engine first.
        while Arc::strong_count(&engine) > 1 {
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
        drop(engine);
        let config = super::config(&self.dir).model(model()).write(soak_write());
        // Opening runs into faults too; it is tried until it works.
        for attempt in 0.. {
            match Engine::open(config.clone()).await {
                Ok(engine) => {
                    *slot = Some(Arc::new(engine));
                    break;
                }
                Err(e) => {
                    assert!(is_storage(&e), "untyped failure at open: {e:?}");
                    assert!(attempt < 200, "the store never reopened: {e}");
                }
            }
        }
        self.reopens.fetch_add(1, Ordering::Relaxed);
    }
}

fn soak_write() -> WriteConfig {
    WriteConfig {
        flush_every: 64,
        compact_every: 4,
        ..WriteConfig::default()
    }
}

/// 8 readers and 2 writers with faults injected at random (seeded) into
/// every write-path file operation: no acknowledged write is lost, no read
/// sees a batch in part. A store that a fault left read-only is reopened,
/// as a user would.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_soak_with_random_faults_loses_no_acknowledged_write() {
    let seconds: u64 = std::env::var("RECALL_SOAK_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    // A hang (a call that never returns once a fault hit) fails the test
    // instead of stalling CI.
    let limit = std::time::Duration::from_secs(seconds + 240);
    tokio::time::timeout(limit, soak(seconds))
        .await
        .unwrap_or_else(|_| panic!("the soak did not finish within {limit:?}: a call hung"));
}

async fn soak(seconds: u64) {
    let seed = 0x5eed_fa17_u64;
    let dir = tempfile::tempdir().unwrap();
    let first = Engine::open(super::config(dir.path()).model(model()).write(soak_write()))
        .await
        .unwrap();
    let shared = Arc::new(Shared {
        dir: dir.path().to_path_buf(),
        engine: tokio::sync::RwLock::new(Some(Arc::new(first))),
        reopens: AtomicUsize::new(0),
    });
    let armed = faults::arm(
        dir.path(),
        Plan {
            trigger: Trigger::Random {
                seed,
                per_mille: 20,
            },
            fault: Fault::Io,
        },
    );
    let stop = Arc::new(AtomicBool::new(false));
    let torn = Arc::new(AtomicUsize::new(0));
    let reads = Arc::new(AtomicUsize::new(0));
    let whole = Arc::new(AtomicUsize::new(0));

    // Writers: batches of 4 into a bank of their own; a batch is
    // acknowledged whole or not at all.
    let mut writers = Vec::new();
    for w in 0..2 {
        let (shared, stop) = (shared.clone(), stop.clone());
        writers.push(tokio::spawn(async move {
            let mut acknowledged: Vec<String> = Vec::new();
            let mut failed = 0usize;
            let mut batch = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let bank = format!("w{w}b{batch}");
                batch += 1;
                let memories = (0..4)
                    .map(|i| {
                        NewMemory::new(
                            TENANT,
                            &bank,
                            Kind::Note,
                            format!("Soak batch {bank} item {i}: the {bank}zq replica."),
                        )
                        .vector(vector(&format!("{bank}/{i}")))
                    })
                    .collect();
                let engine = shared.current().await;
                let r = engine.remember_many(memories).await;
                match r {
                    Ok(_) => acknowledged.push(bank),
                    Err(Error::Storage(IndexerError::ReadOnly { .. })) => {
                        failed += 1;
                        shared.reopen(engine).await;
                    }
                    Err(e) => {
                        assert!(is_storage(&e), "untyped failure {e:?}");
                        failed += 1;
                    }
                }
            }
            (acknowledged, failed)
        }));
    }
    // Readers: every listed bank holds its whole batch; recall never fails.
    let mut readers = Vec::new();
    for r in 0..8 {
        let (shared, stop, torn, reads, whole) = (
            shared.clone(),
            stop.clone(),
            torn.clone(),
            reads.clone(),
            whole.clone(),
        );
        readers.push(tokio::spawn(async move {
            let mut n = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let engine = shared.current().await;
                let listed = engine
                    .list(TENANT, None)
                    .await
                    .expect("reads work under faults");
                let mut per_bank: BTreeMap<String, usize> = BTreeMap::new();
                for m in &listed {
                    *per_bank.entry(m.bank.clone()).or_default() += 1;
                }
                torn.fetch_add(
                    per_bank.values().filter(|c| **c != 4).count(),
                    Ordering::Relaxed,
                );
                if let Some(bank) = per_bank.keys().nth((n * 7 + r) % per_bank.len().max(1)) {
                    // A recall of the batch's own token sees all of it or none.
                    let hits = engine
                        .recall(TENANT, format!("{bank}zq replica"))
                        .read([bank.as_str()])
                        .limit(20)
                        .execute()
                        .await
                        .expect("recall works under faults")
                        .hits;
                    let of_batch = hits.iter().filter(|h| h.memory.bank == *bank).count();
                    if of_batch != 0 && of_batch != 4 {
                        torn.fetch_add(1, Ordering::Relaxed);
                    }
                    if of_batch == 4 {
                        whole.fetch_add(1, Ordering::Relaxed);
                    }
                }
                drop(engine);
                reads.fetch_add(1, Ordering::Relaxed);
                n += 1;
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        }));
    }
    tokio::time::sleep(std::time::Duration::from_secs(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let mut acknowledged = Vec::new();
    let mut failed = 0;
    for w in writers {
        let (a, f) = w.await.unwrap();
        acknowledged.extend(a);
        failed += f;
    }
    for r in readers {
        r.await.unwrap();
    }
    armed.heal();
    let injected = armed.failed();
    let reopens = shared.reopens.load(Ordering::Relaxed);
    let last = shared.engine.write().await.take();
    drop(last);
    drop(shared);
    drop(armed);

    let engine = open(dir.path(), soak_write()).await;
    let listed = engine.list(TENANT, None).await.unwrap();
    let mut per_bank: BTreeMap<String, usize> = BTreeMap::new();
    for m in &listed {
        *per_bank.entry(m.bank.clone()).or_default() += 1;
    }
    let lost: Vec<&String> = acknowledged
        .iter()
        .filter(|b| per_bank.get(*b) != Some(&4))
        .collect();
    let partial = per_bank.values().filter(|c| **c != 4).count();
    let mut by_kind: BTreeMap<String, usize> = BTreeMap::new();
    for (_, (op, file)) in &injected {
        let area = match file.split('/').next() {
            Some("") | None => ".".to_string(),
            Some(top) => top.to_string(),
        };
        *by_kind.entry(format!("{op:?} {area}")).or_default() += 1;
    }
    println!(
        "soak {seconds} s, seed {seed:#x}: {} batches acknowledged, {failed} failed, {} faults injected \
         ({by_kind:?}), {reopens} reopens, {} reads ({} recalls saw a whole batch), {} torn; after the last reopen {} banks, \
         {} acknowledged lost, {partial} partial",
        acknowledged.len(),
        injected.len(),
        reads.load(Ordering::Relaxed),
        whole.load(Ordering::Relaxed),
        torn.load(Ordering::Relaxed),
        per_bank.len(),
        lost.len()
    );
    assert!(!injected.is_empty(), "the soak injected no fault");
    assert!(
        acknowledged.len() > 20,
        "too little was acknowledged to tell"
    );
    assert!(lost.is_empty(), "acknowledged batches lost: {lost:?}");
    assert_eq!(partial, 0, "a batch is there in part after the reopen");
    assert_eq!(
        torn.load(Ordering::Relaxed),
        0,
        "a read saw a batch in part"
    );
    assert!(
        whole.load(Ordering::Relaxed) > 0,
        "no recall saw a whole batch: the torn check never ran"
    );
}
