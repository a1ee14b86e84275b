//! The tools as clients list them: names, descriptions, input schemas and
//! which of them change nothing.

use serde_json::{Value, json};

use super::{DEFAULT_BUDGET, DEFAULT_K, DEFAULT_PAGE, MAX_BUDGET, MAX_K, MAX_PAGE};

/// One tool as listed to clients.
pub struct ToolSpec {
    pub name: &'static str,
    pub description: &'static str,
    /// Its JSON Schema (an object schema).
    pub schema: Value,
    /// It changes nothing: safe to retry when the serving process changes.
    pub read_only: bool,
}

/// Every tool, in the order clients list them.
pub fn catalogue() -> Vec<ToolSpec> {
    let id = json!({"type": "string", "description": "A memory id (a UUID, as returned by remember or recall)."});
    let ids = json!({"type": "array", "items": {"type": "string"}, "description": "Memory ids (UUIDs). Also accepted as `id` (one) or `used`."});
    let elements = json!({"type": "array", "items": {"type": "string"}, "description": "Code elements or topics it is about (e.g. a service, module or file). Also accepted as `element` (one)."});
    vec![
        ToolSpec {
            name: "recall",
            description: "Ask long-term memory what matters now. Call at the start of a task and before decisions that earlier sessions may have learned about (pitfalls, conventions, preferences, past outcomes). Returns a briefing to read, plus hits with ids, scores and why they ranked; an empty result means nothing relevant is known. Afterwards, call mark_used with the ids you actually relied on.",
            schema: json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What you want to know, in plain words. Also accepted as `q`, `text` or `question`."},
                    "k": {"type": "integer", "minimum": 1, "maximum": MAX_K, "description": format!("Most hits to return (default {DEFAULT_K}). Also accepted as `limit` or `top_k`.")},
                    "budget": {"type": "integer", "minimum": 50, "maximum": MAX_BUDGET, "description": format!("Token budget of the briefing (default {DEFAULT_BUDGET}). Also accepted as `max_tokens`.")},
                    "kinds": {"type": "array", "items": {"type": "string", "enum": KINDS}, "description": "Only these kinds."},
                    "elements": elements.clone()
                },
                "required": ["query"]
            }),
            read_only: false,
        },
        ToolSpec {
            name: "remember",
            description: "Save something worth knowing in later sessions: a pitfall hit, a convention, a stated preference, a fact, or what a session achieved. One idea per memory, a sentence or three, specific. A near copy of an existing memory confirms it instead of adding another; a close but different one is stored and returned in similar_to so you can supersede it. In a shared bank (a repository's or the organisation's) it is stored as a proposal that a person accepts before it is recalled. Returns only once the memory is durable.",
            schema: json!({
                "type": "object",
                "properties": {
                    "content": {"type": "string", "description": "The memory itself. Also accepted as `text` or `memory`."},
                    "kind": {"type": "string", "enum": KINDS, "description": "What sort of memory (default note). Pitfalls rank first among relevant memories."},
                    "title": {"type": "string", "description": "A short unique name, usable in [[title]] links and in supersedes."},
                    "elements": elements.clone(),
                    "supersedes": {"type": "string", "description": "Id or title of a memory this one replaces (it leaves recall; history keeps it)."}
                },
                "required": ["content"]
            }),
            read_only: false,
        },
        ToolSpec {
            name: "mark_used",
            description: "Tell memory which recalled memories you actually relied on. Used memories rank higher later; memories recalled again and again but never used are sent to review. Call after acting on a recall.",
            schema: json!({
                "type": "object",
                "properties": {"ids": ids.clone()},
                "required": ["ids"]
            }),
            read_only: false,
        },
        ToolSpec {
            name: "confirm",
            description: "Confirm that a memory is still true (you checked it). Clears a VERIFY warning and keeps it fresh.",
            schema: json!({"type": "object", "properties": {"id": id.clone()}, "required": ["id"]}),
            read_only: false,
        },
        ToolSpec {
            name: "forget",
            description: "Retire a memory that is wrong or no longer applies. It leaves recall; history and review keep it. Refused for a memory of a shared bank that holds your writes for review: remember the correction with supersedes instead, which a person accepts.",
            schema: json!({"type": "object", "properties": {"id": id.clone()}, "required": ["id"]}),
            read_only: false,
        },
        ToolSpec {
            name: "supersede",
            description: "Say that memory `new` replaces memory `old` (e.g. after remember returned similar_to). The old one leaves recall; history shows the chain. Refused when `old` is in a shared bank that holds your writes for review: remember the replacement with supersedes instead.",
            schema: json!({
                "type": "object",
                "properties": {
                    "old": {"type": "string", "description": "Id of the memory replaced. Also accepted as `old_id`."},
                    "new": {"type": "string", "description": "Id of the memory that replaces it. Also accepted as `new_id`."}
                },
                "required": ["old", "new"]
            }),
            read_only: false,
        },
        ToolSpec {
            name: "get",
            description: "Show one memory in full, with its counts and state.",
            schema: json!({"type": "object", "properties": {"id": id.clone()}, "required": ["id"]}),
            read_only: true,
        },
        ToolSpec {
            name: "history",
            description: "Show a memory's supersession chain, oldest first: what it replaced and what replaced it.",
            schema: json!({"type": "object", "properties": {"id": id}, "required": ["id"]}),
            read_only: true,
        },
        ToolSpec {
            name: "review",
            description: "List memories that need a look: recalled often but never used, flagged by drift, low confidence, similar pairs that may be versions of each other, expired session memories, and pending proposals (writes waiting for a person to accept them, yours included, with a diff against what they would replace). Paginated: pass next_cursor back as cursor.",
            schema: json!({
                "type": "object",
                "properties": {
                    "cursor": {"type": "string", "description": "From the previous page's next_cursor."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE, "description": format!("Entries per page (default {DEFAULT_PAGE}).")}
                }
            }),
            read_only: true,
        },
        ToolSpec {
            name: "consolidate",
            description: "Tidy long-term memory in the banks this server reads: fold near copies into the oldest, turn an episode repeated across sessions into a fact, and propose that a newer memory which reads as a change (\"no longer\", \"switched to\", \"now\") supersede the older one. Supersessions, and facts for a shared bank, wait for a person to accept them. Deletes nothing. With dry_run, only says what it would do.",
            schema: json!({
                "type": "object",
                "properties": {
                    "dry_run": {"type": "boolean", "description": "Only list the proposals; write nothing (default false)."}
                }
            }),
            read_only: false,
        },
        ToolSpec {
            name: "end_session",
            description: "End this working session: optionally record what it achieved (one session_outcome memory) and the ids it used. Call when a task is done. A new session starts for later calls; disconnecting ends the session too.",
            schema: json!({
                "type": "object",
                "properties": {
                    "outcome": {"type": "string", "description": "What the session achieved or learned, in a sentence or two."},
                    "elements": elements,
                    "used": {"type": "array", "items": {"type": "string"}, "description": "Ids of memories the session relied on (as mark_used)."}
                }
            }),
            read_only: false,
        },
    ]
}

const KINDS: [&str; 7] = [
    "pitfall",
    "convention",
    "note",
    "session_outcome",
    "preference",
    "fact",
    "episode",
];

/// Whether `tool` changes nothing (unknown tools count as read-only: they
/// are refused before anything happens).
pub fn is_read_only(tool: &str) -> bool {
    catalogue()
        .iter()
        .find(|t| t.name == tool)
        .is_none_or(|t| t.read_only)
}
