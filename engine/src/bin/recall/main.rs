//! `recall`: the command-line face of the engine. Errors go to stderr with a
//! non-zero exit; `--json` prints machine-readable output everywhere.

mod cli;
mod demo;
mod import;
mod location;
mod mcp;
mod print;
#[cfg(feature = "s3")]
mod serve;

use anyhow::{Context, bail};
use clap::Parser;
use cli::{Cli, Command};
use import::{ImportSource, import};
use print::{print_json, print_memory, print_proposal, print_recall, recall_time, show};
use recall::{Engine, EraseScope, Kind, NewMemory, ProposalPolicy, Remembered, Source, Trust};

/// A bulk import allocates and frees millions of small strings and vectors:
/// see `recall::allocator` (bench/README.md, `scale`, gives the runs).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: recall::allocator::MiMalloc = recall::allocator::MiMalloc;

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
