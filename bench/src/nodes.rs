//! `recall-bench nodes`: `recall serve` processes sharing one `s3://` root
//! (SeaweedFS on loopback), driven over their wire the way a client is:
//!
//! - a new tenant's first call (its node creates the store and takes the
//!   lease), p50/p99;
//! - a write (`remember`) and a recall sent to the tenant's own node and
//!   sent to another node, which forwards it, alternated call by call,
//!   p50/p99 (both include the model embedding the text: this is what a
//!   client waits for);
//! - failover: the tenant's node killed with SIGKILL while a client
//!   writes through another node; the time from the kill to the next
//!   acknowledged write, and the acknowledged writes every survivor reads.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use recall::Remote;
use recall_indexer::s3_server::SeaweedFs;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

use crate::report::{markdown_path, write_json};
use crate::speed::percentile;

/// `recall-bench nodes`.
#[derive(Debug, clap::Args)]
pub struct NodesArgs {
    /// Node processes.
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// New tenants whose first call is timed.
    #[arg(long, default_value_t = 30)]
    pub tenants: usize,
    /// Timed calls of each kind (direct and forwarded, writes and recalls).
    #[arg(long, default_value_t = 200)]
    pub calls: usize,
    /// The nodes' `--lease-ttl` in seconds: failover waits it out.
    #[arg(long, default_value_t = 10.0)]
    pub lease_ttl: f64,
    /// The `recall` binary (default: beside this one).
    #[arg(long)]
    pub recall: Option<PathBuf>,
    /// Where the JSON goes (markdown beside it).
    #[arg(long, default_value = "bench-results/nodes.json")]
    pub json: PathBuf,
}

/// A node process, killed when dropped.
struct Node {
    id: String,
    addr: String,
    child: Child,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_node(bin: &Path, root: &Remote, cache: &Path, id: &str, ttl: f64) -> anyhow::Result<Node> {
    let option = |key: &str| root.get(key).unwrap_or_default().to_string();
    let mut child = Command::new(bin)
        .args(["--data", root.uri(), "--cache"])
        .arg(cache)
        .args(["--bank-mode", "*=direct", "serve", "--node-id", id])
        .args(["--listen", "127.0.0.1:0", "--lease-ttl", &ttl.to_string()])
        .env("AWS_ENDPOINT_URL", option("aws_endpoint"))
        .env("AWS_ALLOW_HTTP", "true")
        .env("AWS_ACCESS_KEY_ID", option("aws_access_key_id"))
        .env("AWS_SECRET_ACCESS_KEY", option("aws_secret_access_key"))
        .env("AWS_REGION", option("aws_region"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    let stdout = child.stdout.take().context("the node's stdout")?;
    let mut first = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut first)?;
    let Some((_, addr)) = first.trim().rsplit_once("listening on ") else {
        bail!("node {id} printed {first:?}");
    };
    Ok(Node {
        id: id.to_string(),
        addr: addr.to_string(),
        child,
    })
}

/// A client connection to one node.
struct Client {
    lines: Lines<BufReader<OwnedReadHalf>>,
    write: OwnedWriteHalf,
}

impl Client {
    async fn connect(addr: &str) -> anyhow::Result<Client> {
        let (read, write) = TcpStream::connect(addr).await?.into_split();
        Ok(Client {
            lines: BufReader::new(read).lines(),
            write,
        })
    }

    async fn ask(&mut self, request: &Value) -> anyhow::Result<Value> {
        let mut line = serde_json::to_vec(request)?;
        line.push(b'\n');
        self.write.write_all(&line).await?;
        let answer = self.lines.next_line().await?.context("the node hung up")?;
        Ok(serde_json::from_str(&answer)?)
    }

    /// Asks until the reply is not `unavailable` (a tenant moving).
    async fn served(&mut self, request: &Value) -> anyhow::Result<Value> {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let reply = self.ask(request).await?;
            if reply["reply"] != "unavailable" {
                return Ok(reply);
            }
            if Instant::now() > deadline {
                bail!("still unavailable: {reply}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn call(tenant: &str, tool: &str, args: Value) -> Value {
    json!({"op": "call", "tenant": tenant, "tool": tool, "args": args, "write_bank": "notes"})
}

fn remember(tenant: &str, i: usize) -> Value {
    const WHAT: [&str; 7] = [
        "the billing API",
        "our search cluster",
        "the payments queue",
        "the ingest workers",
        "identity tokens",
        "the nightly backup",
        "mobile push",
    ];
    const HOW: [&str; 6] = [
        "must be restarted after",
        "slows down during",
        "was migrated before",
        "fails whenever there is",
        "is frozen during",
        "pages on-call during",
    ];
    const WHEN: [&str; 5] = [
        "a schema change",
        "the audit",
        "a certificate rotation",
        "peak traffic",
        "a region failover",
    ];
    let text = format!(
        "{} {} {} (change {i}, {})",
        WHAT[i % 7],
        HOW[i % 6],
        WHEN[i % 5],
        uuid::Uuid::now_v7().simple()
    );
    call(tenant, "remember", json!({"content": text, "kind": "fact"}))
}

fn ok_id(reply: &Value) -> anyhow::Result<String> {
    if reply["reply"] != "ok" {
        bail!("not served: {reply}");
    }
    Ok(reply["output"]["structured"]["id"]
        .as_str()
        .context("no id")?
        .to_string())
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

fn spread(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    (percentile(&v, 50.0), percentile(&v, 99.0))
}

/// Runs the command.
pub async fn nodes_command(args: &NodesArgs) -> anyhow::Result<()> {
    if args.nodes < 2 {
        bail!("--nodes takes at least 2 (a call is forwarded to another node)");
    }
    let bin = match &args.recall {
        Some(bin) => bin.clone(),
        None => std::env::current_exe()?
            .parent()
            .context("the bench's directory")?
            .join("recall"),
    };
    let server = SeaweedFs::start()?;
    let root = server.store("fleet")?;
    let work = tempfile::tempdir()?;
    let mut nodes: Vec<Option<Node>> = Vec::new();
    for i in 0..args.nodes {
        let id = format!("n{}", i + 1);
        nodes.push(Some(start_node(
            &bin,
            &root,
            work.path(),
            &id,
            args.lease_ttl,
        )?));
    }
    let addrs: Vec<String> = nodes.iter().flatten().map(|n| n.addr.clone()).collect();
    for addr in &addrs {
        let mut client = Client::connect(addr).await?;
        let deadline = Instant::now() + Duration::from_secs(60);
        while client.ask(&json!({"op": "status"})).await?["members"]
            .as_array()
            .map(Vec::len)
            != Some(args.nodes)
        {
            if Instant::now() > deadline {
                bail!("the nodes did not see each other");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    // A new tenant's first call, through the first node (forwarded when
    // the tenant is placed elsewhere, as a client would see it).
    let mut entry = Client::connect(&addrs[0]).await?;
    let mut cold = Vec::new();
    for t in 0..args.tenants {
        let t0 = Instant::now();
        ok_id(&entry.served(&remember(&format!("cold-{t}"), t)).await?)?;
        cold.push(ms(t0));
    }

    // One tenant, called at its node and through another, alternately.
    let tenant = "hot";
    let first = entry.served(&remember(tenant, 0)).await?;
    ok_id(&first)?;
    let owner = first["node"].as_str().context("no node")?.to_string();
    let owner_at = nodes
        .iter()
        .flatten()
        .position(|n| n.id == owner)
        .context("the owner")?;
    let other_at = (owner_at + 1) % args.nodes;
    let mut direct = Client::connect(&addrs[owner_at]).await?;
    let mut forwarded = Client::connect(&addrs[other_at]).await?;
    let (mut write_direct, mut write_forwarded) = (Vec::new(), Vec::new());
    let (mut recall_direct, mut recall_forwarded) = (Vec::new(), Vec::new());
    let mut acked = Vec::new();
    for i in 0..args.calls {
        // Which goes first alternates: a recall right after a write pays
        // for the BM25 index's commit of that write.
        let mut writes = [
            (&mut direct, &mut write_direct),
            (&mut forwarded, &mut write_forwarded),
        ];
        if i % 2 == 1 {
            writes.reverse();
        }
        for (client, times) in writes {
            let t0 = Instant::now();
            let reply = client.served(&remember(tenant, 1 + i)).await?;
            times.push(ms(t0));
            acked.push(ok_id(&reply)?);
        }
        let query = call(
            tenant,
            "recall",
            json!({"query": format!("what happens to the payments queue during change {i}?")}),
        );
        let mut recalls = [
            (&mut direct, &mut recall_direct),
            (&mut forwarded, &mut recall_forwarded),
        ];
        if i % 2 == 1 {
            recalls.reverse();
        }
        for (client, times) in recalls {
            let t0 = Instant::now();
            let reply = client.served(&query).await?;
            times.push(ms(t0));
            if reply["reply"] != "ok" {
                bail!("recall not served: {reply}");
            }
        }
    }

    // Failover: kill the tenant's node; write on through another.
    let mut victim = nodes[owner_at].take().context("the owner")?;
    victim.child.kill()?;
    let killed = Instant::now();
    victim.child.wait()?;
    let mut survivor = Client::connect(&addrs[other_at]).await?;
    let reply = survivor.served(&remember(tenant, 100_000)).await?;
    let kill_to_first_write_s = killed.elapsed().as_secs_f64();
    acked.push(ok_id(&reply)?);
    let new_owner = reply["node"].as_str().unwrap_or_default().to_string();
    let mut found_everywhere = 0;
    let survivors: Vec<String> = nodes.iter().flatten().map(|n| n.addr.clone()).collect();
    let mut readers = Vec::new();
    for addr in &survivors {
        readers.push(Client::connect(addr).await?);
    }
    for id in &acked {
        let mut everywhere = true;
        for reader in &mut readers {
            let got = reader
                .served(&call(tenant, "get", json!({"id": id})))
                .await?;
            everywhere &= got["reply"] == "ok";
        }
        found_everywhere += usize::from(everywhere);
    }

    let cold = spread(cold);
    let wd = spread(write_direct);
    let wf = spread(write_forwarded);
    let rd = spread(recall_direct);
    let rf = spread(recall_forwarded);
    let report = json!({
        "nodes": args.nodes,
        "tenants": args.tenants,
        "calls": args.calls,
        "lease_ttl_s": args.lease_ttl,
        "server": "SeaweedFS 4.48 (weed mini), loopback",
        "first_call_new_tenant_ms_p50": cold.0,
        "first_call_new_tenant_ms_p99": cold.1,
        "write_direct_ms_p50": wd.0,
        "write_direct_ms_p99": wd.1,
        "write_forwarded_ms_p50": wf.0,
        "write_forwarded_ms_p99": wf.1,
        "recall_direct_ms_p50": rd.0,
        "recall_direct_ms_p99": rd.1,
        "recall_forwarded_ms_p50": rf.0,
        "recall_forwarded_ms_p99": rf.1,
        "failover": {
            "killed": owner,
            "new_node": new_owner,
            "kill_to_first_write_s": kill_to_first_write_s,
            "acknowledged": acked.len(),
            "found_on_every_survivor": found_everywhere,
        },
    });
    let md = format!(
        "{} nodes, SeaweedFS on loopback, lease ttl {} s; times are a client's, model included.\n\n\
         | call | p50 ms | p99 ms |\n|---|---:|---:|\n\
         | first call of a new tenant ({} tenants) | {:.1} | {:.1} |\n\
         | remember at the tenant's node | {:.2} | {:.2} |\n\
         | remember through another node | {:.2} | {:.2} |\n\
         | recall at the tenant's node | {:.2} | {:.2} |\n\
         | recall through another node | {:.2} | {:.2} |\n\n\
         Failover: node {owner} killed (SIGKILL); the next write through another node was acknowledged \
         {kill_to_first_write_s:.2} s later, by {new_owner}; {found_everywhere} of {} acknowledged writes \
         read on every surviving node.\n",
        args.nodes,
        args.lease_ttl,
        args.tenants,
        cold.0,
        cold.1,
        wd.0,
        wd.1,
        wf.0,
        wf.1,
        rd.0,
        rd.1,
        rf.0,
        rf.1,
        acked.len(),
    );
    write_json(&args.json, &report)?;
    std::fs::write(markdown_path(&args.json), &md)?;
    println!("{md}");
    Ok(())
}
