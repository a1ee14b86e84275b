//! The MCP tools (SPEC §11): their names, descriptions and input schemas, and
//! one function, [`call`], that runs a tool against an engine under the
//! server's [`Policy`]. The tenant and the banks come from the policy, never
//! from an argument; every result is bounded so no client rejects it.
//!
//! Both the process that owns the store and the ones that forward to it
//! (`share.rs`) run tools through [`call`], so a tool behaves the same
//! whichever process a client is attached to.

use std::collections::HashSet;
use std::time::Instant;

use recall::{BankMode, Engine, Error, IndexerError, Kind, Memory, NewMemory, ReadPolicy, Trust};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use uuid::Uuid;

mod args;
mod catalogue;

use args::Args;
pub use catalogue::{catalogue, is_read_only};

/// Hits a recall returns when the client does not say.
const DEFAULT_K: usize = 8;
/// The most hits one recall returns.
const MAX_K: usize = 50;
/// Token budget of a recall's briefing when the client does not say.
const DEFAULT_BUDGET: usize = 1_500;
/// The largest budget a client may ask for: clients reject tool outputs
/// over ~25k tokens, and a recall answers with the briefing and the hits.
const MAX_BUDGET: usize = 8_000;
/// Characters of a memory's content shown in a listing (recall hits carry
/// their full text in the briefing; `get` shows all of it).
const SNIPPET_CHARS: usize = 240;
/// Entries per page of `review` and `history` when the client does not say.
const DEFAULT_PAGE: usize = 20;
/// The largest page.
const MAX_PAGE: usize = 100;

/// Who the server acts for: fixed by its configuration, never by a tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// The only tenant the server reads and writes.
    pub tenant: String,
    /// Banks recall and the other tools may read (the write bank included).
    pub read: Vec<String>,
    /// The bank `remember` and session outcomes are written to.
    pub write_bank: String,
    /// Recorded as the author of what this server remembers.
    pub agent: Option<String>,
}

impl Policy {
    /// The read policy of one call: the configured banks and the session's own bank.
    fn reads(&self, session: &str) -> ReadPolicy {
        ReadPolicy::banks(&self.read).session(session)
    }
}

/// What a tool answers: text for the model, and the same as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Output {
    /// Read by the model.
    pub text: String,
    /// Read by programs (MCP `structuredContent`).
    pub structured: Value,
}

/// Why a tool call failed. Crosses the process boundary (`share.rs`), so it
/// is plain data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct ToolError {
    /// Which kind of failure.
    pub kind: ToolErrorKind,
    /// What a model or a person reads.
    pub message: String,
}

/// The kinds of tool failure, kept apart so a client can tell its own
/// mistake from the server's trouble.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolErrorKind {
    /// No tool of that name (a protocol error, JSON-RPC -32602).
    UnknownTool,
    /// A missing, unknown or ill-typed argument, or content the engine rejects.
    InvalidArguments,
    /// The call tried to leave the server's policy (another tenant or bank).
    Refused,
    /// No such memory, or none this server may show.
    NotFound,
    /// The store failed; nothing was acknowledged.
    Failed,
    /// The process serving the store went away before answering.
    Unavailable,
}

impl ToolError {
    pub fn new(kind: ToolErrorKind, message: impl Into<String>) -> ToolError {
        ToolError {
            kind,
            message: message.into(),
        }
    }

    fn invalid(message: impl Into<String>) -> ToolError {
        ToolError::new(ToolErrorKind::InvalidArguments, message)
    }

    fn not_found(id: Uuid) -> ToolError {
        ToolError::new(
            ToolErrorKind::NotFound,
            format!("no memory {id} that this server can show"),
        )
    }
}

impl From<Error> for ToolError {
    fn from(e: Error) -> ToolError {
        let kind = match &e {
            Error::NotFound { .. } => ToolErrorKind::NotFound,
            Error::InvalidInput { .. }
            | Error::UnknownKind(_)
            | Error::ContentTooLong { .. }
            | Error::TitleTaken { .. }
            | Error::Conflict { .. } => ToolErrorKind::InvalidArguments,
            // This process no longer writes the store (on object storage
            // another took its lease over): the call can go to that one.
            Error::Storage(IndexerError::LeaseLost { .. } | IndexerError::LeaseHeld { .. }) => {
                ToolErrorKind::Unavailable
            }
            _ => ToolErrorKind::Failed,
        };
        ToolError::new(kind, e.to_string())
    }
}

/// Runs `tool` with `args` for `session` under `policy`.
pub async fn call(
    engine: &Engine,
    policy: &Policy,
    session: &str,
    tool: &str,
    args: Map<String, Value>,
) -> Result<Output, ToolError> {
    let mut args = Args::new(tool, args)?;
    let cx = &Call {
        engine,
        policy,
        session,
    };
    let out = match tool {
        "recall" => recall(cx, &mut args).await,
        "remember" => remember(cx, &mut args).await,
        "mark_used" => mark_used(cx, &mut args).await,
        "confirm" | "forget" => confirm_or_forget(cx, tool, &mut args).await,
        "supersede" => supersede(cx, &mut args).await,
        "get" => get(cx, &mut args).await,
        "history" => history(cx, &mut args).await,
        "review" => review(cx, &mut args).await,
        "consolidate" => consolidate(cx, &mut args).await,
        "end_session" => end_session(cx, &mut args).await,
        other => Err(ToolError::new(
            ToolErrorKind::UnknownTool,
            format!(
                "unknown tool `{other}`; the tools are {}",
                catalogue()
                    .iter()
                    .map(|t| t.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }?;
    Ok(out)
}

/// What every tool runs against: the engine, the server's policy and the
/// caller's session.
struct Call<'a> {
    engine: &'a Engine,
    policy: &'a Policy,
    session: &'a str,
}

/// The first `max` characters of `text` on one line, with an ellipsis when cut.
fn snippet(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        return flat;
    }
    let mut cut: String = flat.chars().take(max).collect();
    cut.push('…');
    cut
}

/// A memory as listed: enough to decide whether to `get` it.
fn summary(m: &Memory) -> Value {
    json!({
        "id": m.id,
        "kind": m.kind.as_str(),
        "title": m.title,
        "bank": m.bank,
        "elements": m.elements,
        "content": snippet(&m.content, SNIPPET_CHARS),
        "verify": m.verify,
    })
}

/// The memory `id` if this server may show it: in the tenant, in a bank the
/// policy reads, and not quarantined. Anything else reads as "not found", so
/// a client learns nothing about memories outside its policy.
async fn visible(
    engine: &Engine,
    policy: &Policy,
    session: &str,
    id: Uuid,
) -> Result<Memory, ToolError> {
    let m = engine.get(&policy.tenant, id).await.map_err(|e| match e {
        Error::NotFound { .. } => ToolError::not_found(id),
        other => other.into(),
    })?;
    if policy.reads(session).can_read(&m.bank) && m.trust != Trust::Quarantined {
        Ok(m)
    } else {
        Err(ToolError::not_found(id))
    }
}

async fn recall(cx: &Call<'_>, args: &mut Args) -> Result<Output, ToolError> {
    let query = args.required_string(&["query", "q", "text", "question"])?;
    let k = args
        .count(&["k", "limit", "top_k"], 1, MAX_K)?
        .unwrap_or(DEFAULT_K);
    let budget = args
        .count(&["budget", "max_tokens"], 50, MAX_BUDGET)?
        .unwrap_or(DEFAULT_BUDGET);
    let kinds = args
        .strings(&["kinds", "kind"])?
        .iter()
        .map(|k| k.parse::<Kind>())
        .collect::<Result<Vec<_>, _>>()?;
    let elements = args.strings(&["elements", "element"])?;
    args.finish()?;
    // The query is embedded here rather than inside the recall so the two
    // costs are reported apart (`took_ms`): the embedding is the model's
    // time, the rest is the engine's.
    let started = Instant::now();
    let vector = match cx.engine.embedder() {
        Some(embedder) => {
            let embedder = std::sync::Arc::clone(embedder);
            let text = query.clone();
            let mut vectors = tokio::task::spawn_blocking(move || embedder.embed(&[text.as_str()]))
                .await
                .map_err(|e| ToolError::new(ToolErrorKind::Failed, e.to_string()))?
                .map_err(|e| ToolError::from(Error::from(e)))?;
            vectors.pop()
        }
        None => None,
    };
    let embedded = started.elapsed();
    let mut builder = cx
        .engine
        .recall(&cx.policy.tenant, query)
        .policy(&cx.policy.reads(cx.session))
        .limit(k);
    if let Some(v) = vector {
        builder = builder.query_vector(v);
    }
    if !kinds.is_empty() {
        builder = builder.kinds(kinds);
    }
    if !elements.is_empty() {
        builder = builder.elements(elements);
    }
    // Quarantined memories never come back through MCP: the builder leaves
    // them out unless asked, and this server never asks.
    let result = builder.execute().await?;
    let recalled = started.elapsed();
    let took = |started: Instant| {
        json!({
            "embed": embedded.as_secs_f64() * 1e3,
            "recall": (recalled - embedded).as_secs_f64() * 1e3,
            "render": (started.elapsed() - recalled).as_secs_f64() * 1e3,
        })
    };
    if result.abstained || result.hits.is_empty() {
        let text = if result.unknown_names.is_empty() {
            "Nothing relevant is known.".to_string()
        } else {
            format!(
                "Nothing relevant is known: no memory mentions {}.",
                result.unknown_names.join(" or ")
            )
        };
        return Ok(Output {
            text,
            structured: json!({"abstained": true, "hits": [], "unknown_names": result.unknown_names, "candidates": result.candidates, "took_ms": took(started)}),
        });
    }
    let briefing = cx.engine.briefing(&result.hits, budget);
    // The structured hits share the budget with the briefing (about four
    // characters a token): hits past it are left out, best first kept.
    let mut room = budget.saturating_mul(4);
    let mut hits = Vec::new();
    for hit in &result.hits {
        let entry = json!({
            "id": hit.memory.id,
            "kind": hit.memory.kind.as_str(),
            "title": hit.memory.title,
            "score": hit.score,
            "relevance": hit.breakdown.rel(),
            "why": hit.breakdown.explain().replace("\n  ", "; "),
            "via": hit.via,
            "verify": hit.memory.verify,
        });
        let size = entry.to_string().len();
        if size > room {
            break;
        }
        room -= size;
        hits.push(entry);
    }
    let mut text = briefing.clone();
    text.push_str("\n\nIds, best first: ");
    text.push_str(
        &hits
            .iter()
            .filter_map(|h| h["id"].as_str().map(str::to_string))
            .collect::<Vec<_>>()
            .join(", "),
    );
    Ok(Output {
        text,
        structured: json!({
            "abstained": false,
            "briefing": briefing,
            "hits": hits,
            "candidates": result.candidates,
            "took_ms": took(started),
        }),
    })
}

async fn remember(cx: &Call<'_>, args: &mut Args) -> Result<Output, ToolError> {
    let content = args.required_string(&["content", "text", "memory"])?;
    let kind: Kind = args
        .string(&["kind", "type"])?
        .as_deref()
        .unwrap_or("note")
        .parse()?;
    let title = args.string(&["title"])?;
    let elements = args.strings(&["elements", "element"])?;
    let supersedes = args.string(&["supersedes"])?;
    args.finish()?;
    if let Some(target) = &supersedes {
        // Superseding by id reaches only memories this server may show.
        if let Ok(id) = Uuid::parse_str(target) {
            visible(cx.engine, cx.policy, cx.session, id).await?;
        }
    }
    let mut memory = NewMemory::new(&cx.policy.tenant, &cx.policy.write_bank, kind, content);
    memory.title = title;
    memory.elements = elements;
    memory.supersedes = supersedes;
    memory.agent = cx.policy.agent.clone();
    memory.session_id = Some(cx.session.to_string());
    let outcome = cx.engine.remember(memory).await?;
    let text = match &outcome {
        recall::Remembered::Stored {
            id,
            similar_to,
            quarantined,
            redactions,
        }
        | recall::Remembered::Proposed {
            id,
            similar_to,
            quarantined,
            redactions,
            ..
        } => {
            let mut lines = vec![match &outcome {
                recall::Remembered::Proposed { .. } => format!(
                    "Proposed {id}: the bank {} takes an agent's writes as proposals, so it will not be recalled until a person accepts it (`recall accept`). review lists your pending proposals; proposing the same thing again confirms this one.",
                    cx.policy.write_bank
                ),
                _ => format!("Stored {id}."),
            }];
            if !redactions.is_empty() {
                lines.push(format!(
                    "Redacted before storing: {}.",
                    redactions
                        .iter()
                        .map(|(k, n)| format!("{n} {k}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            if let Some(rule) = quarantined {
                lines.push(format!(
                    "Held for review ({rule}): it will not be recalled until a person releases it."
                ));
            }
            for s in similar_to {
                lines.push(format!(
                    "Similar to {}{} (cosine {:.2}): if the new memory replaces it, call supersede with old={} new={id}.",
                    s.id,
                    s.title
                        .as_deref()
                        .map(|t| format!(" «{t}»"))
                        .unwrap_or_default(),
                    s.cosine,
                    s.id
                ));
            }
            lines.join("\n")
        }
        recall::Remembered::Deduplicated { id, cosine } => format!(
            "Already known as {id} (cosine {cosine:.2}): confirmed it instead of storing a copy."
        ),
    };
    let structured = serde_json::to_value(&outcome)
        .map_err(|e| ToolError::new(ToolErrorKind::Failed, e.to_string()))?;
    Ok(Output { text, structured })
}

async fn mark_used(cx: &Call<'_>, args: &mut Args) -> Result<Output, ToolError> {
    let ids = args.ids(&["ids", "id", "used"])?;
    args.finish()?;
    if ids.is_empty() {
        return Err(ToolError::invalid("`ids` must name at least one memory"));
    }
    for id in &ids {
        visible(cx.engine, cx.policy, cx.session, *id).await?;
    }
    let cited = cx
        .engine
        .mark_used(&cx.policy.tenant, cx.session, &ids)
        .await?;
    let mut text = format!("Marked {} as used.", cited.cited.len());
    if !cited.not_dealt.is_empty() {
        text.push_str(&format!(
            " Not recalled in this session, so not counted: {}.",
            cited
                .not_dealt
                .iter()
                .map(Uuid::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(Output {
        text,
        structured: json!({"cited": cited.cited, "not_dealt": cited.not_dealt}),
    })
}

/// Refuses to let the agent take `m` out of recall itself when its bank
/// takes proposals: a write there waits for a person, so a forget or a
/// supersession there would be a way around the review. Confirming it, or
/// proposing a replacement (`remember` with `supersedes`), stays open.
fn may_retire(cx: &Call<'_>, m: &Memory, tool: &str) -> Result<(), ToolError> {
    match cx.engine.config().proposals.mode(&m.bank, Trust::Agent) {
        BankMode::Direct => Ok(()),
        BankMode::Propose => Err(ToolError::new(
            ToolErrorKind::Refused,
            format!(
                "{} is in bank {}, where an agent's writes wait for a person's review:                  {tool} cannot take it out of recall. To replace it, call remember with                  supersedes={}: that is stored as a proposal a person accepts.",
                m.id, m.bank, m.id
            ),
        )),
    }
}

async fn confirm_or_forget(
    cx: &Call<'_>,
    tool: &str,
    args: &mut Args,
) -> Result<Output, ToolError> {
    let id = args.id(&["id", "memory_id"])?;
    args.finish()?;
    let memory = visible(cx.engine, cx.policy, cx.session, id).await?;
    if tool == "forget" {
        may_retire(cx, &memory, tool)?;
    }
    let (m, done) = if tool == "confirm" {
        (cx.engine.confirm(&cx.policy.tenant, id).await?, "Confirmed")
    } else {
        (cx.engine.forget(&cx.policy.tenant, id).await?, "Forgot")
    };
    Ok(Output {
        text: format!("{done} {id}."),
        structured: summary(&m),
    })
}

async fn supersede(cx: &Call<'_>, args: &mut Args) -> Result<Output, ToolError> {
    let old = args.id(&["old", "old_id"])?;
    let new = args.id(&["new", "new_id"])?;
    args.finish()?;
    let retired = visible(cx.engine, cx.policy, cx.session, old).await?;
    visible(cx.engine, cx.policy, cx.session, new).await?;
    may_retire(cx, &retired, "supersede")?;
    let m = cx.engine.supersede(&cx.policy.tenant, old, new).await?;
    Ok(Output {
        text: format!("{new} now replaces {old}."),
        structured: summary(&m),
    })
}

async fn get(cx: &Call<'_>, args: &mut Args) -> Result<Output, ToolError> {
    let id = args.id(&["id", "memory_id"])?;
    args.finish()?;
    let m = visible(cx.engine, cx.policy, cx.session, id).await?;
    let structured = json!({
        "id": m.id,
        "kind": m.kind.as_str(),
        "title": m.title,
        "bank": m.bank,
        "content": m.content,
        "elements": m.elements,
        "source": m.source.to_string(),
        "agent": m.agent,
        "confidence": m.confidence,
        "observed_at": m.observed_at,
        "last_confirmed_at": m.last_confirmed_at,
        "confirmations": m.confirmations,
        "impressions": m.impressions,
        "citations": m.citations,
        "supersedes": m.supersedes,
        "superseded_by": m.superseded_by,
        "forgotten": m.forgotten,
        "verify": m.verify,
    });
    let state = if m.forgotten {
        " (forgotten)"
    } else if m.superseded_by.is_some() {
        " (superseded)"
    } else {
        ""
    };
    Ok(Output {
        text: format!(
            "{} [{}]{}{state}: {}",
            m.id,
            m.kind,
            m.title
                .as_deref()
                .map(|t| format!(" «{t}»"))
                .unwrap_or_default(),
            m.content
        ),
        structured,
    })
}

async fn history(cx: &Call<'_>, args: &mut Args) -> Result<Output, ToolError> {
    let id = args.id(&["id", "memory_id"])?;
    args.finish()?;
    visible(cx.engine, cx.policy, cx.session, id).await?;
    let reads = cx.policy.reads(cx.session);
    let chain: Vec<Memory> = cx
        .engine
        .history(&cx.policy.tenant, id)
        .await?
        .into_iter()
        .filter(|m| reads.can_read(&m.bank) && m.trust != Trust::Quarantined)
        .collect();
    let shown: Vec<&Memory> = chain.iter().rev().take(MAX_PAGE).rev().collect();
    let text = shown
        .iter()
        .map(|m| {
            let mark = if m.id == id { " ← this one" } else { "" };
            format!("{} [{}]{mark}: {}", m.id, m.kind, snippet(&m.content, 120))
        })
        .collect::<Vec<_>>()
        .join("\n");
    Ok(Output {
        text,
        structured: json!({
            "versions": shown.iter().map(|m| summary(m)).collect::<Vec<_>>(),
            "omitted_older": chain.len() - shown.len(),
        }),
    })
}

async fn review(cx: &Call<'_>, args: &mut Args) -> Result<Output, ToolError> {
    let cursor = args.string(&["cursor"])?;
    let limit = args
        .count(&["limit", "k"], 1, MAX_PAGE)?
        .unwrap_or(DEFAULT_PAGE);
    args.finish()?;
    let start = match cursor {
        None => 0,
        Some(c) => c
            .parse::<usize>()
            .map_err(|_| ToolError::invalid("`cursor` must be a next_cursor from review"))?,
    };
    let queue = cx.engine.review_queue(&cx.policy.tenant).await?;
    let reads = cx.policy.reads(cx.session);
    let shown = |m: &Memory| reads.can_read(&m.bank) && m.trust != Trust::Quarantined;
    let mut items = Vec::new();
    let mut push = |why: &str, m: &Memory, extra: Value| {
        if shown(m) {
            let mut entry = summary(m);
            entry["why"] = Value::String(why.to_string());
            if let (Value::Object(e), Value::Object(x)) = (&mut entry, extra) {
                e.extend(x);
            }
            items.push(entry);
        }
    };
    for i in &queue.ignored {
        push(
            "recalled often, never used",
            &i.memory,
            json!({"impressions": i.impressions}),
        );
    }
    for m in &queue.drifted {
        push("its element changed since it was confirmed", m, json!({}));
    }
    for m in &queue.low_confidence {
        push("inferred, confidence below the recall floor", m, json!({}));
    }
    for m in &queue.session_ended {
        push("left in an ended session's bank", m, json!({}));
    }
    for p in &queue.similar {
        if shown(&p.older) {
            push(
                "similar to a newer memory: supersede or keep both",
                &p.newer,
                json!({"older": p.older.id, "cosine": p.cosine}),
            );
        }
    }
    for p in &queue.proposals {
        let against = p.against.as_ref().filter(|m| shown(m));
        push(
            "a pending proposal: waits for a person to accept or reject it",
            &p.memory,
            json!({
                "against": against.map(|m| m.id),
                "diff": against.and(p.diff.as_deref()),
            }),
        );
    }
    // Quarantined memories are counted, never shown: their text tried to
    // instruct an agent, and this is an agent.
    let held = queue.quarantined.len();
    let total = items.len();
    let page: Vec<Value> = items.into_iter().skip(start).take(limit).collect();
    let next = (start + page.len() < total).then(|| (start + page.len()).to_string());
    let mut text = if total == 0 {
        "Nothing needs review.".to_string()
    } else {
        page.iter()
            .map(|e| {
                format!(
                    "{} [{}] {}: {}",
                    e["id"].as_str().unwrap_or_default(),
                    e["kind"].as_str().unwrap_or_default(),
                    e["why"].as_str().unwrap_or_default(),
                    e["content"].as_str().unwrap_or_default()
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    if held > 0 {
        text.push_str(&format!(
            "\n{held} held by the injection screen await a person (`recall review`)."
        ));
    }
    Ok(Output {
        text,
        structured: json!({
            "items": page,
            "total": total,
            "next_cursor": next,
            "quarantined_held": held,
        }),
    })
}

async fn consolidate(cx: &Call<'_>, args: &mut Args) -> Result<Output, ToolError> {
    let dry_run = args.flag(&["dry_run", "dry-run"])?.unwrap_or(false);
    args.finish()?;
    // The banks this server reads that every session shares: a session's
    // own bank ends with the session.
    let banks: Vec<&String> = cx
        .policy
        .read
        .iter()
        .filter(|b| !b.starts_with("session:"))
        .collect();
    let pass = cx
        .engine
        .consolidate(&cx.policy.tenant)
        .banks(banks)
        .dry_run(dry_run)
        .execute()
        .await?;
    let lines: Vec<String> = pass
        .proposals
        .iter()
        .map(|p| {
            let what = &p.proposal;
            let state = match (&p.refused, p.pending, p.applied) {
                (Some(why), _, _) => format!("refused ({why})"),
                (None, true, _) => "waits for a person to accept it".to_string(),
                (None, false, true) => "applied".to_string(),
                (None, false, false) => "would apply".to_string(),
            };
            format!("{what}: {state}")
        })
        .collect();
    let text = if lines.is_empty() {
        format!(
            "Looked at {} memories; nothing to consolidate.",
            pass.looked_at
        )
    } else {
        format!(
            "Looked at {} memories{}:\n{}",
            pass.looked_at,
            if pass.dry_run { " (dry run)" } else { "" },
            lines.join("\n")
        )
    };
    let structured = serde_json::to_value(&pass)
        .map_err(|e| ToolError::new(ToolErrorKind::Failed, e.to_string()))?;
    Ok(Output { text, structured })
}

async fn end_session(cx: &Call<'_>, args: &mut Args) -> Result<Output, ToolError> {
    let outcome = args.string(&["outcome", "summary"])?;
    let elements = args.strings(&["elements", "element"])?;
    let used = args.ids(&["used", "ids"])?;
    args.finish()?;
    let used_unique: Vec<Uuid> = {
        let mut seen = HashSet::new();
        used.into_iter().filter(|id| seen.insert(*id)).collect()
    };
    for id in &used_unique {
        visible(cx.engine, cx.policy, cx.session, *id).await?;
    }
    let mut end = cx
        .engine
        .end_session(&cx.policy.tenant, cx.session)
        .used(used_unique)
        .bank(&cx.policy.write_bank);
    if let Some(text) = outcome {
        end = end.outcome(text);
    }
    for e in elements {
        end = end.element(e);
    }
    let ended = end.execute().await?;
    let mut text = format!("Session {} ended.", cx.session);
    if !ended.cited.is_empty() {
        text.push_str(&format!(" {} memories marked used.", ended.cited.len()));
    }
    if let Some(o) = &ended.outcome {
        text.push_str(&format!(" Outcome stored as {}.", o.id()));
    }
    Ok(Output {
        text,
        structured: json!({
            "session": cx.session,
            "cited": ended.cited,
            "not_dealt": ended.not_dealt,
            "outcome": ended.outcome,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use recall::{Config, ModelSource};

    fn policy() -> Policy {
        Policy {
            tenant: "acme".into(),
            read: vec!["org".into()],
            write_bank: "org".into(),
            agent: Some("test-agent".into()),
        }
    }

    fn args(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    async fn engine(dir: &std::path::Path) -> Engine {
        // `org` takes the test agent's writes directly here; the default
        // (proposals) is tested end to end (tests/mcp/e2e.py).
        let config = Config::new(dir)
            .model(ModelSource::None)
            .proposals(recall::ProposalPolicy::direct());
        match Engine::open(config).await {
            Ok(e) => e,
            Err(e) => panic!("open: {e}"),
        }
    }

    /// Acme's store is still empty: a refused call wrote nothing.
    async fn nothing_stored(engine: &Engine) -> bool {
        engine.list("acme", None).await.unwrap().is_empty()
    }

    #[test]
    fn every_schema_is_an_object_with_known_required_fields() {
        for tool in catalogue() {
            assert_eq!(tool.schema["type"], "object", "{}", tool.name);
            let props = tool.schema["properties"].as_object().map(|p| p.len());
            assert!(props.is_some(), "{} has properties", tool.name);
            for r in tool.schema["required"].as_array().into_iter().flatten() {
                let r = r.as_str().unwrap_or_default();
                assert!(
                    tool.schema["properties"].get(r).is_some(),
                    "{}: required `{r}` is a property",
                    tool.name
                );
            }
        }
    }

    #[tokio::test]
    async fn arguments_outside_the_policy_are_refused_and_write_nothing() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let engine = engine(dir.path()).await;
        for field in ["tenant", "bank", "read", "session"] {
            let err = call(
                &engine,
                &policy(),
                "s1",
                "remember",
                args(json!({"content": "Ports below 1024 need root", field: "other"})),
            )
            .await
            .err();
            assert_eq!(err.map(|e| e.kind), Some(ToolErrorKind::Refused), "{field}");
        }
        let other = Policy {
            tenant: "other".into(),
            ..policy()
        };
        assert!(nothing_stored(&engine).await);
        // Another tenant's server cannot see or touch acme's memories by id.
        let stored = call(
            &engine,
            &policy(),
            "s1",
            "remember",
            args(json!({"content": "Ports below 1024 need root"})),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        let id = stored.structured["id"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        for tool in ["get", "confirm", "forget", "history"] {
            let err = call(&engine, &other, "s2", tool, args(json!({"id": id})))
                .await
                .err();
            assert_eq!(err.map(|e| e.kind), Some(ToolErrorKind::NotFound), "{tool}");
        }
        let m = engine
            .get("acme", Uuid::parse_str(&id).unwrap_or_default())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((m.confirmations, m.forgotten), (0, false));
    }

    #[tokio::test]
    async fn bad_arguments_get_typed_errors() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let engine = engine(dir.path()).await;
        let p = policy();
        let cases = [
            ("remember", json!({})),
            ("remember", json!({"content": 42})),
            ("remember", json!({"content": "x", "kind": "rumour"})),
            ("remember", json!({"content": "x", "colour": "red"})),
            ("remember", json!({"content": "x", "text": "y"})),
            ("remember", json!({"content": "x".repeat(100_000)})),
            ("recall", json!({"query": "x", "k": 0})),
            ("recall", json!({"query": "x", "k": "many"})),
            ("get", json!({"id": "not-a-uuid"})),
            ("review", json!({"cursor": "page two"})),
        ];
        for (tool, a) in cases {
            let err = call(&engine, &p, "s1", tool, args(a.clone())).await.err();
            assert_eq!(
                err.map(|e| e.kind),
                Some(ToolErrorKind::InvalidArguments),
                "{tool} {a}"
            );
        }
        let err = call(&engine, &p, "s1", "drop_tables", Map::new())
            .await
            .err();
        assert_eq!(err.map(|e| e.kind), Some(ToolErrorKind::UnknownTool));
        assert!(nothing_stored(&engine).await);
    }

    #[tokio::test]
    async fn aliases_and_a_session_round_trip() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let engine = engine(dir.path()).await;
        let p = policy();
        let stored = call(
            &engine,
            &p,
            "s1",
            "remember",
            args(json!({"text": "Nightly deploys freeze at 18:00 UTC", "kind": "convention", "element": "deploy"})),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(stored.structured["outcome"], "stored");
        let id = stored.structured["id"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let found = call(
            &engine,
            &p,
            "s1",
            "recall",
            args(json!({"q": "deploy freeze", "limit": "3"})),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(found.structured["hits"][0]["id"], id.as_str());
        let used = call(&engine, &p, "s1", "mark_used", args(json!({"id": id})))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(used.structured["cited"][0], id.as_str());
        let ended = call(
            &engine,
            &p,
            "s1",
            "end_session",
            args(json!({"used": [id]})),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ended.structured["session"], "s1");
        let m = engine
            .get("acme", Uuid::parse_str(&id).unwrap_or_default())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((m.citations, m.agent.as_deref()), (1, Some("test-agent")));
    }
}
