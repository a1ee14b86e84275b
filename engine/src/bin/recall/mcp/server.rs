//! The MCP face: one client connection (over stdio, or one Streamable HTTP
//! session, `http.rs`), one session at a time. Tool calls run on this
//! process's engine when it owns the store, or are forwarded to the owner
//! (`share.rs`); either way through `tools::call`.

use std::path::PathBuf;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Map, Value, json};
use tokio::sync::Mutex;
use uuid::Uuid;

use super::share::{self, Role};
use super::tools::{self, Output, Policy, ToolError, ToolErrorKind};

const INSTRUCTIONS: &str = "Long-term memory shared with earlier sessions. Call `recall` at the start of a task and before decisions; call `mark_used` with the ids you relied on; `remember` what later sessions should know (pitfalls, conventions, preferences, outcomes); call `end_session` when the task is done.";

/// The session a connection is in: its id, and whether anything happened in it.
struct Session {
    id: String,
    active: bool,
}

/// What this process is to the store (owner or forwarder), shared by every
/// client connection it serves; a re-election replaces it for all of them.
pub type SharedRole = Arc<Mutex<Role>>;

/// One MCP client's server.
pub struct Front {
    data: PathBuf,
    policy: Policy,
    role: SharedRole,
    session: std::sync::Mutex<Session>,
}

impl Front {
    pub fn new(data: PathBuf, policy: Policy, role: SharedRole, session: Option<String>) -> Front {
        Front {
            data,
            policy,
            role,
            session: std::sync::Mutex::new(Session {
                id: session.unwrap_or_else(new_session_id),
                active: false,
            }),
        }
    }

    fn current_session(&self) -> String {
        match self.session.lock() {
            Ok(mut s) => {
                s.active = true;
                s.id.clone()
            }
            Err(poisoned) => poisoned.into_inner().id.clone(),
        }
    }

    /// After `end_session`: later calls belong to a new session.
    fn next_session(&self, ended: &str) {
        if let Ok(mut s) = self.session.lock()
            && s.id == ended
        {
            s.id = new_session_id();
            s.active = false;
        }
    }

    /// Runs a tool here or at the store's owner. A forwarded call that got
    /// no answer because the owner went away is retried at the new owner
    /// when it changes nothing or certainly never arrived; a write that may
    /// have landed is reported, not repeated.
    pub async fn call(&self, tool: &str, args: Map<String, Value>) -> Result<Output, ToolError> {
        let session = self.current_session();
        let out = self.call_in(&session, tool, args).await;
        if tool == "end_session" && out.is_ok() {
            self.next_session(&session);
        }
        out
    }

    async fn call_in(
        &self,
        session: &str,
        tool: &str,
        args: Map<String, Value>,
    ) -> Result<Output, ToolError> {
        let mut role = self.role.lock().await;
        let engine = match &mut *role {
            Role::Owner(engine, _) => engine.clone(),
            Role::Forwarder(remote) => match remote.call(session, tool, args.clone()).await {
                Ok(out) => return out,
                Err(lost) => {
                    tracing::info!("the store's owner went away; electing a new one");
                    *role = share::elect(&self.data, &self.policy).await.map_err(|e| {
                        ToolError::new(ToolErrorKind::Unavailable, format!("{e:#}"))
                    })?;
                    if lost.sent && !tools::is_read_only(tool) {
                        return Err(ToolError::new(
                            ToolErrorKind::Unavailable,
                            "the process serving the store exited before answering; this call may or may not have been applied. Check with recall or get before repeating it.",
                        ));
                    }
                    match &mut *role {
                        Role::Owner(engine, _) => engine.clone(),
                        Role::Forwarder(remote) => {
                            return remote.call(session, tool, args).await.unwrap_or_else(|_| {
                                Err(ToolError::new(
                                    ToolErrorKind::Unavailable,
                                    "the process serving the store is not answering",
                                ))
                            });
                        }
                    }
                }
            },
        };
        // The engine is shared and internally locked: no need to hold the
        // role while the call runs.
        drop(role);
        tools::call(&engine, &self.policy, session, tool, args).await
    }

    /// The client left (or the process was told to stop): end the session
    /// if anything happened in it (its impressions without citations then
    /// count as ignored, SPEC §5).
    /// The session is taken under the lock, so two callers (a dropped HTTP
    /// session and a stopping server) end it once.
    pub async fn end_if_active(&self) {
        let taken = {
            let mut s = match self.session.lock() {
                Ok(s) => s,
                Err(poisoned) => poisoned.into_inner(),
            };
            std::mem::replace(&mut s.active, false).then(|| s.id.clone())
        };
        let Some(session) = taken else {
            return;
        };
        match self.call_in(&session, "end_session", Map::new()).await {
            Ok(_) => {
                tracing::info!(%session, "the client left; its session is ended");
                self.next_session(&session);
            }
            Err(e) => tracing::warn!(%session, "ending the session on disconnect: {e}"),
        }
    }
}

/// The process stops serving: as the owner, it hands the store over to the
/// other windows' servers (`share.rs`).
pub async fn hand_over(role: &SharedRole) {
    if let Role::Owner(engine, hub) = &*role.lock().await {
        hub.hand_over().await;
        // The next owner takes a store on object storage at once, not
        // after this process's lease expires.
        if let Err(e) = engine.close().await {
            tracing::warn!(error = %e, "the store's writer lease is left to expire");
        }
    }
}

fn new_session_id() -> String {
    format!("mcp-{}", Uuid::now_v7())
}

impl ServerHandler for Front {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("recall", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let tools = tools::catalogue()
            .into_iter()
            .map(|spec| {
                let schema = match spec.schema {
                    Value::Object(m) => m,
                    _ => Map::new(),
                };
                Tool::new(spec.name, spec.description, Arc::new(schema)).with_annotations(
                    ToolAnnotations::new()
                        .read_only(spec.read_only)
                        .destructive(spec.name == "forget")
                        .open_world(false),
                )
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let args = request.arguments.unwrap_or_default();
        match self.call(&request.name, args).await {
            Ok(out) => {
                let mut result = CallToolResult::structured(out.structured);
                result.content = vec![ContentBlock::text(out.text)];
                Ok(CallToolResponse::Complete(result))
            }
            Err(e) if e.kind == ToolErrorKind::UnknownTool => Err(McpError::invalid_params(
                e.message,
                Some(json!({"tool": request.name})),
            )),
            Err(e) => {
                let mut result = CallToolResult::error(vec![ContentBlock::text(e.message.clone())]);
                result.structured_content = Some(json!({"error": e.kind, "message": e.message}));
                Ok(CallToolResponse::Complete(result))
            }
        }
    }
}
