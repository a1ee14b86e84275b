//! `recall`: the command-line face of the engine. Errors go to stderr with a
//! non-zero exit; `--json` prints machine-readable output everywhere.

mod demo;
mod location;
mod mcp;
#[cfg(feature = "s3")]
mod serve;

use std::io::BufRead;
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use recall::{
    Engine, EraseScope, Kind, Memory, NewMemory, ProposalPolicy, RecallResult, Remembered, Source,
    Trust,
};
use uuid::Uuid;

/// A bulk import allocates and frees millions of small strings and vectors:
/// see `recall::allocator` (bench/README.md, `scale`, gives the runs).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: recall::allocator::MiMalloc = recall::allocator::MiMalloc;

#[derive(Parser)]
#[command(
    name = "recall",
    version,
    about = "Semantic recall for AI agents' long-term memory"
)]
struct Cli {
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
    data: PathBuf,
    /// With an `s3://` store: the local cache directory (BM25 index, vector
    /// files, lock, audit log). Default $XDG_CACHE_HOME/recall/stores/...
    #[arg(long, global = true, env = "RECALL_CACHE", value_name = "DIR")]
    cache: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
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
    bank_modes: Vec<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
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

/// Held across an `Engine::open`: the pages the open frees go back to the
/// system ([`recall::allocator::ReturnFreedPages`]; `main` keeps freed
/// pages otherwise).
#[cfg(feature = "mimalloc")]
fn returning_freed_pages() -> recall::allocator::ReturnFreedPages {
    recall::allocator::ReturnFreedPages::start()
}

#[cfg(not(feature = "mimalloc"))]
fn returning_freed_pages() -> SystemAllocator {
    SystemAllocator
}

/// Without mimalloc the system's allocator decides; nothing to undo.
#[cfg(not(feature = "mimalloc"))]
struct SystemAllocator;

#[cfg(not(feature = "mimalloc"))]
impl Drop for SystemAllocator {
    fn drop(&mut self) {}
}

#[tokio::main]
async fn main() {
    #[cfg(feature = "mimalloc")]
    recall::allocator::keep_freed_pages();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let cli = Cli::parse();
    if let Err(e) = run(cli).await {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

fn print_memory(m: &Memory) {
    let title = m
        .title
        .as_deref()
        .map(|t| format!(" «{t}»"))
        .unwrap_or_default();
    let status = if m.forgotten {
        " (forgotten)"
    } else if m.superseded_by.is_some() {
        " (superseded)"
    } else {
        match m.proposal.as_ref().map(|p| (p.held, &p.status)) {
            Some((true, recall::ProposalStatus::Pending)) => " (proposed)",
            Some((true, recall::ProposalStatus::Rejected { .. })) => " (rejected)",
            _ => "",
        }
    };
    println!(
        "{} [{}] {}{}{}: {}",
        m.id, m.kind, m.bank, title, status, m.content
    );
}

fn print_proposal(p: &recall::PendingProposal) {
    print!("  ");
    print_memory(&p.memory);
    if let Some(against) = &p.against {
        let replaces = p
            .memory
            .proposal
            .as_ref()
            .is_some_and(|x| !x.supersedes.is_empty());
        let verb = if replaces { "supersedes" } else { "near" };
        println!(
            "    {verb} {}{}",
            against.id,
            p.cosine
                .map(|c| format!(" (cosine {c:.3})"))
                .unwrap_or_default()
        );
    }
    if let Some(diff) = &p.diff {
        println!("    diff: {diff}");
    }
    if !p.rivals.is_empty() {
        let ids: Vec<String> = p.rivals.iter().map(Uuid::to_string).collect();
        println!(
            "    a fork: {} would replace the same memory",
            ids.join(", ")
        );
    }
}

pub(crate) fn print_recall(result: &RecallResult) {
    if result.abstained {
        if result.unknown_names.is_empty() {
            println!(
                "(abstained: nothing relevant enough among {} candidates)",
                result.candidates
            );
        } else {
            println!(
                "(abstained: no memory mentions {})",
                result.unknown_names.join(" or ")
            );
        }
        return;
    }
    for (rank, hit) in result.hits.iter().enumerate() {
        let m = &hit.memory;
        let title = m
            .title
            .as_deref()
            .map(|t| format!(" «{t}»"))
            .unwrap_or_default();
        println!("{:>2}. [{}]{} {}", rank + 1, m.kind, title, m.content);
        println!("    {}", hit.breakdown.explain().replace('\n', "\n    "));
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let command = match cli.command {
        Command::Demo { keep } => return demo::run(keep, cli.json).await,
        Command::Mcp(args) => {
            let location = location::Location::resolve(&cli.data, cli.cache.as_deref())?;
            return mcp::run(location, args, &cli.bank_modes).await;
        }
        #[cfg(feature = "s3")]
        Command::Serve(args) => {
            let location = location::Location::resolve(&cli.data, cli.cache.as_deref())?;
            return serve::run(location, args, &cli.bank_modes).await;
        }
        other => other,
    };
    let location = location::Location::resolve(&cli.data, cli.cache.as_deref())?;
    let mut proposals = ProposalPolicy::default();
    for rule in &cli.bank_modes {
        proposals = proposals.parse_rule(rule)?;
    }
    let returning = returning_freed_pages();
    let engine = Engine::open(location.config().proposals(proposals))
        .await
        .with_context(|| format!("opening {}", location.name()))?;
    drop(returning);
    match command {
        Command::Remember {
            tenant,
            bank,
            kind,
            title,
            elements,
            source,
            confidence,
            supersedes,
            observed_at,
            trust,
            text,
        } => {
            let kind: Kind = kind.parse()?;
            let source: Source = source.parse()?;
            let trust: Trust = trust.parse()?;
            let mut memory = NewMemory::new(tenant, bank, kind, text).trust(trust);
            memory.title = title;
            memory.elements = elements;
            memory.source = source;
            memory.confidence = confidence.unwrap_or(1.0);
            memory.supersedes = supersedes;
            memory.observed_at = observed_at.map(|at| parse_time(&at)).transpose()?;
            let outcome = engine.remember(memory).await?;
            if cli.json {
                print_json(&outcome)?;
            } else {
                let held = matches!(outcome, Remembered::Proposed { .. });
                match outcome {
                    Remembered::Stored {
                        id,
                        similar_to,
                        redactions,
                        quarantined,
                    }
                    | Remembered::Proposed {
                        id,
                        similar_to,
                        redactions,
                        quarantined,
                        ..
                    } => {
                        if held {
                            println!(
                                "proposed {id}: not served until `recall accept --tenant T {id}`"
                            );
                        } else {
                            println!("stored {id}");
                        }
                        for (kind, n) in &redactions {
                            println!("  redacted {n} × [{kind}]");
                        }
                        if let Some(rule) = quarantined {
                            println!(
                                "  quarantined (rule {rule}): not served until `recall release`"
                            );
                        }
                        for s in similar_to {
                            println!(
                                "  similar to {} (cosine {:.3}){}",
                                s.id,
                                s.cosine,
                                s.title.map(|t| format!(" «{t}»")).unwrap_or_default()
                            );
                        }
                    }
                    Remembered::Deduplicated { id, cosine } => {
                        println!("deduplicated into {id} (cosine {cosine:.3}); confirmed it");
                    }
                }
            }
        }
        Command::Recall {
            tenant,
            read,
            k,
            session,
            include_quarantined,
            query,
        } => {
            let mut builder = engine
                .recall(tenant, query)
                .read(read)
                .limit(k)
                .include_quarantined(include_quarantined);
            if let Some(s) = session {
                builder = builder.session(s);
            }
            let result = builder.execute().await?;
            if cli.json {
                print_json(&result)?;
            } else {
                print_recall(&result);
            }
        }
        Command::Import {
            tenant,
            file,
            skip,
            batch,
        } => {
            let source = ImportSource {
                file: &file,
                skip,
                batch,
            };
            import(&engine, &tenant, source, cli.json).await?
        }
        Command::Erase {
            tenant,
            id,
            bank,
            everything,
            actor,
        } => {
            let scope = match (id, bank, everything) {
                (Some(id), None, false) => EraseScope::Memory(id),
                (None, Some(bank), false) => EraseScope::Bank(bank),
                (None, None, true) => EraseScope::Tenant,
                _ => bail!("say what to erase: --id ID, --bank BANK or --everything"),
            };
            let erased = engine.erase(&tenant, scope, &actor_or_user(actor)).await?;
            if cli.json {
                print_json(&erased)?;
            } else {
                println!("erased {} memories of tenant {}", erased.ids.len(), tenant);
            }
        }
        Command::Release { tenant, id, actor } => show(
            cli.json,
            &engine.release(&tenant, id, &actor_or_user(actor)).await?,
        )?,
        Command::Accept { tenant, id, actor } => show(
            cli.json,
            &engine.accept(&tenant, id, &actor_or_user(actor)).await?,
        )?,
        Command::Reject {
            tenant,
            id,
            actor,
            reason,
        } => show(
            cli.json,
            &engine
                .reject(&tenant, id, &actor_or_user(actor), reason.as_deref())
                .await?,
        )?,
        Command::Proposals { tenant } => {
            let pending = engine.proposals(&tenant).await?;
            if cli.json {
                print_json(&pending)?;
            } else {
                println!("pending proposals ({}):", pending.len());
                pending.iter().for_each(print_proposal);
            }
        }
        Command::Export { tenant } => {
            for m in engine.export(&tenant).await? {
                println!("{}", serde_json::to_string(&m)?);
            }
        }
        Command::Audit { tenant } => {
            let entries = engine.audit(&tenant).await?;
            if cli.json {
                print_json(&entries)?;
            } else {
                for e in &entries {
                    println!(
                        "{} {:<9} {}{}{}",
                        recall_time(e.at_ms),
                        e.op,
                        e.ids.join(","),
                        e.actor
                            .as_deref()
                            .map(|a| format!(" by {a}"))
                            .unwrap_or_default(),
                        e.detail
                            .as_deref()
                            .map(|d| format!(" ({d})"))
                            .unwrap_or_default(),
                    );
                }
            }
        }
        Command::Confirm { tenant, id } => show(cli.json, &engine.confirm(&tenant, id).await?)?,
        Command::Forget { tenant, id } => show(cli.json, &engine.forget(&tenant, id).await?)?,
        Command::Get { tenant, id } => show(cli.json, &engine.get(&tenant, id).await?)?,
        Command::History { tenant, id } => {
            let chain = engine.history(&tenant, id).await?;
            if cli.json {
                print_json(&chain)?;
            } else {
                chain.iter().for_each(print_memory);
            }
        }
        Command::List { tenant, bank } => {
            let list = engine.list(&tenant, bank.as_deref()).await?;
            if cli.json {
                print_json(&list)?;
            } else {
                list.iter().for_each(print_memory);
            }
        }
        Command::EndSession {
            tenant,
            session,
            used,
            outcome,
            elements,
            bank,
        } => {
            let mut end = engine.end_session(tenant, session).used(used).bank(bank);
            if let Some(text) = outcome {
                end = end.outcome(text);
            }
            for e in elements {
                end = end.element(e);
            }
            let ended = end.execute().await?;
            if cli.json {
                print_json(&ended)?;
            } else {
                println!("cited {} memories", ended.cited.len());
                for id in &ended.not_dealt {
                    println!("  not dealt in this session, unchanged: {id}");
                }
                if let Some(outcome) = &ended.outcome {
                    println!("outcome memory {}", outcome.id());
                }
            }
        }
        Command::Drift {
            tenant,
            element,
            at,
        } => {
            let at = at.map(|a| parse_time(&a)).transpose()?;
            let flagged = engine.mark_drift(&tenant, &element, at).await?;
            if cli.json {
                print_json(&flagged)?;
            } else {
                println!("{} memories on {element} flagged VERIFY", flagged.len());
            }
        }
        Command::Briefing {
            tenant,
            read,
            session,
            k,
            budget,
            query,
        } => {
            let mut builder = engine.recall(tenant, query).read(read).limit(k);
            if let Some(s) = session {
                builder = builder.session(s);
            }
            let result = builder.execute().await?;
            let text = engine.briefing(&result.hits, budget);
            if cli.json {
                print_json(&serde_json::json!({"briefing": text, "abstained": result.abstained}))?;
            } else {
                println!("{text}");
            }
        }
        Command::Review { tenant } => {
            let queue = engine.review_queue(&tenant).await?;
            if cli.json {
                print_json(&queue)?;
            } else {
                println!("ignored ({}):", queue.ignored.len());
                for i in &queue.ignored {
                    print!("  {} impressions, 0 citations: ", i.impressions);
                    print_memory(&i.memory);
                }
                for (name, list) in [
                    ("drifted", &queue.drifted),
                    ("low confidence", &queue.low_confidence),
                    ("quarantined", &queue.quarantined),
                ] {
                    println!("{name} ({}):", list.len());
                    for m in list {
                        print!("  ");
                        print_memory(m);
                    }
                }
                println!("similar, not superseded ({}):", queue.similar.len());
                for p in &queue.similar {
                    println!("  {:.3}: {} ~ {}", p.cosine, p.older.id, p.newer.id);
                }
                println!("proposals ({}):", queue.proposals.len());
                queue.proposals.iter().for_each(print_proposal);
            }
        }
        Command::Map { tenant, elements } => {
            let map = engine.knowledge_map(&tenant, &elements).await?;
            if cli.json {
                print_json(&map)?;
            } else {
                println!("{}", map.headline);
                for e in &map.elements {
                    let fresh = e
                        .freshest_days
                        .map_or("-".to_string(), |d| format!("{d} days"));
                    println!(
                        "  {}: {} memories, freshest {fresh}, {} pitfalls",
                        e.element, e.memories, e.pitfalls
                    );
                }
            }
        }
        Command::Promote { tenant, id, bank } => {
            show(cli.json, &engine.promote(&tenant, id, &bank).await?)?
        }
        Command::Consolidate {
            tenant,
            banks,
            kinds,
            since,
            dry_run,
            budget,
        } => {
            let mut pass = engine.consolidate(&tenant).dry_run(dry_run);
            if let Some(budget) = budget {
                pass = pass.budget(budget);
            }
            if !banks.is_empty() {
                pass = pass.banks(banks);
            }
            if !kinds.is_empty() {
                let kinds = kinds
                    .iter()
                    .map(|k| k.parse::<Kind>())
                    .collect::<Result<Vec<_>, _>>()?;
                pass = pass.kinds(kinds);
            }
            if let Some(since) = since {
                pass = pass.since(parse_time(&since)?);
            }
            let pass = pass.execute().await?;
            if cli.json {
                print_json(&pass)?;
            } else {
                let done = if pass.dry_run { "proposed" } else { "applied" };
                println!(
                    "looked at {} memories ({} left for the next pass); {} proposals{}",
                    pass.looked_at,
                    pass.left,
                    pass.proposals.len(),
                    if pass.dry_run { " (dry run)" } else { "" }
                );
                for p in &pass.proposals {
                    let what = &p.proposal;
                    match &p.refused {
                        Some(why) => println!("  refused: {what} ({why})"),
                        None if p.pending => println!("  proposed for review: {what}"),
                        None => println!("  {done}: {what}"),
                    }
                }
            }
        }
        Command::Backfill => {
            let n = engine.backfill().await?;
            if cli.json {
                print_json(&serde_json::json!({"backfilled": n}))?;
            } else {
                println!("backfilled {n} memories");
            }
        }
        Command::Status => {
            let status = engine.status().await?;
            if cli.json {
                print_json(&status)?;
            } else {
                println!(
                    "embedder: {}\ntenants: {}\nmemories: {} ({} active)\nwithout vector: {}\npending in log: {}",
                    status.embedder.as_deref().unwrap_or("none (lexical-only)"),
                    status.tenants,
                    status.memories,
                    status.active,
                    status.without_vector,
                    status.pending_in_log
                );
                if let Some(reason) = &status.read_only {
                    println!("read-only: {reason}");
                }
            }
        }
        // Served above, before a store is opened.
        Command::Demo { .. } | Command::Mcp(_) => {}
        #[cfg(feature = "s3")]
        Command::Serve(_) => {}
    }
    // Moving the log into the tables is housekeeping, not durability (every
    // acknowledged write is in the fsynced log, replayed at the next open):
    // a store that is read-only or out of space must not turn a command
    // that did its work into a failure.
    if let Err(e) = engine.flush().await {
        tracing::warn!(error = %e, "the log stays as it is until the next open");
    }
    // A store on object storage: the next command (or another machine)
    // takes the writer's lease at once instead of after it expires.
    if location.remote.is_some()
        && let Err(e) = engine.close().await
    {
        tracing::warn!(error = %e, "the writer's lease is left to expire");
    }
    Ok(())
}

fn parse_time(text: &str) -> anyhow::Result<chrono::DateTime<chrono::Utc>> {
    Ok(chrono::DateTime::parse_from_rfc3339(text)
        .with_context(|| format!("{text:?} is not an RFC 3339 time"))?
        .to_utc())
}

fn actor_or_user(actor: Option<String>) -> String {
    actor
        .or_else(|| std::env::var("USER").ok())
        .unwrap_or_else(|| "cli".to_string())
}

fn recall_time(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_else(|| ms.to_string())
}

fn show(json: bool, m: &Memory) -> anyhow::Result<()> {
    if json {
        print_json(m)
    } else {
        print_memory(m);
        Ok(())
    }
}

/// Where an import reads from: the file, lines already imported, and
/// memories per durable call.
struct ImportSource<'a> {
    file: &'a PathBuf,
    skip: usize,
    batch: usize,
}

/// Imports a JSONL file. A line that does not parse stops the import before
/// anything is written. A call that fails stops it after the calls before
/// it, which are durable: the error names how many of the file's first
/// lines are written (`acknowledged_lines`, also printed as JSON on stdout
/// with `--json`), so `--skip` that many resumes exactly.
async fn import(
    engine: &Engine,
    tenant: &str,
    source: ImportSource<'_>,
    json: bool,
) -> anyhow::Result<()> {
    let ImportSource { file, skip, batch } = source;
    let reader = std::io::BufReader::new(
        std::fs::File::open(file).with_context(|| format!("opening {}", file.display()))?,
    );
    // The file's line number (1-based) of each memory, beside it.
    let mut line_of = Vec::new();
    let mut memories = Vec::new();
    for (n, line) in reader.lines().enumerate().skip(skip) {
        let line = line.with_context(|| format!("reading {}", file.display()))?;
        let Some(memory) = recall::parse_import_line(tenant, &line)
            .with_context(|| format!("line {}; nothing was imported", n + 1))?
        else {
            continue;
        };
        line_of.push(n + 1);
        memories.push(memory);
    }
    let bar = indicatif::ProgressBar::new(memories.len() as u64);
    if json {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let (mut stored, mut proposed, mut deduplicated) = (0usize, 0usize, 0usize);
    let total = memories.len();
    let outcome = engine
        .import(memories, batch, |outcomes| {
            for outcome in outcomes {
                match outcome {
                    Remembered::Stored { .. } => stored += 1,
                    Remembered::Proposed { .. } => proposed += 1,
                    Remembered::Deduplicated { .. } => deduplicated += 1,
                }
            }
            bar.inc(outcomes.len() as u64);
        })
        .await;
    bar.finish_and_clear();
    let written = stored + proposed + deduplicated;
    // Every line up to the last written memory's is done (blank lines
    // included); with none written, only the skipped ones.
    let acknowledged_lines = written
        .checked_sub(1)
        .and_then(|last| line_of.get(last).copied())
        .unwrap_or(skip);
    if json {
        let mut report = serde_json::json!({
            "read": total,
            "stored": stored,
            "proposed": proposed,
            "deduplicated": deduplicated,
            "acknowledged_lines": acknowledged_lines,
        });
        if let Err(e) = &outcome {
            report["error"] = serde_json::Value::String(format!("{e:#}"));
        }
        print_json(&report)?;
    }
    if let Err(e) = outcome {
        let failed_from = line_of
            .get(written)
            .copied()
            .unwrap_or(acknowledged_lines + 1);
        return Err(anyhow::Error::new(e).context(format!(
            "import stopped at the call starting at line {failed_from} of {}: \
             the first {acknowledged_lines} lines are imported ({stored} stored, \
             {proposed} proposed, {deduplicated} deduplicated); re-run with --skip \
             {acknowledged_lines} to go on",
            file.display()
        )));
    }
    if !json {
        println!(
            "imported {total} lines: {stored} stored, {proposed} proposed, {deduplicated} deduplicated"
        );
    }
    Ok(())
}
