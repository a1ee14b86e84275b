//! The nodes' wire: one JSON object per line over TCP, each request
//! answered by one reply, in order. Clients (an agent framework, the tests)
//! and nodes forwarding to one another speak the same.
//!
//! ```text
//! > {"op":"call","tenant":"acme","tool":"remember","args":{"content":"...","kind":"pitfall"}}
//! < {"reply":"ok","node":"n2","output":{"text":"...","structured":{...}}}
//! > {"op":"status"}
//! < {"reply":"status","node":"n1","members":[{"node":"n1","addr":"127.0.0.1:7700"},...],"open":["acme"]}
//! ```

use std::time::Duration;

use recall::Member;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::mcp::tools::{Output, ToolError};

/// One request.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Runs one of `recall mcp`'s tools for a tenant, on whichever node writes it.
    Call(Box<Call>),
    /// Who this node is, which nodes it sees alive, which tenants it holds.
    Status,
}

/// A tool call and the scope it runs in (what `recall mcp` takes from its
/// configuration, a node takes per call: it serves every tenant).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Call {
    pub tenant: String,
    pub tool: String,
    #[serde(default)]
    pub args: Map<String, Value>,
    /// The recall session (§7); `end_session` ends it.
    #[serde(default = "default_session")]
    pub session: String,
    /// Banks recall may read; default the write bank alone.
    #[serde(default)]
    pub read: Vec<String>,
    /// Where `remember` writes.
    #[serde(default = "default_bank")]
    pub write_bank: String,
    /// Recorded as the author of what is remembered.
    #[serde(default)]
    pub agent: Option<String>,
    /// How often this call was forwarded already (nodes set it).
    #[serde(default)]
    pub hops: u8,
}

fn default_session() -> String {
    "default".into()
}

fn default_bank() -> String {
    "org".into()
}

/// One reply; `node` names the node that answered (for a forwarded call,
/// the node that ran it).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub enum Reply {
    Ok {
        node: String,
        output: Output,
    },
    Error {
        node: String,
        error: ToolError,
    },
    /// Not run: the tenant is moving between nodes, or its node did not
    /// answer. Safe to repeat for a call that changes nothing; a write that
    /// timed out after it was sent may have landed (`sent`).
    Unavailable {
        node: String,
        reason: String,
        sent: bool,
    },
    Status {
        node: String,
        members: Vec<Member>,
        open: Vec<String>,
    },
}

/// How long a forwarded call may take (an open that waits for a dead
/// node's lease included).
pub const FORWARD_TIMEOUT: Duration = Duration::from_secs(120);

/// Why a call to another node got no reply.
#[derive(Debug)]
pub struct NoReply {
    pub reason: String,
    /// Whether the request was written (a write may then have landed).
    pub sent: bool,
}

/// Sends one request to `addr` on a connection of its own and reads the reply.
pub async fn ask(addr: &str, request: &Request) -> Result<Reply, NoReply> {
    let unsent = |reason: String| NoReply {
        reason,
        sent: false,
    };
    let mut line = serde_json::to_vec(request).map_err(|e| unsent(e.to_string()))?;
    line.push(b'\n');
    let mut stream = TcpStream::connect(addr)
        .await
        .map_err(|e| unsent(format!("connecting to {addr}: {e}")))?;
    stream
        .write_all(&line)
        .await
        .map_err(|e| unsent(format!("writing to {addr}: {e}")))?;
    let (read, _write) = stream.split();
    let mut lines = BufReader::new(read).lines();
    let lost = |reason: String| NoReply { reason, sent: true };
    let answer = tokio::time::timeout(FORWARD_TIMEOUT, lines.next_line())
        .await
        .map_err(|_| lost(format!("{addr} did not answer within {FORWARD_TIMEOUT:?}")))?
        .map_err(|e| lost(format!("reading from {addr}: {e}")))?
        .ok_or_else(|| lost(format!("{addr} closed the connection")))?;
    serde_json::from_str(&answer).map_err(|e| lost(format!("{addr} answered {answer:?}: {e}")))
}
