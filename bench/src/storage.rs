//! `recall-bench storage`: the engine on S3-compatible object storage
//! (SeaweedFS on loopback, `recall_indexer::s3_server`) beside the same
//! engine on a local directory, in one run and on one corpus (synthetic,
//! vectors given, so no model time is measured):
//!
//! - bulk import rate, write-ack latency (`remember`, one at a time) and
//!   recall latency (query vector given), p50/p99;
//! - open to first answer of the store just written, with its cache, and
//!   (object storage) with an empty cache, as a new node would;
//! - the server's own latency beside them: a 1 KiB PUT and GET, p50/p99;
//! - failover (object storage): a writer process (`storage-writer`)
//!   killed with SIGKILL while it writes; the time from the kill to the
//!   first write acknowledged by a new writer (which waits out the lease),
//!   and the acknowledged writes found afterwards.

use std::collections::HashSet;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use recall::{Engine, IMPORT_BATCH, Kind, NewMemory, Remote};
use recall_datasets::query_near;
use recall_indexer::s3_server::SeaweedFs;
use serde_json::json;
use uuid::Uuid;

use crate::report::{markdown_path, write_json};
use crate::speed::{
    TENANT, banks, bench_config, corpus, percentile, queries_near, time_recalls, to_new,
};

/// `recall-bench storage`.
#[derive(Debug, clap::Args)]
pub struct StorageArgs {
    /// Memories imported into each store.
    #[arg(long, default_value_t = 100_000)]
    pub memories: usize,
    /// Timed single writes per store.
    #[arg(long, default_value_t = 300)]
    pub writes: usize,
    /// Timed recalls per store.
    #[arg(long, default_value_t = 300)]
    pub queries: usize,
    /// The writer lease's ttl in seconds (`Remote::lease_ttl`): failover
    /// waits it out.
    #[arg(long, default_value_t = 10.0)]
    pub lease_ttl: f64,
    /// Failover rounds.
    #[arg(long, default_value_t = 3)]
    pub failovers: usize,
    /// Where the JSON goes (markdown beside it).
    #[arg(long, default_value = "bench-results/storage.json")]
    pub json: PathBuf,
    /// No progress bars.
    #[arg(long)]
    pub quiet: bool,
}

/// `recall-bench storage-writer` (run by `storage`): writes to the store
/// described in `--remote` until killed, printing `ACK <id>` after each
/// acknowledged write.
#[derive(Debug, clap::Args)]
pub struct WriterArgs {
    /// A file: the location on its first line, `key=value` options after.
    #[arg(long)]
    pub remote: PathBuf,
    /// The writer's cache directory.
    #[arg(long)]
    pub cache: PathBuf,
    /// The lease's ttl in seconds.
    #[arg(long)]
    pub lease_ttl: f64,
}

fn describe(remote: &Remote) -> String {
    let mut text = format!("{}\n", remote.uri());
    for (k, v) in remote.options() {
        text.push_str(&format!("{k}={v}\n"));
    }
    text
}

fn parse_remote(text: &str) -> anyhow::Result<Remote> {
    let mut lines = text.lines();
    let mut remote = Remote::new(lines.next().unwrap_or_default())?;
    for line in lines {
        if let Some((k, v)) = line.split_once('=') {
            remote = remote.option(k, v);
        }
    }
    Ok(remote)
}

/// Runs the hidden writer.
pub async fn writer_command(args: &WriterArgs) -> anyhow::Result<()> {
    let remote = parse_remote(&std::fs::read_to_string(&args.remote)?)?
        .lease_ttl(Duration::from_secs_f64(args.lease_ttl));
    let engine = Engine::open(bench_config(&args.cache).remote(remote)).await?;
    let extra = corpus(1_000);
    for i in 0usize.. {
        let m = &extra[i % extra.len()];
        let id = engine
            .remember(
                NewMemory::new(
                    TENANT,
                    "failover",
                    Kind::Note,
                    format!("failover write {i} {}", Uuid::now_v7()),
                )
                .vector(query_near(i as u64 | (1 << 62), &m.vector)),
            )
            .await?
            .id();
        println!("ACK {id}");
    }
    Ok(())
}

/// One store's figures.
#[derive(Debug, Default, serde::Serialize)]
struct Figures {
    import_per_s: f64,
    write_ack_ms_p50: f64,
    write_ack_ms_p99: f64,
    recall_ms_p50: f64,
    recall_ms_p99: f64,
    open_s: f64,
    open_s_empty_cache: Option<f64>,
}

/// Imports the corpus, times single writes and recalls, then reopens.
async fn measure(
    args: &StorageArgs,
    open: &dyn Fn(&Path) -> recall::Config,
    cache: &Path,
    empty_cache: Option<&Path>,
) -> anyhow::Result<Figures> {
    let n = args.memories;
    let data = corpus(n + args.writes);
    let (base, extra) = data.split_at(n);
    let engine = Engine::open(open(cache)).await?;
    let bar = crate::progress::bar(n as u64, "importing");
    if args.quiet {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let started = Instant::now();
    engine
        .import(base.iter().map(to_new), IMPORT_BATCH, |done| {
            bar.inc(done.len() as u64)
        })
        .await?;
    engine.flush().await?;
    let import_per_s = n as f64 / started.elapsed().as_secs_f64();
    engine.wait_for_maintenance().await?;
    bar.finish_and_clear();

    let mut write_ms = Vec::new();
    for m in extra {
        let t = Instant::now();
        engine.remember(to_new(m)).await?;
        write_ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    write_ms.sort_by(f64::total_cmp);
    let readable = banks(&data);
    let queries = queries_near(base, n, args.queries);
    let recall_ms = time_recalls(&engine, &readable, &queries).await?;
    engine.close().await?;
    drop(engine);

    let reopen = |dir: PathBuf| {
        let (readable, query) = (readable.clone(), queries[0].clone());
        async move {
            let t = Instant::now();
            let engine = Engine::open(open(&dir)).await?;
            time_recalls(&engine, &readable, std::slice::from_ref(&query)).await?;
            let took = t.elapsed().as_secs_f64();
            engine.close().await?;
            Ok::<f64, anyhow::Error>(took)
        }
    };
    let open_s = reopen(cache.to_path_buf()).await?;
    let open_s_empty_cache = match empty_cache {
        Some(dir) => Some(reopen(dir.to_path_buf()).await?),
        None => None,
    };
    Ok(Figures {
        import_per_s,
        write_ack_ms_p50: percentile(&write_ms, 50.0),
        write_ack_ms_p99: percentile(&write_ms, 99.0),
        recall_ms_p50: percentile(&recall_ms, 50.0),
        recall_ms_p99: percentile(&recall_ms, 99.0),
        open_s,
        open_s_empty_cache,
    })
}

/// The server's own PUT and GET latency for a 1 KiB object, sorted ms.
async fn server_latency(remote: &Remote, rounds: usize) -> anyhow::Result<(Vec<f64>, Vec<f64>)> {
    let mut builder = object_store::aws::AmazonS3Builder::new().with_bucket_name(remote.bucket());
    for (key, value) in remote.options() {
        builder = builder.with_config(key.parse()?, value);
    }
    let store: Arc<dyn ObjectStore> = Arc::new(builder.build()?);
    let (mut put_ms, mut get_ms) = (Vec::new(), Vec::new());
    for i in 0..rounds {
        let path = object_store::path::Path::from(format!("latency/{i}"));
        let t = Instant::now();
        store.put(&path, PutPayload::from(vec![7u8; 1024])).await?;
        put_ms.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        store.get(&path).await?.bytes().await?;
        get_ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    put_ms.sort_by(f64::total_cmp);
    get_ms.sort_by(f64::total_cmp);
    Ok((put_ms, get_ms))
}

/// One failover round's figures.
#[derive(Debug, serde::Serialize)]
struct Failover {
    acknowledged_before_kill: usize,
    found_after: usize,
    kill_to_first_write_s: f64,
}

/// Kills a writer process mid-write, takes the store over and writes.
async fn failover(args: &StorageArgs, remote: &Remote, work: &Path) -> anyhow::Result<Failover> {
    let description = work.join("remote");
    std::fs::write(&description, describe(remote))?;
    let mut child = Command::new(std::env::current_exe()?)
        .arg("storage-writer")
        .arg("--remote")
        .arg(&description)
        .arg("--cache")
        .arg(work.join("writer-cache"))
        .arg("--lease-ttl")
        .arg(args.lease_ttl.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
    let (send, lines) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if send.send(line).is_err() {
                break;
            }
        }
    });
    let mut acked = Vec::new();
    while acked.len() < 50 {
        let line = lines.recv_timeout(Duration::from_secs(120))?;
        if let Some(id) = line.strip_prefix("ACK ") {
            acked.push(Uuid::parse_str(id.trim())?);
        }
    }
    child.kill()?;
    let killed = Instant::now();
    child.wait()?;
    for line in lines.try_iter() {
        if let Some(id) = line.strip_prefix("ACK ") {
            acked.push(Uuid::parse_str(id.trim())?);
        }
    }
    let _ = reader.join();
    let taker = remote
        .clone()
        .lease_ttl(Duration::from_secs_f64(args.lease_ttl))
        .lease_wait(Duration::from_secs_f64(args.lease_ttl * 3.0));
    let cache = tempfile::tempdir()?;
    let engine = Engine::open(bench_config(cache.path()).remote(taker)).await?;
    engine
        .remember(
            NewMemory::new(TENANT, "failover", Kind::Note, "written by the new writer")
                .vector(query_near(1, &corpus(10)[0].vector)),
        )
        .await?;
    let kill_to_first_write_s = killed.elapsed().as_secs_f64();
    let found: HashSet<Uuid> = engine
        .list(TENANT, Some("failover"))
        .await?
        .into_iter()
        .map(|m| m.id)
        .collect();
    engine.close().await?;
    Ok(Failover {
        acknowledged_before_kill: acked.len(),
        found_after: acked.iter().filter(|id| found.contains(id)).count(),
        kill_to_first_write_s,
    })
}

/// Runs the command.
pub async fn storage_command(args: &StorageArgs) -> anyhow::Result<()> {
    let server = SeaweedFs::start()?;
    let work = tempfile::tempdir()?;
    let ttl = Duration::from_secs_f64(args.lease_ttl);

    let local_dir = work.path().join("local");
    let local = measure(args, &|dir| bench_config(dir), &local_dir, None).await?;

    let remote = server.store("bench")?.lease_ttl(ttl);
    let on_remote = |dir: &Path| bench_config(dir).remote(remote.clone());
    let s3 = measure(
        args,
        &on_remote,
        &work.path().join("s3-cache"),
        Some(&work.path().join("s3-cache-empty")),
    )
    .await?;
    let (put_ms, get_ms) = server_latency(&remote, 300).await?;

    let mut failovers = Vec::new();
    for round in 0..args.failovers {
        let store = server.store(&format!("failover-{round}"))?;
        let dir = work.path().join(format!("failover-{round}"));
        std::fs::create_dir_all(&dir)?;
        failovers.push(failover(args, &store, &dir).await?);
    }

    let server_json = json!({
        "put_1kib_ms_p50": percentile(&put_ms, 50.0),
        "put_1kib_ms_p99": percentile(&put_ms, 99.0),
        "get_1kib_ms_p50": percentile(&get_ms, 50.0),
        "get_1kib_ms_p99": percentile(&get_ms, 99.0),
    });
    let report = json!({
        "memories": args.memories,
        "writes": args.writes,
        "queries": args.queries,
        "lease_ttl_s": args.lease_ttl,
        "server": "SeaweedFS 4.48 (weed mini), loopback",
        "local": local,
        "s3": s3,
        "s3_server": server_json,
        "failovers": failovers,
    });
    let mut md = String::from(
        "| store | import /s | write ack p50 / p99 ms | recall p50 / p99 ms | open to first answer s (empty cache) |\n|---|---:|---:|---:|---:|\n",
    );
    for (name, f) in [
        ("local directory", &local),
        ("S3 (SeaweedFS, loopback)", &s3),
    ] {
        md.push_str(&format!(
            "| {name} | {:.0} | {:.2} / {:.2} | {:.2} / {:.2} | {:.2}{} |\n",
            f.import_per_s,
            f.write_ack_ms_p50,
            f.write_ack_ms_p99,
            f.recall_ms_p50,
            f.recall_ms_p99,
            f.open_s,
            f.open_s_empty_cache
                .map(|s| format!(" ({s:.2})"))
                .unwrap_or_default()
        ));
    }
    md.push_str(&format!(
        "\nThe server alone, 1 KiB objects: PUT p50 / p99 {:.2} / {:.2} ms, GET {:.2} / {:.2} ms.\n\nFailover (lease ttl {} s): ",
        percentile(&put_ms, 50.0),
        percentile(&put_ms, 99.0),
        percentile(&get_ms, 50.0),
        percentile(&get_ms, 99.0),
        args.lease_ttl
    ));
    let rounds: Vec<String> = failovers
        .iter()
        .map(|f| {
            format!(
                "{:.2} s from the kill to the new writer's first write, {} of {} acknowledged writes found",
                f.kill_to_first_write_s, f.found_after, f.acknowledged_before_kill
            )
        })
        .collect();
    md.push_str(&rounds.join("; "));
    md.push_str(".\n");
    write_json(&args.json, &report)?;
    std::fs::write(markdown_path(&args.json), &md)?;
    println!("{md}");
    Ok(())
}
