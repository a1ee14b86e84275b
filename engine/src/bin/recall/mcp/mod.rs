//! `recall mcp`: the engine as an MCP server over stdio (SPEC §11).
//!
//! - `tools.rs`: the tools, their schemas, and how each maps onto the engine.
//! - `server.rs`: the MCP protocol side (rmcp) and the connection's session.
//! - `share.rs`: several servers on one data directory (owner and forwarders).
//! - `http.rs`: Streamable HTTP instead of stdio (`--http`, cargo feature `http`).

#[cfg(feature = "http")]
mod http;
mod server;
mod share;
pub(crate) mod tools;

use std::path::PathBuf;

use anyhow::Context;
use rmcp::ServiceExt;

use tools::Policy;

/// Settings of `recall mcp`. Each can also come from the environment (an MCP
/// client's server entry usually has an `env` map) or from a JSON config
/// file (`--config`); a flag or variable wins over the file.
#[derive(clap::Args, Debug, Default)]
pub struct McpArgs {
    /// A JSON object with any of `tenant`, `read` (a list), `write_bank`,
    /// `agent`, `session`, `http` and `bank_modes` (a list of
    /// `PATTERN=direct|propose`, before `--bank-mode`'s); flags and
    /// variables override it.
    #[arg(long, env = "RECALL_CONFIG")]
    config: Option<PathBuf>,
    /// The only tenant this server reads and writes (required here, in the
    /// environment or in the config file).
    #[arg(long, env = "RECALL_TENANT")]
    tenant: Option<String>,
    /// Banks recall may read, comma separated; the write bank is always read.
    #[arg(long, env = "RECALL_READ", value_delimiter = ',')]
    read: Vec<String>,
    /// The bank new memories go to (default `org`).
    #[arg(long, env = "RECALL_WRITE_BANK")]
    write_bank: Option<String>,
    /// Recorded as the author of what this server remembers.
    #[arg(long, env = "RECALL_AGENT")]
    agent: Option<String>,
    /// Id of the first session (default: a new one per connection).
    #[arg(long, env = "RECALL_SESSION")]
    session: Option<String>,
    /// Serve MCP's Streamable HTTP at http://ADDR/mcp instead of stdio, one
    /// recall session per MCP session (needs the `http` cargo feature).
    #[arg(long, env = "RECALL_HTTP", value_name = "ADDR")]
    http: Option<std::net::SocketAddr>,
    /// With --http: accept a non-loopback address and any Host header. The
    /// server has no authentication of its own; put one in front of it.
    #[arg(long, requires = "http")]
    allow_remote: bool,
    /// From the config file's `bank_modes`.
    #[arg(skip)]
    bank_modes: Vec<String>,
}

/// The config file's settings (`--config`); unknown keys are refused so a
/// misspelt `tenant` does not silently fall back.
#[derive(serde::Deserialize, Debug, Default, PartialEq)]
#[serde(deny_unknown_fields)]
struct McpFile {
    tenant: Option<String>,
    #[serde(default)]
    read: Vec<String>,
    write_bank: Option<String>,
    agent: Option<String>,
    session: Option<String>,
    http: Option<std::net::SocketAddr>,
    #[serde(default)]
    bank_modes: Vec<String>,
}

impl McpFile {
    fn load(path: &std::path::Path) -> anyhow::Result<McpFile> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the config file {}", path.display()))?;
        serde_json::from_str(&text).with_context(|| {
            format!(
                "the config file {} is not a valid settings object",
                path.display()
            )
        })
    }
}

impl McpArgs {
    /// The settings with the config file's filled in where no flag or
    /// variable gave them.
    fn merged(mut self) -> anyhow::Result<McpArgs> {
        let Some(path) = &self.config else {
            return Ok(self);
        };
        let file = McpFile::load(path)?;
        self.tenant = self.tenant.or(file.tenant);
        if self.read.is_empty() {
            self.read = file.read;
        }
        self.write_bank = self.write_bank.or(file.write_bank);
        self.agent = self.agent.or(file.agent);
        self.session = self.session.or(file.session);
        self.http = self.http.or(file.http);
        self.bank_modes = file.bank_modes;
        Ok(self)
    }

    fn policy(&self) -> anyhow::Result<Policy> {
        let tenant = self
            .tenant
            .clone()
            .context("no tenant: give --tenant, RECALL_TENANT or \"tenant\" in the config file")?;
        let write_bank = self.write_bank.clone().unwrap_or_else(|| "org".into());
        recall::validate_scope_name("tenant", &tenant)?;
        recall::validate_scope_name("bank", &write_bank)?;
        let mut read = vec![write_bank.clone()];
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
            tenant,
            read,
            write_bank,
            agent: self.agent.clone(),
        })
    }
}

/// Serves one MCP client on stdin/stdout until it disconnects, or, with
/// `--http`, every client that connects until the process is stopped.
pub async fn run(
    location: crate::location::Location,
    args: McpArgs,
    bank_modes: &[String],
) -> anyhow::Result<()> {
    let args = args.merged()?;
    let policy = args.policy()?;
    let mut proposals = recall::ProposalPolicy::default();
    for rule in args.bank_modes.iter().chain(bank_modes) {
        proposals = proposals.parse_rule(rule)?;
    }
    // Set once, before any store is opened.
    let _ = share::PROPOSALS.set(proposals);
    let _ = share::STORAGE.set(location.remote);
    let data = location.dir;
    #[cfg(not(feature = "http"))]
    if let Some(addr) = args.http {
        anyhow::bail!(
            "--http {addr}: this recall was built without Streamable HTTP; build it with `cargo build --features http`"
        );
    }
    #[cfg(feature = "http")]
    let listen = args
        .http
        .map(|addr| http::Listen::new(addr, args.allow_remote))
        .transpose()?;
    std::fs::create_dir_all(&data).with_context(|| format!("creating {}", data.display()))?;
    let role = std::sync::Arc::new(tokio::sync::Mutex::new(share::elect(&data, &policy).await?));
    #[cfg(feature = "http")]
    if let Some(listen) = listen {
        return http::serve(data, policy, role, listen).await;
    }
    let front = std::sync::Arc::new(server::Front::new(
        data,
        policy,
        std::sync::Arc::clone(&role),
        args.session,
    ));
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
    front.end_if_active().await;
    server::hand_over(&role).await;
    Ok(())
}

/// Resolves on SIGTERM or SIGINT (how MCP clients stop a server that does
/// not exit when its stdin closes).
pub(crate) async fn terminated() -> &'static str {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn file(json: &str) -> (tempfile::NamedTempFile, PathBuf) {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        std::io::Write::write_all(&mut f, json.as_bytes()).unwrap();
        let path = f.path().to_path_buf();
        (f, path)
    }

    #[test]
    fn the_config_file_fills_what_no_flag_gave_and_a_flag_wins() {
        let (_f, path) = file(
            r#"{"tenant": "acme", "read": ["org", "user:ana"], "write_bank": "user:ana", "agent": "cursor", "http": "127.0.0.1:8765"}"#,
        );
        let from_file = McpArgs {
            config: Some(path.clone()),
            ..McpArgs::default()
        };
        let merged = from_file.merged().unwrap();
        assert_eq!(merged.http, Some(([127, 0, 0, 1], 8765).into()));
        let policy = merged.policy().unwrap();
        assert_eq!(policy.tenant, "acme");
        assert_eq!(policy.write_bank, "user:ana");
        assert_eq!(policy.read, ["user:ana", "org"]);
        assert_eq!(policy.agent.as_deref(), Some("cursor"));
        let flags = McpArgs {
            config: Some(path),
            tenant: Some("other".into()),
            read: vec!["team".into()],
            ..McpArgs::default()
        };
        let policy = flags.merged().unwrap().policy().unwrap();
        assert_eq!(policy.tenant, "other");
        assert_eq!(policy.read, ["user:ana", "team"]);
    }

    #[test]
    fn a_bad_config_file_or_no_tenant_is_a_clear_error() {
        let (_f, path) = file(r#"{"tenannt": "acme"}"#);
        let misspelt = McpArgs {
            config: Some(path),
            ..McpArgs::default()
        };
        let err = format!("{:#}", misspelt.merged().unwrap_err());
        assert!(err.contains("tenannt"), "{err}");
        let missing = McpArgs {
            config: Some(PathBuf::from("/nonexistent/recall.json")),
            ..McpArgs::default()
        };
        assert!(format!("{:#}", missing.merged().unwrap_err()).contains("reading the config file"));
        let none = McpArgs::default().merged().unwrap();
        let err = format!("{:#}", none.policy().unwrap_err());
        assert!(err.contains("no tenant"), "{err}");
        // Without a config file the default write bank is org.
        let plain = McpArgs {
            tenant: Some("acme".into()),
            ..McpArgs::default()
        };
        assert_eq!(plain.policy().unwrap().read, ["org"]);
    }
}
