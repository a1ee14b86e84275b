//! `recall mcp --http ADDR` (cargo feature `http`): the same tools over MCP's
//! Streamable HTTP transport, at `http://ADDR/mcp`, for clients that connect
//! to a running server rather than start one.
//!
//! - One process serves every connection. Each MCP session (rmcp's session
//!   manager, the `Mcp-Session-Id` header) gets its own [`Front`], so it is
//!   one recall session, as a stdio connection is. The session ends when the
//!   client deletes it, when rmcp drops it after 5 idle minutes, or when the
//!   server stops.
//! - The process takes part in the owner election like any `recall mcp`
//!   (`share.rs`): stdio windows on the same data directory forward to it,
//!   or it forwards to them.
//! - Private by default: it binds loopback addresses only, rmcp refuses a
//!   `Host` that is not a loopback name (DNS rebinding), and any request
//!   that carries an `Origin` (a web page) is refused. `--allow-remote`
//!   lifts the first two; the server has no authentication of its own, so
//!   put one in front of it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};

use anyhow::{Context, bail};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ListToolsResult, PaginatedRequestParams, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use tokio::net::TcpListener;

use super::server::{self, Front, SharedRole};
use super::tools::Policy;

/// The path the MCP endpoint is served at; anything else is a 404.
pub const ENDPOINT: &str = "/mcp";

/// Where and how `recall mcp --http` listens.
pub struct Listen {
    addr: SocketAddr,
    /// Accept a non-loopback address and any `Host` header.
    allow_remote: bool,
}

impl Listen {
    /// Refuses a non-loopback address unless remote access is allowed
    /// (checked before anything is created or opened).
    pub fn new(addr: SocketAddr, allow_remote: bool) -> anyhow::Result<Listen> {
        if !addr.ip().is_loopback() && !allow_remote {
            bail!(
                "--http {addr} is not a loopback address; the server has no authentication, so it binds 127.0.0.1 or ::1 unless --allow-remote is given"
            );
        }
        Ok(Listen { addr, allow_remote })
    }
}

/// One HTTP session's server: a [`Front`] whose session ends when rmcp
/// drops it.
struct HttpSession(Arc<Front>);

impl Drop for HttpSession {
    fn drop(&mut self) {
        let front = Arc::clone(&self.0);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { front.end_if_active().await });
        }
    }
}

impl ServerHandler for HttpSession {
    fn get_info(&self) -> ServerConfig {
        self.0.get_info()
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        self.0.list_tools(request, context).await
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.0.call_tool(request, context).await
    }
}

/// The sessions this process serves, so a stopping server can end the
/// active ones before it hands the store over.
#[derive(Default)]
struct Sessions(Mutex<Vec<Weak<Front>>>);

impl Sessions {
    fn add(&self, front: &Arc<Front>) {
        if let Ok(mut all) = self.0.lock() {
            all.retain(|f| f.strong_count() > 0);
            all.push(Arc::downgrade(front));
        }
    }

    fn live(&self) -> Vec<Arc<Front>> {
        self.0
            .lock()
            .map(|all| all.iter().filter_map(Weak::upgrade).collect())
            .unwrap_or_default()
    }
}

/// Serves MCP over Streamable HTTP until SIGTERM or SIGINT.
pub async fn serve(
    data: PathBuf,
    policy: Policy,
    role: SharedRole,
    listen: Listen,
) -> anyhow::Result<()> {
    let mut config = StreamableHttpServerConfig::default().enforce_origin_validation();
    if listen.allow_remote {
        config = config.disable_allowed_hosts();
    }
    let stop = config.cancellation_token.clone();
    let sessions = Arc::new(Sessions::default());
    let factory = {
        let sessions = Arc::clone(&sessions);
        let role = Arc::clone(&role);
        move || {
            let front = Arc::new(Front::new(
                data.clone(),
                policy.clone(),
                Arc::clone(&role),
                None,
            ));
            sessions.add(&front);
            Ok(HttpSession(front))
        }
    };
    let service =
        StreamableHttpService::new(factory, Arc::new(LocalSessionManager::default()), config);
    let listener = TcpListener::bind(listen.addr)
        .await
        .with_context(|| format!("listening on {}", listen.addr))?;
    let bound = listener.local_addr()?;
    // A client (or a test) that asked for port 0 learns the port here.
    eprintln!("recall mcp: serving http://{bound}{ENDPOINT}");
    tracing::info!(%bound, "serving MCP over Streamable HTTP");
    let signal = super::terminated();
    tokio::pin!(signal);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!("accepting a connection: {e}");
                    continue;
                }
            },
            signal = &mut signal => {
                tracing::info!("{signal}: ending the sessions and handing the store over");
                break;
            }
        };
        let service = service.clone();
        let routed = service_fn(move |request: Request<Incoming>| {
            let service = service.clone();
            async move {
                if request.uri().path() == ENDPOINT {
                    let delete = request.method() == Method::DELETE;
                    let mut response = service.handle(request).await;
                    // rmcp answers a session's DELETE with 202; the Python
                    // SDK's client accepts 200 or 204 and logs a failure
                    // otherwise. The session is closed either way.
                    if delete && response.status() == StatusCode::ACCEPTED {
                        *response.status_mut() = StatusCode::OK;
                    }
                    Ok::<_, std::convert::Infallible>(response)
                } else {
                    let mut response = Response::new(Default::default());
                    *response.status_mut() = StatusCode::NOT_FOUND;
                    Ok(response)
                }
            }
        });
        tokio::spawn(async move {
            if let Err(e) = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), routed)
                .await
            {
                tracing::debug!(%peer, "HTTP connection: {e}");
            }
        });
    }
    drop(listener);
    for front in sessions.live() {
        front.end_if_active().await;
    }
    stop.cancel();
    server::hand_over(&role).await;
    Ok(())
}
