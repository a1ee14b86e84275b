//! A full disk, for real: the data directory on a small tmpfs (mounted by
//! the test, which runs as root on CI and here). An import runs into the
//! full disk: the failed call is a typed error, the calls before it are
//! all served (and only they), reads keep working while the disk is full,
//! writes succeed again once there is space, without a restart, and a
//! reopen finds exactly what was acknowledged.

use std::path::{Path, PathBuf};
use std::process::Command;

use recall::{Engine, Error, IndexerError, Kind, NewMemory};

use super::{model, open};

/// A tmpfs mounted for the test's lifetime.
struct SmallDisk {
    at: PathBuf,
}

impl SmallDisk {
    /// Mounts a tmpfs of `mib` MiB at `at`, or None when this user may not
    /// mount (then the caller says so; as root a failure is an error).
    fn mount(at: &Path, mib: usize) -> Option<SmallDisk> {
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(at)
            .status()
            .ok()?;
        status.success().then(|| SmallDisk {
            at: at.to_path_buf(),
        })
    }

    /// [`SmallDisk::mount`], failing the test when it runs as root and
    /// cannot mount, and saying it skipped otherwise.
    fn mount_or_skip(at: &Path, mib: usize) -> Option<SmallDisk> {
        let disk = SmallDisk::mount(at, mib);
        if disk.is_none() {
            assert!(
                !is_root(),
                "running as root, but a tmpfs could not be mounted"
            );
            eprintln!("skipped: mounting a small filesystem needs root");
        }
        disk
    }

    /// Grows the filesystem: the disk is no longer full.
    fn grow(&self, mib: usize) {
        let status = Command::new("mount")
            .args(["-o", &format!("remount,size={mib}m")])
            .arg(&self.at)
            .status()
            .unwrap();
        assert!(status.success(), "remount failed");
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.at).status();
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

/// A unit vector of the model's width, distinct per `i` (no two near copies).
fn vector(i: usize) -> Vec<f32> {
    let mut v = vec![0.0f32; 384];
    v[i % 384] = 1.0;
    v[(i / 384 + 7 * i + 1) % 384] += 0.5;
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter().map(|x| x / norm).collect()
}

fn memory(i: usize) -> NewMemory {
    // One bank per memory: the synthetic vectors must never deduplicate.
    NewMemory::new(
        "acme",
        format!("b{i}"),
        Kind::Note,
        format!("Disk test memory number {i} about the ledger replica."),
    )
    .vector(vector(i))
}

#[tokio::test]
async fn a_full_disk_fails_the_write_keeps_what_was_acknowledged_and_serves_reads() {
    let dir = tempfile::tempdir().unwrap();
    let Some(disk) = SmallDisk::mount_or_skip(dir.path(), 6) else {
        return;
    };
    let data = dir.path().join("data");
    let engine = Engine::open(super::config(&data).model(model()))
        .await
        .unwrap();

    // Far more than 6 MiB of log frames: the disk fills part way.
    let total = 20_000;
    let mut acknowledged = 0usize;
    let outcome = engine
        .import((0..total).map(memory), 200, |outcomes| {
            acknowledged += outcomes.len()
        })
        .await;
    let err = outcome.expect_err("6 MiB cannot hold 20,000 memories");
    assert!(
        matches!(&err, Error::Storage(IndexerError::Io { source, .. })
            if source.raw_os_error() == Some(28)),
        "expected ENOSPC as a typed storage error, got {err:?}"
    );
    assert!(acknowledged > 0 && acknowledged < total, "{acknowledged}");
    assert_eq!(acknowledged % 200, 0, "calls are whole");
    println!("disk full after {acknowledged} acknowledged memories: {err}");

    // Reads work while the disk is full, and see exactly what was acknowledged.
    let listed = engine.list("acme", None).await.unwrap();
    assert_eq!(listed.len(), acknowledged);
    let last = acknowledged - 1;
    let found = engine
        .recall("acme", format!("Disk test memory number {last}"))
        .read([format!("b{last}")])
        .execute()
        .await
        .unwrap();
    assert!(!found.hits.is_empty(), "recall while the disk is full");
    assert!(
        engine
            .get("acme", listed[0].id)
            .await
            .is_ok_and(|m| m.content.starts_with("Disk test memory"))
    );

    // Space again: the next write succeeds without a restart.
    disk.grow(512);
    let more = engine.remember(memory(total + 1)).await.unwrap().id();
    engine.flush().await.unwrap();
    drop(engine);

    let engine = open(&data).await;
    let listed = engine.list("acme", None).await.unwrap();
    assert_eq!(listed.len(), acknowledged + 1, "after reopen");
    assert!(engine.get("acme", more).await.is_ok());
    let banks: std::collections::HashSet<String> = listed.iter().map(|m| m.bank.clone()).collect();
    assert!(banks.contains(&format!("b{last}")));
    assert!(
        !banks.contains(&format!("b{acknowledged}")),
        "the failed call's first memory is not there"
    );
    drop(engine);
    drop(disk);
}

/// Opening a store whose log cannot be replayed into the tables (the disk
/// is full) serves reads from the log and the tables, says so in `status`,
/// refuses writes with a typed error, and a reopen with space recovers all.
#[tokio::test]
async fn a_store_opened_on_a_full_disk_serves_reads_and_refuses_writes() {
    let dir = tempfile::tempdir().unwrap();
    let Some(disk) = SmallDisk::mount_or_skip(dir.path(), 6) else {
        return;
    };
    let data = dir.path().join("data");
    let mut acknowledged = 0usize;
    {
        let engine = Engine::open(super::config(&data).model(model()))
            .await
            .unwrap();
        let filled = engine
            .import((0..20_000).map(memory), 200, |outcomes| {
                acknowledged += outcomes.len()
            })
            .await;
        assert!(filled.is_err(), "the disk must fill");
        // Dropped with every acknowledged memory only in the log.
        assert_eq!(engine.status().await.unwrap().pending_in_log, acknowledged);
    }

    let engine = open(&data).await;
    let status = engine.status().await.unwrap();
    let reason = status.read_only.clone().expect("opened read-only");
    println!("read-only: {reason}");
    assert_eq!(status.memories, acknowledged);
    assert_eq!(engine.list("acme", None).await.unwrap().len(), acknowledged);
    let found = engine
        .recall("acme", "Disk test memory number 7")
        .read(["b7"])
        .execute()
        .await
        .unwrap();
    assert!(!found.hits.is_empty(), "recall serves the log's memories");
    let refused = engine.remember(memory(99_999)).await;
    assert!(
        matches!(refused, Err(Error::Storage(IndexerError::ReadOnly { .. }))),
        "{refused:?}"
    );
    let id = engine.list("acme", None).await.unwrap()[0].id;
    assert!(engine.confirm("acme", id).await.is_err());
    drop(engine);

    disk.grow(512);
    let engine = open(&data).await;
    let status = engine.status().await.unwrap();
    assert_eq!(status.read_only, None);
    assert_eq!(status.memories, acknowledged);
    assert_eq!(status.pending_in_log, 0, "replayed into the tables");
    engine.remember(memory(99_999)).await.unwrap();
    assert_eq!(engine.get("acme", id).await.unwrap().confirmations, 0);
    drop(engine);
    drop(disk);
}

/// Runs the `recall` binary on `data`.
fn recall_cli(data: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_recall"))
        .arg("--data")
        .arg(data)
        .args(args)
        .output()
        .unwrap()
}

/// `recall import` of 100,000 memories into a disk that fills part way
/// (a 100 MiB tmpfs), as a user runs it: the import stops with ENOSPC, the
/// error names the failed call's first line and how many lines are imported, `--json` prints `acknowledged_lines` on stdout,
/// `export` on the still-full disk lists exactly those lines (the store
/// opens read-only), and once the disk grows `--skip` imports the rest.
#[test]
fn the_cli_import_into_a_full_disk_says_what_is_stored_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let Some(disk) = SmallDisk::mount_or_skip(dir.path(), 100) else {
        return;
    };
    let data = dir.path().join("data");
    let input = tempfile::tempdir().unwrap();
    let file = input.path().join("memories.jsonl");
    let total = 100_000;
    let lines: Vec<String> = (0..total)
        .map(|i| {
            serde_json::json!({
                "bank": format!("b{i}"),
                "kind": "note",
                "content": format!("Disk test memory number {i} about the ledger replica."),
                "vector": vector(i),
            })
            .to_string()
        })
        .collect();
    std::fs::write(&file, lines.join("\n")).unwrap();
    let file_arg = file.to_str().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();

    let out = recall_cli(
        &data,
        &[
            "--json", "import", "--tenant", "acme", "--batch", "1000", file_arg,
        ],
    );
    assert!(
        !out.status.success(),
        "100 MiB cannot hold {total} memories"
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(&out.stdout)));
    let acknowledged = report["acknowledged_lines"].as_u64().unwrap() as usize;
    assert!(acknowledged > 0 && acknowledged < total, "{report}");
    assert_eq!(acknowledged % 1000, 0, "calls are whole: {report}");
    assert_eq!(report["stored"].as_u64(), Some(acknowledged as u64));
    let stderr = text(&out.stderr);
    println!("{}", stderr.trim());
    assert!(
        stderr.contains(&format!("call starting at line {}", acknowledged + 1))
            && stderr.contains(&format!("the first {acknowledged} lines are imported"))
            && stderr.contains(&format!("--skip {acknowledged}"))
            && stderr.contains("No space left on device"),
        "{stderr}"
    );

    // The disk is still full: a new process opens the store read-only and
    // exports exactly the acknowledged lines.
    let status = recall_cli(&data, &["--json", "status"]);
    assert!(status.status.success(), "{}", text(&status.stderr));
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert!(status["read_only"].is_string(), "{status}");
    let exported = recall_cli(&data, &["export", "--tenant", "acme"]);
    assert!(exported.status.success(), "{}", text(&exported.stderr));
    let exported = text(&exported.stdout);
    assert_eq!(exported.lines().count(), acknowledged);
    assert!(exported.contains(&format!("number {} about", acknowledged - 1)));
    assert!(!exported.contains(&format!("number {acknowledged} about")));

    // Space again: --skip resumes exactly where the error said.
    disk.grow(512);
    let out = recall_cli(
        &data,
        &[
            "--json",
            "import",
            "--tenant",
            "acme",
            "--batch",
            "1000",
            "--skip",
            &acknowledged.to_string(),
            file_arg,
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let status = recall_cli(&data, &["--json", "status"]);
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(
        status["memories"].as_u64(),
        Some(total as u64),
        "every line once: {status}"
    );
    assert!(status["read_only"].is_null(), "{status}");
    drop(disk);
}
