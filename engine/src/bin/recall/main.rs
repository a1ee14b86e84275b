//! `recall`: the command-line face of the engine. Errors go to stderr with a
//! non-zero exit; `--json` prints machine-readable output everywhere.

mod demo;

use std::io::BufRead;
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use recall::{Config, Engine, Kind, Memory, NewMemory, RecallResult, Remembered, Source};
use uuid::Uuid;

#[derive(Parser)]
#[command(
    name = "recall",
    version,
    about = "Semantic recall for AI agents' long-term memory"
)]
struct Cli {
    /// Data directory.
    #[arg(long, global = true, default_value = "./recall-data")]
    data: PathBuf,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
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
    /// Bulk import a JSONL file (one memory per line: bank, kind, content, and optional fields).
    Import {
        #[arg(long)]
        tenant: String,
        file: PathBuf,
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
    /// Counts and the embedder in use.
    Status,
    /// Run the demo on a fresh data directory.
    Demo {
        /// Keep the demo's data in this directory instead of a temporary one.
        #[arg(long)]
        keep: Option<PathBuf>,
    },
}

#[tokio::main]
async fn main() {
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
        ""
    };
    println!(
        "{} [{}] {}{}{}: {}",
        m.id, m.kind, m.bank, title, status, m.content
    );
}

pub(crate) fn print_recall(result: &RecallResult) {
    if result.abstained {
        println!(
            "(abstained: nothing relevant enough among {} candidates)",
            result.candidates
        );
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
    if let Command::Demo { keep } = &cli.command {
        return demo::run(keep.clone(), cli.json).await;
    }
    let engine = Engine::open(Config::new(&cli.data))
        .await
        .with_context(|| format!("opening {}", cli.data.display()))?;
    match cli.command {
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
            text,
        } => {
            let kind: Kind = kind.parse()?;
            let source: Source = source.parse()?;
            let mut memory = NewMemory::new(tenant, bank, kind, text);
            memory.title = title;
            memory.elements = elements;
            memory.source = source;
            memory.confidence = confidence.unwrap_or(1.0);
            memory.supersedes = supersedes;
            if let Some(at) = observed_at {
                memory.observed_at = Some(
                    chrono::DateTime::parse_from_rfc3339(&at)
                        .with_context(|| format!("--observed-at {at:?} is not RFC 3339"))?
                        .to_utc(),
                );
            }
            let outcome = engine.remember(memory).await?;
            if cli.json {
                print_json(&outcome)?;
            } else {
                match outcome {
                    Remembered::Stored { id, similar_to } => {
                        println!("stored {id}");
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
        Command::Import { tenant, file } => import(&engine, &tenant, &file, cli.json).await?,
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
            }
        }
        Command::Demo { .. } => unreachable!("handled above"),
    }
    engine.flush().await?;
    Ok(())
}

fn show(json: bool, m: &Memory) -> anyhow::Result<()> {
    if json {
        print_json(m)
    } else {
        print_memory(m);
        Ok(())
    }
}

async fn import(engine: &Engine, tenant: &str, file: &PathBuf, json: bool) -> anyhow::Result<()> {
    const BATCH: usize = 1000;
    let reader = std::io::BufReader::new(
        std::fs::File::open(file).with_context(|| format!("opening {}", file.display()))?,
    );
    let mut lines = Vec::new();
    for (n, line) in reader.lines().enumerate() {
        let line = line.with_context(|| format!("reading {}", file.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let mut value: serde_json::Value =
            serde_json::from_str(&line).with_context(|| format!("line {}: not JSON", n + 1))?;
        let Some(object) = value.as_object_mut() else {
            bail!("line {}: expected a JSON object", n + 1);
        };
        object.insert(
            "tenant".into(),
            serde_json::Value::String(tenant.to_string()),
        );
        let memory: NewMemory = serde_json::from_value(value)
            .with_context(|| format!("line {}: not a memory", n + 1))?;
        lines.push(memory);
    }
    let bar = indicatif::ProgressBar::new(lines.len() as u64);
    if json {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let (mut stored, mut deduplicated) = (0usize, 0usize);
    let total = lines.len();
    let mut iter = lines.into_iter().peekable();
    while iter.peek().is_some() {
        let batch: Vec<NewMemory> = iter.by_ref().take(BATCH).collect();
        let n = batch.len();
        for outcome in engine.remember_many(batch).await? {
            match outcome {
                Remembered::Stored { .. } => stored += 1,
                Remembered::Deduplicated { .. } => deduplicated += 1,
            }
        }
        bar.inc(n as u64);
    }
    bar.finish_and_clear();
    if json {
        print_json(
            &serde_json::json!({"read": total, "stored": stored, "deduplicated": deduplicated}),
        )?;
    } else {
        println!("imported {total} lines: {stored} stored, {deduplicated} deduplicated");
    }
    Ok(())
}
