//! A consolidation decided by a language model the user plugs in: the
//! engine calls no network model by itself and holds no HTTP client. The
//! user's [`LanguageModel`] answers one request (a documented prompt and
//! the JSON schema its answer must match); [`ModelConsolidator`] builds the
//! request from a batch and reads the answer into typed [`Proposal`]s. The
//! pass then checks and applies them like the default's: an answer that is
//! not JSON of the schema applies nothing ([`Error::Model`]), and proposals
//! that name memories outside the batch (invented, or another tenant's) or
//! join banks are refused one by one.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{ConsolidationBatch, Proposal};
use crate::error::{Error, Result};

/// A boxed future, as [`LanguageModel::complete`] returns it.
pub type ModelFuture<'a> =
    Pin<Box<dyn Future<Output = std::result::Result<String, String>> + Send + 'a>>;

/// What a [`LanguageModel`] is asked.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelRequest {
    /// The instructions ([`ModelConsolidator::SYSTEM`]).
    pub system: String,
    /// The batch, as JSON text.
    pub prompt: String,
    /// The JSON schema the answer must match (for endpoints that enforce
    /// one, e.g. an OpenAI-compatible `response_format`).
    pub schema: Value,
}

/// A language model behind one call: answer `request` with the text of a
/// JSON value matching `request.schema`, or say why not. Implement it over
/// any endpoint (`engine/examples/model_consolidation.rs` wires an
/// OpenAI-compatible one).
///
/// ```
/// use recall::{LanguageModel, ModelFuture, ModelRequest};
/// /// Always proposes nothing.
/// struct Quiet;
/// impl LanguageModel for Quiet {
///     fn complete<'a>(&'a self, _request: &'a ModelRequest) -> ModelFuture<'a> {
///         Box::pin(async { Ok(r#"{"proposals": []}"#.to_string()) })
///     }
/// }
/// ```
pub trait LanguageModel: Send + Sync {
    /// The model's answer to `request`: the text of a JSON value, or why
    /// the model could not answer.
    fn complete<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a>;
}

/// Asks a [`LanguageModel`] what a batch should become
/// ([`crate::Consolidate::model`]).
#[derive(Clone)]
pub struct ModelConsolidator {
    model: Arc<dyn LanguageModel>,
}

/// The answer's shape; anything else is refused whole.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Answer {
    proposals: Vec<Proposal>,
}

/// One memory as the prompt shows it.
#[derive(Serialize)]
struct Shown<'a> {
    id: uuid::Uuid,
    bank: &'a str,
    kind: crate::Kind,
    created_at: chrono::DateTime<chrono::Utc>,
    session: Option<&'a str>,
    elements: &'a [String],
    content: &'a str,
}

impl ModelConsolidator {
    /// The instructions every request carries.
    pub const SYSTEM: &'static str = "You consolidate an AI agent's long-term memory. \
You are given memories (id, bank, kind, when written, session, elements, content) and pairs \
of them with their cosine similarity. Propose only what the memories support:\n\
- fold: memories that say the same thing (same bank and kind) fold into the oldest: \
{\"kind\":\"fold\",\"into\":ID,\"copies\":[ID,...]};\n\
- add: a memory made from several others (e.g. an episode repeated across sessions \
becomes a fact), quoting or summarising them, in their bank: \
{\"kind\":\"add\",\"derived_from\":[ID,...],\"memory_kind\":\"fact\",\"content\":TEXT,\"elements\":[...]};\n\
- replace: several memories that say one thing (or one whose wording should change) are \
replaced by one new memory in their bank: \
{\"kind\":\"replace\",\"old\":[ID,...],\"memory_kind\":\"fact\",\"content\":TEXT,\"elements\":[...]};\n\
- confirm: memories that show an older one still holds confirm it: \
{\"kind\":\"confirm\",\"id\":ID,\"evidence\":[ID,...]};\n\
- link: two memories that belong together (one explains or depends on the other): \
{\"kind\":\"link\",\"a\":ID,\"b\":ID};\n\
- supersede: a newer memory that changes what an older one says replaces it (a person \
reviews it first): {\"kind\":\"supersede\",\"old\":ID,\"by\":ID};\n\
- nothing, with a reason: {\"kind\":\"nothing\",\"reason\":TEXT}.\n\
Use only the ids given; never join memories of different banks; never delete. \
Answer with one JSON object {\"proposals\": [...]} and nothing else.";

    /// A consolidator asking `model`.
    pub fn new(model: Arc<dyn LanguageModel>) -> ModelConsolidator {
        ModelConsolidator { model }
    }

    /// The request for `batch`: the instructions, the batch as JSON (its
    /// memories and pairs, in the batch's order) and the answer's schema.
    /// Deterministic: the same batch gives the same request.
    pub fn request(batch: &ConsolidationBatch) -> ModelRequest {
        let memories: Vec<Shown> = batch
            .memories
            .iter()
            .map(|m| Shown {
                id: m.id,
                bank: &m.bank,
                kind: m.kind,
                created_at: m.created_at,
                session: m.session_id.as_deref(),
                elements: &m.elements,
                content: &m.content,
            })
            .collect();
        let prompt = json!({
            "tenant": batch.tenant,
            "now": batch.now,
            "memories": memories,
            "pairs": batch.pairs,
        });
        ModelRequest {
            system: Self::SYSTEM.to_string(),
            prompt: prompt.to_string(),
            schema: Self::schema(),
        }
    }

    /// The JSON schema of an answer.
    pub fn schema() -> Value {
        let id = json!({"type": "string", "format": "uuid"});
        let ids = json!({"type": "array", "items": id, "minItems": 1});
        let kinds: Vec<&str> = crate::Kind::ALL.iter().map(|k| k.as_str()).collect();
        let variant = |kind: &str, properties: Value, required: &[&str]| {
            let mut props = properties;
            props["kind"] = json!({"const": kind});
            let mut req = vec!["kind"];
            req.extend_from_slice(required);
            json!({"type": "object", "properties": props, "required": req, "additionalProperties": false})
        };
        json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["proposals"],
            "properties": {"proposals": {"type": "array", "items": {"oneOf": [
                variant("fold", json!({"into": id, "copies": ids}), &["into", "copies"]),
                variant("add", json!({
                    "derived_from": ids,
                    "memory_kind": {"enum": kinds},
                    "content": {"type": "string", "minLength": 1},
                    "elements": {"type": "array", "items": {"type": "string"}}
                }), &["derived_from", "memory_kind", "content"]),
                variant("replace", json!({
                    "old": ids,
                    "memory_kind": {"enum": kinds},
                    "content": {"type": "string", "minLength": 1},
                    "elements": {"type": "array", "items": {"type": "string"}}
                }), &["old", "memory_kind", "content"]),
                variant("confirm", json!({"id": id, "evidence": ids}), &["id", "evidence"]),
                variant("link", json!({"a": id, "b": id}), &["a", "b"]),
                variant("supersede", json!({"old": id, "by": id}), &["old", "by"]),
                variant("nothing", json!({"reason": {"type": "string"}}), &["reason"]),
            ]}}}
        })
    }

    /// Reads a model's answer: one JSON object of the schema (a Markdown
    /// code fence around it is allowed). Anything else is an
    /// [`Error::Model`] and nothing of it is applied.
    pub fn parse(answer: &str) -> Result<Vec<Proposal>> {
        let text = answer.trim();
        let text = text
            .strip_prefix("```json")
            .or_else(|| text.strip_prefix("```"))
            .and_then(|t| t.trim_end().strip_suffix("```"))
            .unwrap_or(text);
        serde_json::from_str::<Answer>(text)
            .map(|a| a.proposals)
            .map_err(|e| Error::Model {
                reason: format!("the answer is not JSON of the schema: {e}"),
            })
    }

    /// Asks the model about `batch` and reads its answer.
    pub async fn propose(&self, batch: &ConsolidationBatch) -> Result<Vec<Proposal>> {
        let request = Self::request(batch);
        let answer = self
            .model
            .complete(&request)
            .await
            .map_err(|reason| Error::Model { reason })?;
        Self::parse(&answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_outside_the_schema_are_refused_whole() {
        assert!(
            ModelConsolidator::parse(r#"{"proposals": []}"#)
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            ModelConsolidator::parse(
                "```json\n{\"proposals\": [{\"kind\": \"nothing\", \"reason\": \"quiet\"}]}\n```"
            )
            .unwrap(),
            vec![Proposal::Nothing {
                reason: "quiet".into()
            }]
        );
        for bad in [
            "",
            "proposals: none",
            r#"{"proposals": [{"kind": "delete", "id": "x"}]}"#,
            r#"{"proposals": [{"kind": "supersede", "old": "not-a-uuid", "by": "x"}]}"#,
            r#"{"proposals": [], "also": 1}"#,
            r#"[{"kind": "nothing", "reason": "no object"}]"#,
        ] {
            assert!(
                matches!(ModelConsolidator::parse(bad), Err(Error::Model { .. })),
                "{bad}"
            );
        }
    }
}
