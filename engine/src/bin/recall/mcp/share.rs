//! Many `recall mcp` processes, one store. The store admits one process (its
//! `LOCK`), and each agent window starts its own server, so the first to open
//! the store *owns* it and serves the others over a Unix socket in the data
//! directory (`mcp.sock`, mode 0600); later ones *forward* every tool call to
//! it. When the owner goes away, the next call of a forwarder finds the socket
//! gone, and the forwarders elect a new owner the same way: whoever opens the
//! store first. An owner whose own client leaves (or that is told to stop)
//! hands over: it finishes the calls in flight, answers each forwarder's next
//! request with "moved" (so the forwarder knows it was not applied and
//! repeats it at the new owner), and releases the store. Acknowledged writes
//! are durable in the store before the owner answers, so a change of owner,
//! even by `kill -9`, loses nothing acknowledged.
//!
//! The wire: one JSON object per line. A forwarder first sends its [`Policy`]
//! (each window may be configured for its own tenant and banks; the socket is
//! as private as the data directory), then [`Request`]s, each answered by one
//! [`Reply`] in order.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use recall::{Config, Engine, IndexerError};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use super::tools::{self, Output, Policy, ToolError};

/// How long a starting server waits for the store or its owner: an owner
/// that is still loading the model holds the lock without serving yet.
const ELECTION_TIMEOUT: Duration = Duration::from_secs(120);
/// How often a server waiting for the store looks for an owner's socket.
const PROBE_EVERY: Duration = Duration::from_millis(100);

/// The socket of the process that owns the store in `data`.
pub fn socket_path(data: &Path) -> PathBuf {
    data.join("mcp.sock")
}

/// One forwarded tool call.
#[derive(Debug, Serialize, Deserialize)]
struct Request {
    session: String,
    tool: String,
    args: Map<String, Value>,
}

/// The owner's answer to a [`Request`] (or to the opening [`Policy`]).
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Reply {
    Ok(Output),
    Err(ToolError),
    /// The owner is handing the store over and did not run the request.
    Moved,
}

/// What a starting server became.
pub enum Role {
    /// It opened the store and serves it to the others.
    Owner(Engine, Arc<Hub>),
    /// Another process owns the store; calls go there.
    Forwarder(Remote),
}

/// The proposal rules this process opens a store with (`--bank-mode`),
/// set once by [`super::run`]; when several processes share a store, the
/// owner's rules decide.
pub static PROPOSALS: std::sync::OnceLock<recall::ProposalPolicy> = std::sync::OnceLock::new();

/// Where the store's tables and log live when `data` is the cache of an
/// `s3://` store (`--data s3://...`), set once by [`super::run`].
pub static STORAGE: std::sync::OnceLock<Option<recall::Remote>> = std::sync::OnceLock::new();

/// Finds the owner of the store in `data` or becomes it.
pub async fn elect(data: &Path, policy: &Policy) -> anyhow::Result<Role> {
    let path = socket_path(data);
    let deadline = Instant::now() + ELECTION_TIMEOUT;
    loop {
        if let Some(remote) = Remote::connect(&path, policy).await? {
            tracing::info!(socket = %path.display(), "forwarding to the store's owner");
            return Ok(Role::Forwarder(remote));
        }
        let returning = crate::returning_freed_pages();
        let proposals = PROPOSALS.get().cloned().unwrap_or_default();
        let mut config = Config::new(data).proposals(proposals);
        if let Some(Some(remote)) = STORAGE.get() {
            config = config.remote(remote.clone());
        }
        let open = Engine::open(config);
        tokio::pin!(open);
        // While this process waits for the lock, an owner that is still
        // starting may begin to serve: stop waiting then.
        let opened = loop {
            tokio::select! {
                opened = &mut open => break Some(opened),
                () = tokio::time::sleep(PROBE_EVERY) => {
                    if UnixStream::connect(&path).await.is_ok() {
                        break None;
                    }
                }
            }
        };
        drop(returning);
        match opened {
            None => continue,
            Some(Ok(engine)) => {
                let hub = Hub::start(engine.clone(), &path)?;
                tracing::info!(socket = %path.display(), "serving the store to other recall mcp processes");
                return Ok(Role::Owner(engine, hub));
            }
            Some(Err(recall::Error::Storage(IndexerError::Locked { .. }))) => {
                if Instant::now() > deadline {
                    bail!(
                        "the store in {} is locked by a process that does not serve it (another recall command?); gave up after {}s",
                        data.display(),
                        ELECTION_TIMEOUT.as_secs()
                    );
                }
            }
            Some(Err(e)) => {
                return Err(e).with_context(|| format!("opening {}", data.display()));
            }
        }
    }
}

/// The owner's side: accepts forwarders and runs their calls.
pub struct Hub {
    path: PathBuf,
    live: AtomicUsize,
    idle: Notify,
    closing: watch::Sender<bool>,
    accepting: std::sync::Mutex<Option<JoinHandle<()>>>,
}

impl Hub {
    /// Binds the socket (any file there is stale: this process holds the
    /// store's lock) and serves it in the background.
    fn start(engine: Engine, path: &Path) -> anyhow::Result<Arc<Hub>> {
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("removing {}", path.display())),
        }
        let listener =
            UnixListener::bind(path).with_context(|| format!("binding {}", path.display()))?;
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
                .with_context(|| format!("restricting {}", path.display()))?;
        }
        let (closing, _) = watch::channel(false);
        let hub = Arc::new(Hub {
            path: path.to_path_buf(),
            live: AtomicUsize::new(0),
            idle: Notify::new(),
            closing,
            accepting: std::sync::Mutex::new(None),
        });
        let serving = Arc::clone(&hub);
        let accepting = tokio::spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((stream, _)) => {
                        serving.live.fetch_add(1, Ordering::SeqCst);
                        let hub = Arc::clone(&serving);
                        let engine = engine.clone();
                        let closing = serving.closing.subscribe();
                        tokio::spawn(async move {
                            if let Err(e) = serve_forwarder(&engine, stream, closing).await {
                                tracing::warn!("a forwarding recall mcp process: {e:#}");
                            }
                            if hub.live.fetch_sub(1, Ordering::SeqCst) == 1 {
                                hub.idle.notify_waiters();
                            }
                        });
                    }
                    Err(e) => {
                        tracing::warn!("accepting on {}: {e}", serving.path.display());
                        tokio::time::sleep(PROBE_EVERY).await;
                    }
                }
            }
        });
        if let Ok(mut slot) = hub.accepting.lock() {
            *slot = Some(accepting);
        }
        Ok(hub)
    }

    /// Stops serving: no new forwarders, the calls in flight finish, every
    /// forwarder is told the store moved, the socket goes. Returns when no
    /// forwarder task holds the engine any more.
    pub async fn hand_over(&self) {
        if let Some(task) = self.accepting.lock().ok().and_then(|mut t| t.take()) {
            task.abort();
        }
        let _ = std::fs::remove_file(&self.path);
        self.closing.send_replace(true);
        loop {
            let idle = self.idle.notified();
            if self.live.load(Ordering::SeqCst) == 0 {
                return;
            }
            idle.await;
        }
    }
}

/// Runs one forwarder's calls until it disconnects, then ends the sessions it
/// left open (a forwarder killed mid-session still ends its session, §11),
/// or until the owner hands over, when the sessions go on at the next owner.
async fn serve_forwarder(
    engine: &Engine,
    stream: UnixStream,
    mut closing: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    let Some(first) = lines.next_line().await? else {
        return Ok(()); // a probe: connected and left
    };
    let policy: Policy = serde_json::from_str(&first).context("a forwarder's opening policy")?;
    if let Err(e) = recall::validate_scope_name("tenant", &policy.tenant) {
        let refusal = ToolError::from(e);
        send(&mut write, &Reply::Err(refusal)).await?;
        return Ok(());
    }
    send(
        &mut write,
        &Reply::Ok(Output {
            text: "ready".into(),
            structured: Value::Null,
        }),
    )
    .await?;
    let mut open = HashSet::new();
    let result = async {
        loop {
            // Between requests only: a request that arrived is run and
            // answered before the owner lets go.
            let line = tokio::select! {
                line = lines.next_line() => line?,
                () = async { let _ = closing.wait_for(|closing| *closing).await; } => {
                    send(&mut write, &Reply::Moved).await?;
                    return anyhow::Ok(true);
                }
            };
            let Some(line) = line else {
                return anyhow::Ok(false);
            };
            let reply = match serde_json::from_str::<Request>(&line) {
                Err(e) => Reply::Err(ToolError::new(
                    tools::ToolErrorKind::InvalidArguments,
                    format!("malformed request: {e}"),
                )),
                Ok(req) => {
                    open.insert(req.session.clone());
                    let out = tools::call(engine, &policy, &req.session, &req.tool, req.args).await;
                    if req.tool == "end_session" && out.is_ok() {
                        open.remove(&req.session);
                    }
                    match out {
                        Ok(o) => Reply::Ok(o),
                        Err(e) => Reply::Err(e),
                    }
                }
            };
            send(&mut write, &reply).await?;
        }
    }
    .await;
    if matches!(result, Ok(true)) {
        return Ok(());
    }
    for session in open {
        if let Err(e) = engine.end_session(&policy.tenant, &session).execute().await {
            tracing::warn!(session, "ending a disconnected forwarder's session: {e}");
        }
    }
    result.map(|_| ())
}

async fn send(write: &mut OwnedWriteHalf, reply: &Reply) -> anyhow::Result<()> {
    let mut line = serde_json::to_vec(reply)?;
    line.push(b'\n');
    write.write_all(&line).await?;
    Ok(())
}

/// The forwarder's side: a connection to the owner.
pub struct Remote {
    lines: Lines<BufReader<OwnedReadHalf>>,
    write: OwnedWriteHalf,
}

/// A forwarded call that got no answer.
#[derive(Debug)]
pub struct Lost {
    /// Whether the request may have reached the owner (if so, a write may
    /// have landed: only read-only calls are retried).
    pub sent: bool,
}

impl Remote {
    /// Connects and introduces itself; `None` when nobody serves the socket.
    async fn connect(path: &Path, policy: &Policy) -> anyhow::Result<Option<Remote>> {
        let stream = match UnixStream::connect(path).await {
            Ok(s) => s,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
                ) =>
            {
                return Ok(None);
            }
            Err(e) => return Err(e).with_context(|| format!("connecting to {}", path.display())),
        };
        let (read, mut write) = stream.into_split();
        let mut remote = Remote {
            lines: BufReader::new(read).lines(),
            write: {
                let mut hello = serde_json::to_vec(policy)?;
                hello.push(b'\n');
                if write.write_all(&hello).await.is_err() {
                    return Ok(None);
                }
                write
            },
        };
        match remote.read().await {
            None => Ok(None),
            Some(Reply::Ok(_)) => Ok(Some(remote)),
            Some(Reply::Moved) => Ok(None),
            Some(Reply::Err(e)) => bail!("the store's owner refused this server: {e}"),
        }
    }

    async fn read(&mut self) -> Option<Reply> {
        let line = self.lines.next_line().await.ok()??;
        serde_json::from_str(&line).ok()
    }

    /// Forwards one call.
    pub async fn call(
        &mut self,
        session: &str,
        tool: &str,
        args: Map<String, Value>,
    ) -> Result<Result<Output, ToolError>, Lost> {
        let request = Request {
            session: session.to_string(),
            tool: tool.to_string(),
            args,
        };
        let mut line = serde_json::to_vec(&request).map_err(|_| Lost { sent: false })?;
        line.push(b'\n');
        if self.write.write_all(&line).await.is_err() {
            return Err(Lost { sent: false });
        }
        match self.read().await {
            Some(Reply::Ok(o)) => Ok(Ok(o)),
            Some(Reply::Err(e)) => Ok(Err(e)),
            Some(Reply::Moved) => Err(Lost { sent: false }),
            None => Err(Lost { sent: true }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use recall::{Kind, ModelSource, NewMemory, ReadPolicy};

    async fn in_session_bank(engine: &Engine, session: &str) -> usize {
        engine
            .recall("acme", "staging database password rotation")
            .policy(&ReadPolicy::banks(["org"]).session(session))
            .execute()
            .await
            .map(|r| r.hits.len())
            .unwrap_or(usize::MAX)
    }

    /// A forwarder that disappears mid-session (killed: its connection just
    /// closes) still has its session ended by the owner: here, the session's
    /// own bank leaves recall, as §7 says it does when a session ends.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_vanished_forwarder_has_its_session_ended() {
        let dir = tempfile::tempdir().unwrap();
        let engine = Engine::open(Config::new(dir.path()).model(ModelSource::None))
            .await
            .unwrap();
        engine
            .remember(NewMemory::new(
                "acme",
                "session:s1",
                Kind::Note,
                "The staging database password rotation happens at noon",
            ))
            .await
            .unwrap();
        let hub = Hub::start(engine.clone(), &socket_path(dir.path())).unwrap();
        let policy = Policy {
            tenant: "acme".into(),
            read: vec!["org".into()],
            write_bank: "org".into(),
            agent: None,
        };
        let mut remote = Remote::connect(&socket_path(dir.path()), &policy)
            .await
            .unwrap()
            .unwrap();
        let mut args = Map::new();
        args.insert(
            "query".into(),
            Value::String("staging database password rotation".into()),
        );
        let out = remote.call("s1", "recall", args).await.unwrap().unwrap();
        assert_eq!(out.structured["hits"].as_array().map(Vec::len), Some(1));
        assert_eq!(in_session_bank(&engine, "s1").await, 1);
        drop(remote);
        let deadline = Instant::now() + Duration::from_secs(5);
        while in_session_bank(&engine, "s1").await != 0 {
            assert!(Instant::now() < deadline, "the session was not ended");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        hub.hand_over().await;
        assert!(!socket_path(dir.path()).exists());
    }
}
