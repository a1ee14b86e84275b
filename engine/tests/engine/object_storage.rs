//! A store on S3-compatible object storage (`Config::remote`), against a
//! real SeaweedFS server (`recall_indexer::s3_server`, the binary installed
//! by scripts/setup.sh), one server per test and one bucket per store: writes
//! are in the bucket when acknowledged, the local directory is only a
//! cache, erasure leaves no copy in any object, a second writer is
//! refused, and SIGKILL rounds lose nothing acknowledged.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use futures::TryStreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::{ObjectStore, ObjectStoreExt};
use recall::{
    AuditOp, Config, Engine, EraseScope, Error, HashEmbedder, IndexerError, Kind, ModelSource,
    NewMemory, Remembered, Remote, WriteConfig,
};
use recall_indexer::s3_server::{Fault, FaultyProxy, Matching, Moto, SeaweedFs};
use uuid::Uuid;

/// The tests' writer lease: short, so a killed writer's store is taken
/// over in about a second.
const LEASE: Duration = Duration::from_secs(1);

/// A SeaweedFS server on free loopback ports, and a fresh bucket per store.
struct Weed(SeaweedFs);

impl Weed {
    fn start() -> Weed {
        Weed(SeaweedFs::start().unwrap())
    }

    fn store(&self) -> Remote {
        self.0.store("team").unwrap().lease_ttl(LEASE)
    }

    fn endpoint(&self) -> &str {
        self.0.endpoint()
    }

    /// A store reached directly, and through a [`FaultyProxy`] with
    /// object_store's retries bounded for a test (Lance's keys, which the
    /// log's client reads too).
    fn behind_proxy(&self, retries: u32, timeout_s: u32) -> (FaultyProxy, Remote, Remote) {
        let proxy = FaultyProxy::start(&self.0).unwrap();
        let direct = self.store();
        let routed = proxy
            .route(direct.clone())
            .option("client_max_retries", retries.to_string())
            .option("client_retry_timeout", timeout_s.to_string());
        (proxy, direct, routed)
    }
}

/// Requests of `method` whose path holds `path`.
fn matching(method: &str, path: &str) -> Matching {
    Matching {
        method: method.into(),
        path: path.into(),
    }
}

/// A client of the bucket `remote` names, for looking at what is there.
fn bucket(remote: &Remote) -> Arc<dyn ObjectStore> {
    let mut builder = AmazonS3Builder::new().with_bucket_name(remote.bucket());
    for (key, value) in remote.options() {
        builder = builder.with_config(key.parse().unwrap(), value);
    }
    Arc::new(builder.build().unwrap())
}

/// Every object in the bucket, with its bytes.
async fn objects(remote: &Remote) -> Vec<(String, Vec<u8>)> {
    let store = bucket(remote);
    let listed: Vec<object_store::ObjectMeta> = store.list(None).try_collect().await.unwrap();
    let mut out = Vec::new();
    for meta in listed {
        let bytes = store
            .get(&meta.location)
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        out.push((meta.location.to_string(), bytes.to_vec()));
    }
    out
}

fn holding<'a>(objects: &'a [(String, Vec<u8>)], needle: &[u8]) -> Vec<&'a str> {
    objects
        .iter()
        .filter(|(_, bytes)| bytes.windows(needle.len()).any(|w| w == needle))
        .map(|(name, _)| name.as_str())
        .collect()
}

fn log_objects(objects: &[(String, Vec<u8>)]) -> usize {
    objects
        .iter()
        .filter(|(name, _)| name.starts_with("team/wal/"))
        .count()
}

/// The real model, for the test that deduplicates and recalls by meaning.
fn modelled(cache: &Path, remote: &Remote) -> Config {
    super::config(cache)
        .remote(remote.clone())
        .model(super::model())
}

/// The hash embedder keeps these about storage, not the model.
fn hashed(cache: &Path, remote: &Remote) -> Config {
    super::config(cache)
        .remote(remote.clone())
        .model(ModelSource::Custom(Arc::new(HashEmbedder::new(384))))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_on_object_storage_keeps_what_it_acknowledged_and_its_directory_is_a_cache() {
    let weed = Weed::start();
    let remote = weed.store();
    let cache = tempfile::tempdir().unwrap();
    let engine = Engine::open(modelled(cache.path(), &remote)).await.unwrap();
    let text = "The staging cluster drains its queue before every deploy; skipping it loses jobs.";
    let first = engine
        .remember(NewMemory::new("acme", "repo:api", Kind::Pitfall, text).title("Drain first"))
        .await
        .unwrap();
    let again = engine
        .remember(NewMemory::new("acme", "repo:api", Kind::Pitfall, text))
        .await
        .unwrap();
    assert!(
        matches!(again, Remembered::Deduplicated { id, .. } if id == first.id()),
        "a near copy confirms the first: {again:?}"
    );
    let other = engine
        .remember(NewMemory::new(
            "acme",
            "repo:api",
            Kind::Convention,
            "Release notes are written in the imperative mood.",
        ))
        .await
        .unwrap()
        .id();
    engine.forget("acme", other).await.unwrap();

    // Acknowledged means in the bucket: the writes sit in log objects
    // until a flush moves them into the tables.
    let before = objects(&remote).await;
    assert!(
        log_objects(&before) >= 4,
        "one log object per acknowledged call"
    );
    assert_eq!(
        holding(&before, text.as_bytes()).len(),
        1,
        "the text is in its log object"
    );
    drop(engine);

    // A new machine: an empty cache. Everything comes back from the bucket.
    let fresh = tempfile::tempdir().unwrap();
    let engine = Engine::open(modelled(fresh.path(), &remote)).await.unwrap();
    let hits = engine
        .recall("acme", "what must happen before a deploy to staging?")
        .read(["repo:api"])
        .limit(5)
        .execute()
        .await
        .unwrap();
    let ids: Vec<Uuid> = hits.hits.iter().map(|h| h.memory.id).collect();
    assert_eq!(
        ids.first(),
        Some(&first.id()),
        "recalled from a fresh cache: {ids:?}"
    );
    assert!(
        !ids.contains(&other),
        "the forgotten memory stays forgotten"
    );
    let memory = engine.get("acme", first.id()).await.unwrap();
    assert_eq!(
        memory.confirmations, 1,
        "the deduplicated write's confirmation came back"
    );

    // A flush moves the log into the tables and deletes its objects.
    engine.flush().await.unwrap();
    let after = objects(&remote).await;
    assert_eq!(
        log_objects(&after),
        0,
        "the log objects are gone after the flush"
    );
    assert!(
        after
            .iter()
            .any(|(name, _)| name.starts_with("team/tables/memories.lance/")),
        "the tables are in the bucket"
    );
    assert!(
        !holding(&after, text.as_bytes()).is_empty(),
        "the text is in the tables"
    );
    // Nothing in the cache is the only copy: no table is there.
    assert!(!fresh.path().join("tables").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn erasing_on_object_storage_leaves_no_copy_in_the_bucket_or_the_cache() {
    let weed = Weed::start();
    let remote = weed.store();
    let cache = tempfile::tempdir().unwrap();
    let engine = Engine::open(hashed(cache.path(), &remote)).await.unwrap();
    let secret = "Ann keeps the spare key under the blue heron statue";
    let kept = "Bob volunteers at the Riverside shelter on Thursdays";
    engine
        .remember(NewMemory::new("acme", "user:ann", Kind::Fact, secret))
        .await
        .unwrap();
    engine
        .remember(NewMemory::new("acme", "user:bob", Kind::Fact, kept))
        .await
        .unwrap();
    engine.flush().await.unwrap();
    // One more copy only in the log when the erasure starts.
    let unflushed = "Ann's locker phrase is purple otter";
    engine
        .remember(NewMemory::new("acme", "user:ann", Kind::Fact, unflushed))
        .await
        .unwrap();
    let before = objects(&remote).await;
    assert!(
        !holding(&before, secret.as_bytes()).is_empty(),
        "control: in the bucket"
    );
    assert!(
        !holding(&before, unflushed.as_bytes()).is_empty(),
        "control: in a log object"
    );

    let erased = engine
        .erase("acme", EraseScope::Bank("user:ann".into()), "dpo@acme")
        .await
        .unwrap();
    assert_eq!(erased.ids.len(), 2);
    let after = objects(&remote).await;
    for text in [secret, unflushed] {
        assert_eq!(
            holding(&after, text.as_bytes()),
            Vec::<&str>::new(),
            "{text:?} is in no object"
        );
        let in_cache: Vec<PathBuf> = walk(cache.path())
            .into_iter()
            .filter(|(_, bytes)| bytes.windows(text.len()).any(|w| w == text.as_bytes()))
            .map(|(path, _)| path)
            .collect();
        assert!(
            in_cache.is_empty(),
            "{text:?} is in no cached file: {in_cache:?}"
        );
    }
    assert!(
        !holding(&after, kept.as_bytes()).is_empty(),
        "the other bank stays"
    );
    let hits = engine
        .recall("acme", "spare key heron statue")
        .read(["user:ann", "user:bob"])
        .execute()
        .await
        .unwrap();
    assert!(hits.hits.iter().all(|h| h.memory.content == kept));
}

fn walk(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                out.push((path, bytes));
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_writer_waits_for_the_lease_and_then_sees_every_write() {
    let weed = Weed::start();
    let remote = weed.store();
    let (cache_a, cache_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = Engine::open(hashed(cache_a.path(), &remote)).await.unwrap();
    let kept = a
        .remember(NewMemory::new(
            "acme",
            "notes",
            Kind::Note,
            "written by the first node",
        ))
        .await
        .unwrap()
        .id();
    // Another machine, while the first holds the lease: refused after its wait.
    let impatient = remote.clone().lease_wait(Duration::from_millis(300));
    let refused = Engine::open(hashed(cache_b.path(), &impatient)).await;
    assert!(
        matches!(refused, Err(Error::Storage(IndexerError::LeaseHeld { .. }))),
        "{:?}",
        refused.err()
    );
    // The first goes away (its lease is given up on drop); the second
    // takes over and reads what the first acknowledged.
    drop(a);
    let b = Engine::open(hashed(cache_b.path(), &remote)).await.unwrap();
    let all = b.list("acme", Some("notes")).await.unwrap();
    assert_eq!(all.iter().map(|m| m.id).collect::<Vec<_>>(), vec![kept]);
    b.remember(NewMemory::new(
        "acme",
        "notes",
        Kind::Note,
        "written by the second node",
    ))
    .await
    .unwrap();
}

/// Helper process for the paused-writer test: writes until a write is
/// refused, printing `ACK remember <id>` after each acknowledged one and
/// `REFUSED <error>` at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "helper process for a_writer_paused_past_its_lease_is_refused_and_loses_nothing"]
async fn paused_writer_child() {
    let Ok(dir) = std::env::var("RECALL_CRASH_DIR") else {
        return;
    };
    let dir = PathBuf::from(dir);
    let engine = Engine::open(hashed(&dir.join("cache"), &read_remote(&dir)))
        .await
        .unwrap();
    for i in 0u64.. {
        let written = engine
            .remember(NewMemory::new(
                "acme",
                "load",
                Kind::Note,
                format!("paused writer {i}"),
            ))
            .await;
        match written {
            Ok(outcome) => println!("ACK remember {}", outcome.id()),
            Err(e) => {
                println!("REFUSED {e}");
                return;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_paused_past_its_lease_is_refused_and_loses_nothing() {
    let weed = Weed::start();
    let remote = weed.store();
    let dir = tempfile::tempdir().unwrap();
    write_remote(dir.path(), &remote);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "object_storage::paused_writer_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("RECALL_CRASH_DIR", dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = lines_of(child.stdout.take().unwrap());
    let next = || {
        lines
            .recv_timeout(Duration::from_secs(60))
            .expect("the child went silent")
    };
    let mut acked = Vec::new();
    while acked.len() < 5 {
        // The first line also carries libtest's `test … ... ` prefix.
        if let Some((_, id)) = next().split_once("ACK remember ") {
            acked.push(Uuid::parse_str(id.trim()).unwrap());
        }
    }
    // The writer stops (a long GC pause, a suspended VM) ...
    signal(&child, "STOP");
    // ... and another node takes its lease once it expires, and writes.
    let cache = tempfile::tempdir().unwrap();
    let taker = remote.clone().lease_wait(Duration::from_secs(10));
    let engine = Engine::open(hashed(cache.path(), &taker)).await.unwrap();
    let seen: std::collections::HashSet<Uuid> = engine
        .list("acme", Some("load"))
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.id)
        .collect();
    let newer = engine
        .remember(NewMemory::new(
            "acme",
            "load",
            Kind::Note,
            "written by the new holder",
        ))
        .await
        .unwrap()
        .id();
    // The paused writer wakes up: whatever it acknowledged before the
    // pause is there; every write after it is refused.
    signal(&child, "CONT");
    let mut refused = None;
    while refused.is_none() {
        let line = next();
        if let Some((_, id)) = line.split_once("ACK remember ") {
            acked.push(Uuid::parse_str(id.trim()).unwrap());
        } else if let Some((_, e)) = line.split_once("REFUSED ") {
            refused = Some(e.to_string());
        }
    }
    let _ = child.wait();
    let refused = refused.unwrap_or_default();
    assert!(
        refused.contains("lease"),
        "refused for its lease: {refused}"
    );
    let missing: Vec<&Uuid> = acked.iter().filter(|id| !seen.contains(id)).collect();
    assert!(
        missing.is_empty(),
        "the new holder saw every acknowledged write; missing {missing:?}"
    );
    drop(engine);
    let last_cache = tempfile::tempdir().unwrap();

    let last = Engine::open(hashed(last_cache.path(), &taker))
        .await
        .unwrap();
    let listed = last.list("acme", Some("load")).await.unwrap();
    let all: std::collections::HashSet<Uuid> = listed.iter().map(|m| m.id).collect();
    let unacked: Vec<&str> = listed
        .iter()
        .filter(|m| m.id != newer && !acked.contains(&m.id))
        .map(|m| m.content.as_str())
        .collect();
    assert!(all.contains(&newer), "the new holder's write stays");
    assert!(
        acked.iter().all(|id| all.contains(id)),
        "every acknowledged write stays"
    );
    // The write in flight when the writer stopped may have landed before
    // the new holder listed the log (then it is there, unacknowledged), or
    // after (then it is dropped as stale); no other write of the paused one is.
    assert!(
        unacked.len() <= 1,
        "unacknowledged writes kept: {unacked:?} (refused: {refused})"
    );
}

fn signal(child: &Child, name: &str) {
    let status = Command::new("kill")
        .args([format!("-{name}"), child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -{name}");
}

fn lines_of(stdout: std::process::ChildStdout) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if send.send(line).is_err() {
                break;
            }
        }
    });
    receive
}

fn write_remote(dir: &Path, remote: &Remote) {
    let mut description = format!("{}\n", remote.uri());
    for (k, v) in remote.options() {
        description.push_str(&format!("{k}={v}\n"));
    }
    std::fs::write(dir.join("remote"), description).unwrap();
}

/// Helper process for the SIGKILL rounds: writes to the store the parent
/// names in `RECALL_CRASH_DIR/remote` and prints `ACK remember <id>` once
/// each call returned. Runs only when the parent asks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "helper process for acknowledged_writes_on_object_storage_survive_sigkill"]
async fn object_storage_writer_child() {
    let Ok(dir) = std::env::var("RECALL_CRASH_DIR") else {
        return;
    };
    let dir = PathBuf::from(dir);
    let remote = read_remote(&dir);
    let config = hashed(&dir.join("cache"), &remote).write(WriteConfig {
        flush_every: 5,
        ..WriteConfig::default()
    });
    let engine = Engine::open(config).await.unwrap();
    for i in 0u64.. {
        let id = engine
            .remember(NewMemory::new(
                "acme",
                "load",
                Kind::Note,
                format!("object storage write {i} {}", Uuid::now_v7().simple()),
            ))
            .await
            .unwrap()
            .id();
        println!("ACK remember {id}");
    }
}

fn read_remote(dir: &Path) -> Remote {
    let text = std::fs::read_to_string(dir.join("remote")).unwrap();
    let mut lines = text.lines();
    let mut remote = Remote::new(lines.next().unwrap()).unwrap();
    for line in lines {
        let (k, v) = line.split_once('=').unwrap();
        remote = remote.option(k, v);
    }
    remote.lease_ttl(LEASE)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_on_object_storage_survive_sigkill() {
    let weed = Weed::start();
    let remote = weed.store();
    let dir = tempfile::tempdir().unwrap();
    write_remote(dir.path(), &remote);
    let mut acked: Vec<Uuid> = Vec::new();
    for round in 0..4 {
        let n = 5 + round * 4;
        let printed =
            super::run_and_kill_begun("object_storage::object_storage_writer_child", dir.path(), n);
        acked.extend(
            printed
                .acked
                .iter()
                .map(|line| Uuid::parse_str(line.strip_prefix("remember ").unwrap()).unwrap()),
        );
        // Every round but the first also loses its cache: the bucket alone
        // must hold what was acknowledged.
        if round % 2 == 1 {
            std::fs::remove_dir_all(dir.path().join("cache")).unwrap();
        }
    }
    let engine = Engine::open(hashed(&dir.path().join("cache"), &remote))
        .await
        .unwrap();
    let found: std::collections::HashSet<Uuid> = engine
        .list("acme", Some("load"))
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.id)
        .collect();
    let lost: Vec<&Uuid> = acked.iter().filter(|id| !found.contains(id)).collect();
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged writes lost: {lost:?}",
        lost.len(),
        acked.len()
    );
    // Each acknowledged write's audit entry was in the bucket before the
    // write returned: none went with a killed writer or a lost cache.
    let audited = remembered_in_audit(&engine).await;
    let unaudited: Vec<&Uuid> = acked
        .iter()
        .filter(|id| !audited.contains(&id.to_string()))
        .collect();
    assert!(
        unaudited.is_empty(),
        "{} of {} acknowledged writes have no audit entry",
        unaudited.len(),
        acked.len()
    );
}

/// The ids the audit log records as remembered for `acme`.
async fn remembered_in_audit(engine: &Engine) -> std::collections::HashSet<String> {
    engine
        .audit("acme")
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.op == AuditOp::Remember)
        .flat_map(|e| e.ids)
        .collect()
}

/// The audit log lives in the bucket: a node with an empty cache reads
/// every entry another node wrote; the single objects are merged as they
/// grow (and at the next open, what a node left), so a read costs a
/// listing and a few GETs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_log_is_in_the_bucket_merged_as_it_grows_and_read_by_the_next_node() {
    let weed = Weed::start();
    let remote = weed.store();
    let mut ids = Vec::new();
    {
        let cache = tempfile::tempdir().unwrap();
        let engine = Engine::open(hashed(cache.path(), &remote)).await.unwrap();
        // More than one merge's worth (256 single objects).
        for i in 0..300 {
            let text = format!("audited write {i} {}", Uuid::now_v7().simple());
            let id = engine
                .remember(NewMemory::new("acme", "load", Kind::Note, text))
                .await
                .unwrap()
                .id();
            ids.push(id);
        }
        engine.forget("acme", ids[0]).await.unwrap();
        engine.close().await.unwrap();
        // The cache keeps no audit entry: the bucket is where they are.
        let file = std::fs::metadata(cache.path().join("audit.jsonl")).map_or(0, |m| m.len());
        assert_eq!(file, 0);
    }
    let audit_objects = |all: &[(String, Vec<u8>)], prefix: &str| {
        all.iter()
            .filter(|(name, _)| name.starts_with(prefix))
            .count()
    };
    let after_first = objects(&remote).await;
    assert_eq!(audit_objects(&after_first, "team/audit/m-"), 1, "one merge");
    assert_eq!(
        audit_objects(&after_first, "team/audit/e-"),
        300 + 1 - 256,
        "the calls since the merge, one object each"
    );
    let cache = tempfile::tempdir().unwrap();
    let engine = Engine::open(hashed(cache.path(), &remote)).await.unwrap();
    let audited = remembered_in_audit(&engine).await;
    assert!(ids.iter().all(|id| audited.contains(&id.to_string())));
    let entries = engine.audit("acme").await.unwrap();
    assert_eq!(entries.len(), 301, "each entry once");
    assert_eq!(entries.last().map(|e| e.op), Some(AuditOp::Forget));
    let after_open = objects(&remote).await;
    assert_eq!(
        audit_objects(&after_open, "team/audit/e-"),
        0,
        "merged at open"
    );
    assert_eq!(audit_objects(&after_open, "team/audit/m-"), 2);
    assert!(
        engine.audit("other").await.unwrap().is_empty(),
        "another tenant's audit holds none of these"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_works_on_a_store_on_object_storage_and_hands_its_lease_back() {
    let weed = Weed::start();
    let remote = weed.store();
    let cache = tempfile::tempdir().unwrap();
    let cli = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_recall"))
            .args(["--data", remote.uri(), "--cache"])
            .arg(cache.path())
            .args(args)
            .env("AWS_ENDPOINT_URL", format!("http://{}", weed.endpoint()))
            .env("AWS_ALLOW_HTTP", "true")
            .env("AWS_ACCESS_KEY_ID", "recall")
            .env("AWS_SECRET_ACCESS_KEY", "recall-test")
            .env_remove("AWS_REGION")
            .output()
            .unwrap()
    };
    let out = cli(&[
        "remember",
        "--tenant",
        "acme",
        "--bank",
        "org",
        "--kind",
        "pitfall",
        "--trust",
        "user",
        "--title",
        "Friday deploys",
        "Never deploy the billing service on a Friday afternoon.",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The command gave the writer's lease back as it exited.
    let lease = objects(&remote)
        .await
        .into_iter()
        .find(|(name, _)| name == "team/lease")
        .expect("the lease object");
    let lease: serde_json::Value = serde_json::from_slice(&lease.1).unwrap();
    assert_eq!(lease["expires_at_ms"], 0, "{lease}");
    let out = cli(&[
        "--json",
        "recall",
        "--tenant",
        "acme",
        "--read",
        "org",
        "can I deploy billing on Friday?",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        result["hits"][0]["memory"]["title"], "Friday deploys",
        "{result}"
    );
    // A malformed location is a clear error before anything is opened.
    let out = Command::new(env!("CARGO_BIN_EXE_recall"))
        .args(["--data", "s3:///no-bucket", "status"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("bucket name is missing"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn object_store_faults_are_retried_and_surface_as_typed_errors_when_they_persist() {
    let weed = Weed::start();
    let (proxy, direct, remote) = weed.behind_proxy(2, 3);
    let note = |text: &str| NewMemory::new("acme", "notes", Kind::Note, text);
    let cache = tempfile::tempdir().unwrap();

    let engine = Engine::open(hashed(cache.path(), &remote)).await.unwrap();
    let log_puts = || matching("PUT", "/wal/");

    // Two 503s on the log's PUT: retried with backoff, the write lands.
    proxy.inject(log_puts(), Fault::Unavailable(2));
    let first = engine
        .remember(note("written through two 503s"))
        .await
        .unwrap()
        .id();
    assert_eq!(proxy.faulted(), 2, "both 503s were met and retried");

    // Every request 200 ms late: slower, not wrong.
    proxy.heal();
    proxy.inject(Matching::default(), Fault::Slow(Duration::from_millis(200)));
    let slow = engine
        .remember(note("written while the store was slow"))
        .await
        .unwrap()
        .id();

    // The store refuses the tables' commit (their manifest's PUT): the
    // flush fails with a typed error and the records stay in the log.
    proxy.heal();
    proxy.inject(matching("PUT", "/_versions/"), Fault::AlwaysUnavailable);
    let flushed = engine.flush().await;
    assert!(
        matches!(flushed, Err(Error::Storage(IndexerError::Lance { .. }))),
        "{flushed:?}"
    );

    // The log's PUT fails for good: a typed error, then no more writes.
    proxy.heal();
    proxy.inject(log_puts(), Fault::AlwaysUnavailable);
    let refused = engine.remember(note("never acknowledged")).await;
    assert!(
        matches!(
            refused,
            Err(Error::Storage(IndexerError::ObjectStore {
                operation: "put",
                ..
            }))
        ),
        "{refused:?}"
    );
    let after = engine.remember(note("after the failure")).await;
    assert!(
        matches!(after, Err(Error::Storage(IndexerError::ReadOnly { .. }))),
        "{after:?}"
    );
    proxy.heal();
    drop(engine);

    // Nothing acknowledged is lost and the tables take commits again.
    let reopened_cache = tempfile::tempdir().unwrap();

    let reopened = Engine::open(hashed(reopened_cache.path(), &direct))
        .await
        .unwrap();
    let texts: Vec<(Uuid, String)> = reopened
        .list("acme", Some("notes"))
        .await
        .unwrap()
        .into_iter()
        .map(|m| (m.id, m.content))
        .collect();
    let ids: Vec<Uuid> = texts.iter().map(|(id, _)| *id).collect();
    assert!(ids.contains(&first) && ids.contains(&slow), "{texts:?}");
    // The refused PUT never reached the server (the proxy answered it).
    assert_eq!(texts.len(), 2, "{texts:?}");
    reopened.flush().await.unwrap();
    reopened
        .remember(note("the store writes again"))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_erasure_a_node_left_unfinished_is_finished_by_the_next_node() {
    let weed = Weed::start();
    let (proxy, direct, remote) = weed.behind_proxy(1, 2);
    let secret = "Ann's door code is 4711 and the spare key is in the mailbox";
    let kept = "Bob prefers the standing desk by the window";
    let cache = tempfile::tempdir().unwrap();

    let engine = Engine::open(hashed(cache.path(), &remote)).await.unwrap();
    let ann = engine
        .remember(NewMemory::new("acme", "user:ann", Kind::Fact, secret))
        .await
        .unwrap()
        .id();
    engine
        .remember(NewMemory::new("acme", "user:bob", Kind::Fact, kept))
        .await
        .unwrap();
    engine.flush().await.unwrap();
    // The tables refuse every commit: the erasure records its intent in
    // the bucket, then stops part-way.
    proxy.inject(matching("PUT", "/_versions/"), Fault::AlwaysUnavailable);
    let stopped = engine
        .erase("acme", EraseScope::Memory(ann), "dpo@acme")
        .await;
    assert!(
        stopped.is_err(),
        "the erasure could not finish: {stopped:?}"
    );
    let hits = engine
        .recall("acme", "door code spare key")
        .read(["user:ann", "user:bob"])
        .execute()
        .await
        .unwrap();
    assert!(
        hits.hits.iter().all(|h| h.memory.id != ann),
        "never served again"
    );
    assert!(
        !holding(&objects(&direct).await, secret.as_bytes()).is_empty(),
        "control: still in the tables"
    );
    proxy.heal();
    drop(engine);

    // Another node, with an empty cache, finishes it before serving.
    let next_cache = tempfile::tempdir().unwrap();

    let next = Engine::open(hashed(next_cache.path(), &direct))
        .await
        .unwrap();
    assert!(matches!(
        next.get("acme", ann).await,
        Err(Error::NotFound { .. })
    ));
    let after = objects(&direct).await;
    assert_eq!(
        holding(&after, secret.as_bytes()),
        Vec::<&str>::new(),
        "in no object"
    );
    assert!(!holding(&after, kept.as_bytes()).is_empty());
    assert!(
        after.iter().all(|(name, _)| !name.ends_with("/ERASING")),
        "the intent is cleared"
    );
}

/// Eight processes' worth of engines open one store at once: exactly one
/// takes the lease (the conditional PUT has one winner), the others are
/// refused, and only the winner's write is there.
async fn racing_writers(remote: Remote) {
    let caches: Vec<tempfile::TempDir> = (0..8).map(|_| tempfile::tempdir().unwrap()).collect();
    let impatient = remote.clone().lease_wait(Duration::from_millis(300));
    let opens = caches.iter().map(|cache| {
        let config = hashed(cache.path(), &impatient);
        async move { Engine::open(config).await }
    });
    let outcomes = futures::future::join_all(opens).await;
    let mut winners = Vec::new();
    for outcome in outcomes {
        match outcome {
            Ok(engine) => winners.push(engine),
            Err(Error::Storage(IndexerError::LeaseHeld { .. })) => {}
            Err(e) => panic!("a loser is refused with LeaseHeld, not {e:?}"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one writer");
    let id = winners[0]
        .remember(NewMemory::new(
            "acme",
            "notes",
            Kind::Note,
            "the winner's write",
        ))
        .await
        .unwrap()
        .id();
    winners[0].close().await.unwrap();
    drop(winners);
    let cache = tempfile::tempdir().unwrap();
    let after = Engine::open(hashed(cache.path(), &remote)).await.unwrap();
    let ids: Vec<Uuid> = after
        .list("acme", Some("notes"))
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(ids, vec![id]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_writers_on_seaweedfs_leave_one_writer() {
    let weed = Weed::start();
    racing_writers(weed.store()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_writers_on_moto_leave_one_writer() {
    let moto = Moto::start().unwrap();
    racing_writers(moto.store("team").unwrap().lease_ttl(LEASE)).await;
}
