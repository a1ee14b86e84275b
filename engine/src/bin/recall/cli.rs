//! The command line: every subcommand and flag (clap), with its help text.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use uuid::Uuid;

use crate::mcp;
#[cfg(feature = "s3")]
use crate::serve;

#[derive(Parser)]
#[command(
    name = "recall",
    version,
    about = "Semantic recall for AI agents' long-term memory"
)]
pub(crate) struct Cli {
    /// Data directory, or `s3://bucket/prefix` for a store on S3-compatible
    /// object storage (endpoint and credentials from AWS_ENDPOINT_URL,
    /// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, and
    /// AWS_ALLOW_HTTP=true for a plain-HTTP server).
    #[arg(
        long,
        visible_alias = "storage",
        global = true,
        env = "RECALL_DATA",
        default_value = "./recall-data"
    )]
    pub(crate) data: PathBuf,
    /// With an `s3://` store: the local cache directory (BM25 index, vector
    /// files, lock, audit log). Default $XDG_CACHE_HOME/recall/stores/...
    #[arg(long, global = true, env = "RECALL_CACHE", value_name = "DIR")]
    pub(crate) cache: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    pub(crate) json: bool,
    /// How a bank takes an agent's writes: PATTERN=direct or
    /// PATTERN=propose (a bank name or a prefix ending in `*`), ahead of the
    /// defaults (`session:*` and `user:*` direct, `repo:*`, `org` and
    /// `org:*` propose). Repeatable, comma separated, or in
    /// RECALL_BANK_MODE; a later rule wins; `*=direct` turns review off.
    #[arg(
        long = "bank-mode",
        global = true,
        env = "RECALL_BANK_MODE",
        value_delimiter = ',',
        value_name = "PATTERN=MODE"
    )]
    pub(crate) bank_modes: Vec<String>,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Write a memory.
    Remember {
        #[arg(long)]
        tenant: String,
        #[arg(long)]
        bank: String,
        /// pitfall, convention, note, session_outcome, preference, fact or episode.
        #[arg(long)]
        kind: String,
        #[arg(long)]
        title: Option<String>,
        #[arg(long = "element")]
        elements: Vec<String>,
        /// explicit or inferred.
        #[arg(long, default_value = "explicit")]
        source: String,
        #[arg(long)]
        confidence: Option<f32>,
        /// Id or title of the memory this one replaces.
        #[arg(long)]
        supersedes: Option<String>,
        /// When it was said (RFC 3339); default now.
        #[arg(long)]
        observed_at: Option<String>,
        /// Who wrote it: user (a person: always direct), agent (held for
        /// review in a `propose` bank, see --bank-mode) or external.
        #[arg(long, default_value = "agent")]
        trust: String,
        text: String,
    },
    /// Ask what is known.
    Recall {
        #[arg(long)]
        tenant: String,
        /// Banks to read, comma separated.
        #[arg(long, value_delimiter = ',', required = true)]
        read: Vec<String>,
        #[arg(long, default_value_t = 10)]
        k: usize,
        #[arg(long)]
        session: Option<String>,
        #[arg(long)]
        include_quarantined: bool,
        query: String,
    },
    /// Erase memories physically (right to erasure): one, a bank, or the whole tenant.
    Erase {
        #[arg(long)]
        tenant: String,
        /// One memory.
        #[arg(long, conflicts_with_all = ["bank", "everything"])]
        id: Option<Uuid>,
        /// Every memory of this bank.
        #[arg(long, conflicts_with = "everything")]
        bank: Option<String>,
        /// Everything the tenant stored.
        #[arg(long)]
        everything: bool,
        /// Who asks (recorded in the audit log). Default: $USER.
        #[arg(long)]
        actor: Option<String>,
    },
    /// Let a quarantined memory be served, after reviewing it.
    Release {
        #[arg(long)]
        tenant: String,
        id: Uuid,
        /// Who reviewed it (recorded in the audit log). Default: $USER.
        #[arg(long)]
        actor: Option<String>,
    },
    /// Accept a pending proposal: it is served (and supersedes what it names) from now on.
    Accept {
        #[arg(long)]
        tenant: String,
        id: Uuid,
        /// Who accepts it (recorded in the audit log). Default: $USER.
        #[arg(long)]
        actor: Option<String>,
    },
    /// Reject a pending proposal: it is never served.
    Reject {
        #[arg(long)]
        tenant: String,
        id: Uuid,
        /// Who rejects it (recorded in the audit log). Default: $USER.
        #[arg(long)]
        actor: Option<String>,
        /// Why (recorded in the audit log and on the proposal).
        #[arg(long)]
        reason: Option<String>,
    },
    /// List the pending proposals, each with a diff against what it would replace or repeat.
    Proposals {
        #[arg(long)]
        tenant: String,
    },
    /// Print every memory of the tenant in any state, one JSON object per line.
    Export {
        #[arg(long)]
        tenant: String,
    },
    /// Show the tenant's audit log (ids and content hashes, never content).
    Audit {
        #[arg(long)]
        tenant: String,
    },
    /// Bulk import a JSONL file (one memory per line: bank, kind, content, and optional fields).
    ///
    /// Memories are written in calls of --batch, each durable before the
    /// next starts. If a call fails, the error (and `acknowledged_lines` in
    /// --json) says how many of the file's first lines are written: re-run
    /// with --skip that many to go on.
    Import {
        #[arg(long)]
        tenant: String,
        file: PathBuf,
        /// Skip the file's first N lines (already imported).
        #[arg(long, default_value_t = 0)]
        skip: usize,
        /// Memories per durable call.
        #[arg(long, default_value_t = recall::IMPORT_BATCH)]
        batch: usize,
    },
    /// Mark a memory as checked and still true.
    Confirm {
        #[arg(long)]
        tenant: String,
        id: Uuid,
    },
    /// Soft-delete a memory.
    Forget {
        #[arg(long)]
        tenant: String,
        id: Uuid,
    },
    /// Show one memory.
    Get {
        #[arg(long)]
        tenant: String,
        id: Uuid,
    },
    /// Show a memory's supersession chain.
    History {
        #[arg(long)]
        tenant: String,
        id: Uuid,
    },
    /// List active memories.
    List {
        #[arg(long)]
        tenant: String,
        #[arg(long)]
        bank: Option<String>,
    },
    /// End a session: cite what it used, store its outcome, expire its session bank.
    EndSession {
        #[arg(long)]
        tenant: String,
        #[arg(long)]
        session: String,
        #[arg(long = "used")]
        used: Vec<Uuid>,
        #[arg(long)]
        outcome: Option<String>,
        #[arg(long = "element")]
        elements: Vec<String>,
        /// Bank of the outcome memory.
        #[arg(long, default_value = "org")]
        bank: String,
    },
    /// The code behind an element changed: demote and flag its memories.
    Drift {
        #[arg(long)]
        tenant: String,
        #[arg(long)]
        element: String,
        /// When it changed (RFC 3339); default now.
        #[arg(long)]
        at: Option<String>,
    },
    /// Recall and render the hits for a prompt within a token budget.
    Briefing {
        #[arg(long)]
        tenant: String,
        #[arg(long, value_delimiter = ',', required = true)]
        read: Vec<String>,
        #[arg(long)]
        session: Option<String>,
        #[arg(long, default_value_t = 10)]
        k: usize,
        #[arg(long, default_value_t = 800)]
        budget: usize,
        query: String,
    },
    /// What needs a person's eye.
    Review {
        #[arg(long)]
        tenant: String,
    },
    /// Which elements are documented.
    Map {
        #[arg(long)]
        tenant: String,
        #[arg(long = "element", required = true)]
        elements: Vec<String>,
    },
    /// Move a memory into another bank (e.g. out of a session bank).
    Promote {
        #[arg(long)]
        tenant: String,
        id: Uuid,
        #[arg(long)]
        bank: String,
    },
    /// Fold near copies, turn repeated episodes into facts and propose
    /// supersessions for review (the default consolidation pass, over what
    /// changed since the last one).
    Consolidate {
        #[arg(long)]
        tenant: String,
        /// Only memories of these banks (comma separated); the pass then
        /// leaves the tenant's cursor alone.
        #[arg(long = "bank", value_delimiter = ',')]
        banks: Vec<String>,
        /// Only memories of these kinds (comma separated); as --bank.
        #[arg(long = "kind", value_delimiter = ',')]
        kinds: Vec<String>,
        /// Memories written or confirmed after this time (RFC 3339) instead
        /// of after the last pass; as --bank.
        #[arg(long)]
        since: Option<String>,
        /// Only print the proposals; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Look at about this many changed memories (the next pass goes on).
        #[arg(long)]
        budget: Option<usize>,
    },
    /// Embed every memory stored without a vector, now.
    Backfill,
    /// Counts and the embedder in use.
    Status,
    /// Serve the memory to an MCP client over stdio (Claude Code, Cursor, Codex, ...).
    Mcp(mcp::McpArgs),
    /// Serve as one node of several sharing an s3:// store: tenants are
    /// placed on the live nodes, calls are forwarded to a tenant's node.
    #[cfg(feature = "s3")]
    Serve(serve::ServeArgs),
    /// Run the demo on a fresh data directory.
    Demo {
        /// Keep the demo's data in this directory instead of a temporary one.
        #[arg(long)]
        keep: Option<PathBuf>,
    },
}
