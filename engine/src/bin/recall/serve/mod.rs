//! `recall serve`: one node of a fleet sharing an `s3://` root. Each tenant
//! has its own store under `ROOT/tenants/<tenant>` and is placed on one live
//! node by rendezvous hashing (`placement.rs`; membership: objects under
//! `ROOT/nodes/`, `recall::Members`). A node runs a tenant's calls when the
//! tenant is placed on it (taking the store's writer lease) and forwards
//! them otherwise, so every read goes to the tenant's one writer and sees
//! every write acknowledged before it. When the live nodes change, a node
//! closes the tenants placed elsewhere now, releasing their leases; a node
//! that dies holds its tenants until their leases expire (1.2 × ttl), then
//! their new node takes them over and replays their log objects.
//!
//! The fence is the tenant's lease, never membership: two nodes that
//! disagree about who is alive both try to open the store, one gets the
//! lease, and the other forwards to the node the lease names.

mod placement;
mod tenants;
mod wire;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use recall::{Member, Members, ModelSource, ProposalPolicy};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

use crate::mcp::tools::{ToolError, ToolErrorKind};
use tenants::{NotOpened, Ran, Tenants};
use wire::{Call, Reply, Request};

/// How many times a call may be forwarded: once to the tenant's node, once
/// more to the node holding its lease while placement moves. A third hop
/// means the nodes disagree for now; the caller is told to repeat.
const MAX_HOPS: u8 = 2;

/// `recall serve` arguments (with `--data s3://...` and `--cache DIR`).
#[derive(clap::Args)]
pub struct ServeArgs {
    /// This node's id, unique among the nodes sharing the root
    /// (1 to 64 characters of A-Z a-z 0-9 . _ -).
    #[arg(long, env = "RECALL_NODE_ID")]
    node_id: String,
    /// Where to serve requests; port 0 takes a free port. The address is
    /// printed on the first line of stdout.
    #[arg(long, default_value = "127.0.0.1:7700")]
    listen: SocketAddr,
    /// Allow a non-loopback --listen (there is no authentication: nodes and
    /// their clients must be on a trusted network).
    #[arg(long)]
    allow_remote: bool,
    /// Seconds a node's membership and its tenants' writer leases last
    /// unless renewed (renewed every quarter of it). A dead node's tenants
    /// move after 1.2 × this.
    #[arg(long, default_value_t = 10.0)]
    lease_ttl: f64,
    /// Seconds after its last call that a tenant is closed (its lease
    /// released, its memory freed); the next call opens it again.
    #[arg(long, default_value_t = 600.0)]
    idle_close: f64,
    /// Treat every tenant as placed on this node (a test's way to make two
    /// nodes disagree about placement).
    #[arg(long, hide = true)]
    claim_all: bool,
}

/// Runs a node until SIGTERM or SIGINT, then closes its tenants (releasing
/// their leases) and leaves the membership.
pub async fn run(
    location: crate::location::Location,
    args: ServeArgs,
    bank_modes: &[String],
) -> anyhow::Result<()> {
    let Some(remote) = location.remote else {
        bail!(
            "recall serve needs a store on object storage: --data s3://bucket/prefix (nodes share it)"
        );
    };
    recall::validate_node_id(&args.node_id)?;
    if !args.listen.ip().is_loopback() && !args.allow_remote {
        bail!(
            "--listen {} is not a loopback address; nodes have no authentication, so they bind 127.0.0.1 or ::1 unless --allow-remote is given",
            args.listen
        );
    }
    if !(args.lease_ttl.is_finite() && args.lease_ttl >= 0.5) {
        bail!("--lease-ttl takes seconds, at least 0.5");
    }
    let ttl = Duration::from_secs_f64(args.lease_ttl);
    if !(args.idle_close.is_finite() && args.idle_close > 0.0) {
        bail!("--idle-close takes seconds, more than 0");
    }
    let idle_close = Duration::from_secs_f64(args.idle_close);
    let mut proposals = ProposalPolicy::default();
    for rule in bank_modes {
        proposals = proposals.parse_rule(rule)?;
    }
    let root = remote.lease_ttl(ttl).node(args.node_id.clone());
    let cache: PathBuf = location.dir.join("nodes").join(&args.node_id);
    let listener = TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    let addr = listener.local_addr().context("the listening address")?;
    let members = Members::join(&root, &args.node_id, &addr.to_string())
        .await
        .with_context(|| format!("joining the nodes under {}", root.uri()))?;
    let node = Arc::new(Node {
        tenants: Tenants::new(root, cache, shared_model()?, proposals),
        members,
        claim_all: args.claim_all,
        idle_close,
    });
    println!("recall serve: node {} listening on {addr}", args.node_id);
    use std::io::Write as _;
    let _ = std::io::stdout().flush();

    let moving = tokio::spawn(move_tenants(Arc::clone(&node)));
    let signal = loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let node = Arc::clone(&node);
                    tokio::spawn(async move {
                        if let Err(e) = node.serve(stream).await {
                            tracing::debug!("a connection ended: {e:#}");
                        }
                    });
                }
                Err(e) => {
                    tracing::warn!("accepting on {addr}: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            signal = crate::mcp::terminated() => break signal,
        }
    };
    tracing::info!("{signal}: closing this node's tenants and leaving");
    moving.abort();
    drop(listener);
    node.tenants.close_all().await;
    node.members.leave().await?;
    Ok(())
}

/// The model, loaded once for every tenant this node opens.
fn shared_model() -> anyhow::Result<ModelSource> {
    match recall::find_model_dir()? {
        Some(dir) => Ok(ModelSource::Custom(Arc::new(
            recall::FastEmbedder::from_dir(&dir)?,
        ))),
        None => {
            tracing::warn!(
                looked_in = ?recall::default_model_dirs(),
                "no embedding model found (run scripts/setup.sh); recall is lexical-only"
            );
            Ok(ModelSource::None)
        }
    }
}

/// Closes the tenants placed elsewhere whenever the live nodes change,
/// and the tenants idle for `--idle-close`.
async fn move_tenants(node: Arc<Node>) {
    let mut changes = node.members.watch();
    let mut ticks = tokio::time::interval(
        (node.idle_close / 4).clamp(Duration::from_millis(100), Duration::from_secs(30)),
    );
    loop {
        tokio::select! {
            changed = changes.changed() => {
                if changed.is_err() {
                    return;
                }
                node.release_moved().await;
            }
            _ = ticks.tick() => {
                for tenant in node.tenants.idle(node.idle_close) {
                    tracing::info!(tenant, "closing an idle tenant");
                    node.tenants.close(&tenant).await;
                }
            }
        }
    }
}

struct Node {
    members: Members,
    tenants: Tenants,
    claim_all: bool,
    idle_close: Duration,
}

impl Node {
    fn me(&self) -> &str {
        &self.members.me().node
    }

    /// Answers one connection's requests, one line each, in order.
    async fn serve(&self, stream: TcpStream) -> anyhow::Result<()> {
        let (read, mut write) = stream.into_split();
        let mut lines = BufReader::new(read).lines();
        while let Some(line) = lines.next_line().await? {
            let reply = match serde_json::from_str::<Request>(&line) {
                Ok(request) => self.handle(request).await,
                Err(e) => Reply::Error {
                    node: self.me().to_string(),
                    error: ToolError::new(
                        ToolErrorKind::InvalidArguments,
                        format!("malformed request: {e}"),
                    ),
                },
            };
            let mut out = serde_json::to_vec(&reply)?;
            out.push(b'\n');
            write.write_all(&out).await?;
        }
        Ok(())
    }

    async fn handle(&self, request: Request) -> Reply {
        match request {
            Request::Status => Reply::Status {
                node: self.me().to_string(),
                members: self.members.live(),
                open: self.tenants.open(),
            },
            Request::Call(call) => self.call(*call).await,
        }
    }

    fn reply(&self, ran: Ran) -> Reply {
        let node = self.me().to_string();
        match ran {
            Ok(output) => Reply::Ok { node, output },
            // The engine lost its lease (another node took the tenant over).
            Err(error) if error.kind == ToolErrorKind::Unavailable => Reply::Unavailable {
                node,
                reason: error.message,
                sent: true,
            },
            Err(error) => Reply::Error { node, error },
        }
    }

    fn unavailable(&self, reason: String, sent: bool) -> Reply {
        Reply::Unavailable {
            node: self.me().to_string(),
            reason,
            sent,
        }
    }

    /// Runs `call` here if its tenant is open here or placed here, else
    /// forwards it to the node it is placed on (or that holds its lease).
    async fn call(&self, call: Call) -> Reply {
        if let Err(e) = recall::validate_scope_name("tenant", &call.tenant) {
            return Reply::Error {
                node: self.me().to_string(),
                error: ToolError::from(e),
            };
        }
        if let Some(ran) = self.tenants.run_if_open(&call).await {
            return self.reply(ran);
        }
        let live = self.members.live();
        let placed = if self.claim_all {
            None
        } else {
            placement::owner(&call.tenant, &live).filter(|m| m.node != self.me())
        };
        if let Some(owner) = placed {
            return self.forward(owner, call).await;
        }
        // Placed here. A live node that still holds the lease (it has not
        // seen the change yet, or disagrees) gets the call; a dead one's
        // lease is waited out.
        match self.tenants.open_and_run(&call, Some(Duration::ZERO)).await {
            Ok(ran) => self.reply(ran),
            Err(NotOpened::Held {
                node: Some(holder), ..
            }) if holder != self.me() && live.iter().any(|m| m.node == holder) => {
                let Some(member) = live.iter().find(|m| m.node == holder) else {
                    return self.unavailable(format!("node {holder} left"), false);
                };
                self.forward(member, call).await
            }
            Err(NotOpened::Held { .. }) => match self.tenants.open_and_run(&call, None).await {
                Ok(ran) => self.reply(ran),
                Err(NotOpened::Held { why, .. }) => self.unavailable(why, false),
                Err(NotOpened::Failed(why)) => self.failed(why),
            },
            Err(NotOpened::Failed(why)) => self.failed(why),
        }
    }

    fn failed(&self, why: String) -> Reply {
        Reply::Error {
            node: self.me().to_string(),
            error: ToolError::new(ToolErrorKind::Failed, why),
        }
    }

    async fn forward(&self, to: &Member, mut call: Call) -> Reply {
        if call.hops >= MAX_HOPS {
            return self.unavailable(
                format!(
                    "tenant {} is moving between nodes; repeat the call",
                    call.tenant
                ),
                false,
            );
        }
        call.hops += 1;
        match wire::ask(&to.addr, &Request::Call(Box::new(call))).await {
            Ok(reply) => reply,
            Err(lost) => {
                // Look again now: the node may be gone.
                if let Err(e) = self.members.refresh().await {
                    tracing::warn!(error = %e, "listing the live nodes");
                }
                self.unavailable(
                    format!("node {} ({}): {}", to.node, to.addr, lost.reason),
                    lost.sent,
                )
            }
        }
    }

    /// Closes every open tenant that is now placed on another node.
    async fn release_moved(&self) {
        if self.claim_all {
            return;
        }
        let live = self.members.live();
        for tenant in self.tenants.open() {
            if placement::owner(&tenant, &live).is_some_and(|m| m.node != self.me()) {
                self.tenants.close(&tenant).await;
            }
        }
    }
}
