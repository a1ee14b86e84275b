//! `recall serve` nodes sharing one `s3://` root on SeaweedFS, as separate
//! processes speaking the nodes' wire (one JSON object per line over TCP):
//! tenants spread over the live nodes and every node reads every write;
//! a node killed with SIGKILL loses nothing acknowledged and its tenants
//! move; two nodes that both claim a tenant leave one writer.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use recall::Remote;
use recall_indexer::s3_server::SeaweedFs;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// Membership and tenant leases in these tests: a dead node's tenants move
/// after about 1.2 × this.
const TTL_S: &str = "2";

/// A `recall serve` process, killed when dropped.
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

/// Starts a node on a free loopback port and returns once it serves.
fn node(weed: &SeaweedFs, root: &Remote, cache: &Path, id: &str, extra: &[&str]) -> Node {
    let models = Path::new(env!("CARGO_MANIFEST_DIR")).join("../models");
    let mut child = Command::new(env!("CARGO_BIN_EXE_recall"))
        .args(["--data", root.uri(), "--cache"])
        .arg(cache)
        .args(["--bank-mode", "*=direct", "serve", "--node-id", id])
        .args(["--listen", "127.0.0.1:0", "--lease-ttl", TTL_S])
        .args(extra)
        .env("AWS_ENDPOINT_URL", format!("http://{}", weed.endpoint()))
        .env("AWS_ALLOW_HTTP", "true")
        .env("AWS_ACCESS_KEY_ID", "recall")
        .env("AWS_SECRET_ACCESS_KEY", "recall-test")
        .env("RECALL_MODEL_DIR", models)
        .env_remove("AWS_REGION")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut first = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut first).unwrap();
    let addr = first
        .trim()
        .rsplit_once("listening on ")
        .map(|(_, addr)| addr.to_string())
        .unwrap_or_else(|| panic!("node {id} printed {first:?}"));
    Node {
        id: id.to_string(),
        addr,
        child,
    }
}

/// One request on a connection of its own.
async fn ask(addr: &str, request: &Value) -> Value {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let mut line = serde_json::to_vec(request).unwrap();
    line.push(b'\n');
    stream.write_all(&line).await.unwrap();
    let mut lines = BufReader::new(stream).lines();
    let answer = lines.next_line().await.unwrap().unwrap();
    serde_json::from_str(&answer).unwrap()
}

fn call(tenant: &str, tool: &str, args: Value) -> Value {
    json!({"op": "call", "tenant": tenant, "tool": tool, "args": args, "write_bank": "notes"})
}

/// Sends `request` until it is answered rather than found unavailable
/// (a tenant moving, a node gone); gives up after a minute.
async fn until_served(addr: &str, request: &Value) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let reply = ask(addr, request).await;
        if reply["reply"] != "unavailable" {
            return reply;
        }
        assert!(Instant::now() < deadline, "still unavailable: {reply}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Remembers `text` for `tenant` through the node at `addr`: the memory's
/// id and the node that wrote it.
async fn remember(addr: &str, tenant: &str, text: &str) -> (String, String) {
    let reply = until_served(
        addr,
        &call(tenant, "remember", json!({"content": text, "kind": "fact"})),
    )
    .await;
    assert_eq!(reply["reply"], "ok", "{reply}");
    assert_eq!(
        reply["output"]["structured"]["outcome"], "stored",
        "{reply}"
    );
    let id = reply["output"]["structured"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no id in {reply}"))
        .to_string();
    (id, reply["node"].as_str().unwrap().to_string())
}

/// The content of memory `id` as the node at `addr` serves it.
async fn content(addr: &str, tenant: &str, id: &str) -> Option<String> {
    let reply = until_served(addr, &call(tenant, "get", json!({"id": id}))).await;
    match reply["reply"].as_str() {
        Some("ok") => reply["output"]["structured"]["content"]
            .as_str()
            .map(str::to_string),
        _ => {
            assert_eq!(reply["error"]["kind"], "not_found", "{reply}");
            None
        }
    }
}

/// Waits until every node sees `n` live nodes.
async fn converged(nodes: &[&Node], n: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    for node in nodes {
        loop {
            let status = ask(&node.addr, &json!({"op": "status"})).await;
            if status["members"].as_array().map(Vec::len) == Some(n) {
                break;
            }
            assert!(Instant::now() < deadline, "{} sees {status}", node.id);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Memory `i` of a tenant: three parts from lists of coprime lengths, so
/// no two of the first 42 share more than one part (far apart enough that
/// the write path stores each instead of deduplicating it).
fn fact(tenant: usize, i: usize) -> String {
    const WHAT: [&str; 7] = [
        "the billing API",
        "our search cluster",
        "the payments queue",
        "the ingest workers",
        "identity tokens",
        "the nightly backup",
        "mobile push notifications",
    ];
    const HOW: [&str; 6] = [
        "must be restarted after",
        "slows down during",
        "was migrated before",
        "fails whenever there is",
        "is frozen during",
        "pages the on-call engineer during",
    ];
    const WHEN: [&str; 5] = [
        "a schema change",
        "the quarterly audit",
        "a certificate rotation",
        "Black Friday traffic",
        "a region failover",
    ];
    format!(
        "For tenant {tenant}, {} {} {} (note {i}).",
        WHAT[i % 7],
        HOW[i % 6],
        WHEN[i % 5]
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_spread_fifty_tenants_and_every_node_reads_every_write() {
    let weed = SeaweedFs::start().unwrap();
    let root = weed.store("fleet").unwrap();
    let cache = tempfile::tempdir().unwrap();
    let nodes: Vec<Node> = ["n1", "n2", "n3"]
        .iter()
        .map(|id| node(&weed, &root, cache.path(), id, &[]))
        .collect();
    converged(&nodes.iter().collect::<Vec<_>>(), 3).await;

    // One write per tenant, each through the next node, eight at a time.
    let mut written: Vec<(String, String, String, String)> = Vec::new(); // tenant, id, text, writer
    for chunk in (0..50).collect::<Vec<usize>>().chunks(8) {
        let tasks: Vec<_> = chunk
            .iter()
            .map(|&t| {
                let addr = nodes[t % 3].addr.clone();
                tokio::spawn(async move {
                    let tenant = format!("team-{t}");
                    let text = fact(t, 0);
                    let (id, by) = remember(&addr, &tenant, &text).await;
                    (tenant, id, text, by)
                })
            })
            .collect();
        for task in tasks {
            written.push(task.await.unwrap());
        }
    }
    // Placement spread the tenants over all three nodes, and each tenant
    // is open on the one node that wrote it.
    let writers: HashMap<&str, usize> = written.iter().fold(HashMap::new(), |mut n, w| {
        *n.entry(w.3.as_str()).or_default() += 1;
        n
    });
    assert_eq!(writers.len(), 3, "writers: {writers:?}");
    let mut open: HashMap<String, String> = HashMap::new();
    for node in &nodes {
        let status = ask(&node.addr, &json!({"op": "status"})).await;
        for tenant in status["open"].as_array().unwrap() {
            let tenant = tenant.as_str().unwrap().to_string();
            let before = open.insert(tenant.clone(), node.id.clone());
            assert!(before.is_none(), "{tenant} is open on two nodes");
        }
    }
    for (tenant, _, _, by) in &written {
        assert_eq!(open.get(tenant), Some(by), "{tenant}");
    }
    // Every node reads every write (forwarded to the tenant's writer: no
    // staleness), and a tenant's id read as another tenant is not found.
    for (tenant, id, text, _) in &written {
        for node in &nodes {
            assert_eq!(
                content(&node.addr, tenant, id).await.as_deref(),
                Some(text.as_str()),
                "{tenant} {id} through {}",
                node.id
            );
        }
    }
    let (_, id0, _, _) = &written[0];
    assert_eq!(content(&nodes[1].addr, "team-1", id0).await, None);
    // Recall through a node that does not hold the tenant.
    let (tenant, id, _, by) = &written[7];
    let other = nodes.iter().find(|n| &n.id != by).unwrap();
    let reply = until_served(
        &other.addr,
        &call(
            tenant,
            "recall",
            json!({"query": "What happens to the billing API during a schema change?"}),
        ),
    )
    .await;
    assert_eq!(reply["node"], by.as_str(), "run by the tenant's node");
    assert_eq!(
        reply["output"]["structured"]["hits"][0]["id"].as_str(),
        Some(id.as_str()),
        "{reply}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_mid_stream_loses_nothing_acknowledged_and_its_tenant_moves() {
    let weed = SeaweedFs::start().unwrap();
    let root = weed.store("fleet").unwrap();
    let cache = tempfile::tempdir().unwrap();
    let mut nodes: Vec<Option<Node>> = ["n1", "n2", "n3"]
        .iter()
        .map(|id| Some(node(&weed, &root, cache.path(), id, &[])))
        .collect();
    converged(&nodes.iter().flatten().collect::<Vec<_>>(), 3).await;
    let tenant = "acme";
    let entry = nodes[0].as_ref().unwrap().addr.clone();
    let mut acked: Vec<(String, String)> = Vec::new();
    let mut owner = String::new();
    for i in 0..20 {
        let text = fact(1, i);
        let (id, by) = remember(&entry, tenant, &text).await;
        owner = by;
        acked.push((id, text));
    }
    let before = acked.len();
    // Kill the tenant's writer; write on through a node that survives.
    let dead = nodes
        .iter()
        .position(|n| n.as_ref().is_some_and(|n| n.id == owner))
        .unwrap();
    let mut victim = nodes[dead].take().unwrap();
    victim.child.kill().unwrap();
    victim.child.wait().unwrap();
    let killed = Instant::now();
    let survivors: Vec<Node> = nodes.into_iter().flatten().collect();
    let mut failover = None;
    let mut new_owner = String::new();
    for i in 20..40 {
        let text = fact(1, i);
        let (id, by) = remember(&survivors[i % 2].addr, tenant, &text).await;
        failover.get_or_insert(killed.elapsed());
        new_owner = by;
        acked.push((id, text));
    }
    assert_ne!(new_owner, owner, "the tenant moved off the killed node");
    println!(
        "failover: {before} acknowledged before SIGKILL, {} after; first write after the kill acknowledged in {:?}",
        acked.len() - before,
        failover.unwrap()
    );
    let mut found = 0;
    for (id, text) in &acked {
        for node in &survivors {
            assert_eq!(
                content(&node.addr, tenant, id).await.as_deref(),
                Some(text.as_str()),
                "{id} through {}",
                node.id
            );
        }
        found += 1;
    }
    assert_eq!(found, 40);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_claiming_one_tenant_leave_one_writer_and_lose_no_update() {
    let weed = SeaweedFs::start().unwrap();
    let root = weed.store("fleet").unwrap();
    let cache = tempfile::tempdir().unwrap();
    // Both place every tenant on themselves: as two nodes whose views of
    // the live nodes disagree.
    let a = node(&weed, &root, cache.path(), "a", &["--claim-all"]);
    let b = node(&weed, &root, cache.path(), "b", &["--claim-all"]);
    converged(&[&a, &b], 2).await;
    let tasks: Vec<_> = (0..24)
        .map(|i| {
            let addr = if i % 2 == 0 {
                a.addr.clone()
            } else {
                b.addr.clone()
            };
            tokio::spawn(async move {
                let text = fact(2, i);
                let (id, by) = remember(&addr, "acme", &text).await;
                (id, text, by)
            })
        })
        .collect();
    let mut acked = Vec::new();
    for task in tasks {
        acked.push(task.await.unwrap());
    }
    let writers: HashSet<&str> = acked.iter().map(|(_, _, by)| by.as_str()).collect();
    assert_eq!(writers.len(), 1, "one node wrote every update: {writers:?}");
    for (id, text, _) in &acked {
        for node in [&a, &b] {
            assert_eq!(
                content(&node.addr, "acme", id).await.as_deref(),
                Some(text.as_str())
            );
        }
    }
    let ids: HashSet<&str> = acked.iter().map(|(id, _, _)| id.as_str()).collect();
    assert_eq!(ids.len(), 24, "24 distinct memories");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_tenant_is_closed_and_opened_again_by_its_next_call() {
    let weed = SeaweedFs::start().unwrap();
    let root = weed.store("fleet").unwrap();
    let cache = tempfile::tempdir().unwrap();
    let solo = node(&weed, &root, cache.path(), "solo", &["--idle-close", "1"]);
    let text = fact(3, 0);
    let (id, _) = remember(&solo.addr, "acme", &text).await;
    let open = |status: &Value| status["open"].as_array().map(Vec::len).unwrap_or(0);
    assert_eq!(open(&ask(&solo.addr, &json!({"op": "status"})).await), 1);
    let deadline = Instant::now() + Duration::from_secs(10);
    while open(&ask(&solo.addr, &json!({"op": "status"})).await) != 0 {
        assert!(Instant::now() < deadline, "the idle tenant was not closed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        content(&solo.addr, "acme", &id).await.as_deref(),
        Some(text.as_str())
    );
    assert_eq!(open(&ask(&solo.addr, &json!({"op": "status"})).await), 1);
}

/// Settings a node cannot run with are refused before it binds or joins.
#[test]
fn serve_refuses_what_it_cannot_run_with_before_it_starts() {
    let dir = tempfile::tempdir().unwrap();
    let serve = |data: &str, extra: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_recall"))
            .args(["--data", data, "--cache"])
            .arg(dir.path())
            .args(["serve", "--node-id"])
            .args(extra)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{data} {extra:?} was accepted");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let local = dir.path().join("data");
    let local = local.to_str().unwrap();
    assert!(serve(local, &["n1"]).contains("needs a store on object storage"));
    assert!(serve("s3://b/root", &["a b"]).contains("invalid node id"));
    assert!(
        serve("s3://b/root", &["n1", "--listen", "0.0.0.0:0"]).contains("not a loopback address")
    );
    assert!(serve("s3://b/root", &["n1", "--lease-ttl", "0"]).contains("--lease-ttl"));
    assert!(serve("s3://b/root", &["n1", "--idle-close", "0"]).contains("--idle-close"));
    assert!(!dir.path().join("nodes").exists(), "nothing was created");
}
