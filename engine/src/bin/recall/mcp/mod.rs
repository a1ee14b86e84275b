//! `recall mcp`: the engine as an MCP server over stdio (SPEC §11).
//!
//! - `tools.rs`: the tools, their schemas, and how each maps onto the engine.
//! - `server.rs`: the MCP protocol side (rmcp) and the connection's session.
//! - `share.rs`: several servers on one data directory (owner and forwarders).

mod server;
mod share;
mod tools;

use std::path::PathBuf;

use anyhow::Context;
use rmcp::ServiceExt;

use tools::Policy;

/// Settings of `recall mcp`. Each can also come from the environment (an MCP
/// client's server entry usually has an `env` map).
#[derive(clap::Args, Debug)]
pub struct McpArgs {
    /// The only tenant this server reads and writes.
    #[arg(long, env = "RECALL_TENANT")]
    tenant: String,
    /// Banks recall may read, comma separated; the write bank is always read.
    #[arg(long, env = "RECALL_READ", value_delimiter = ',')]
    read: Vec<String>,
    /// The bank new memories go to.
    #[arg(long, env = "RECALL_WRITE_BANK", default_value = "org")]
    write_bank: String,
    /// Recorded as the author of what this server remembers.
    #[arg(long, env = "RECALL_AGENT")]
    agent: Option<String>,
    /// Id of the first session (default: a new one per connection).
    #[arg(long, env = "RECALL_SESSION")]
    session: Option<String>,
}

impl McpArgs {
    fn policy(&self) -> anyhow::Result<Policy> {
        recall::validate_scope_name("tenant", &self.tenant)?;
        recall::validate_scope_name("bank", &self.write_bank)?;
        let mut read = vec![self.write_bank.clone()];
        for bank in &self.read {
            recall::validate_scope_name("bank", bank)?;
            if !read.contains(bank) {
                read.push(bank.clone());
            }
        }
        if let Some(session) = &self.session {
            recall::validate_scope_name("session", session)?;
        }
        Ok(Policy {
            tenant: self.tenant.clone(),
            read,
            write_bank: self.write_bank.clone(),
            agent: self.agent.clone(),
        })
    }
}

/// Serves one MCP client on stdin/stdout until it disconnects.
pub async fn run(data: PathBuf, args: McpArgs) -> anyhow::Result<()> {
    let policy = args.policy()?;
    std::fs::create_dir_all(&data).with_context(|| format!("creating {}", data.display()))?;
    let role = share::elect(&data, &policy).await?;
    let front = std::sync::Arc::new(server::Front::new(data, policy, role, args.session));
    let service = std::sync::Arc::clone(&front)
        .serve(rmcp::transport::stdio())
        .await
        .context("starting the MCP session")?;
    let stop = service.cancellation_token();
    tokio::select! {
        quit = service.waiting() => {
            if let Err(e) = quit {
                tracing::warn!("the MCP session ended abnormally: {e}");
            }
        }
        signal = terminated() => {
            tracing::info!("{signal}: ending the session and handing the store over");
            stop.cancel();
        }
    }
    front.finish().await;
    Ok(())
}

/// Resolves on SIGTERM or SIGINT (how MCP clients stop a server that does
/// not exit when its stdin closes).
async fn terminated() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    }
}
