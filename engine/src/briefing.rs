//! Rendering hits for a prompt (§8).

use chrono::{DateTime, Utc};

use crate::engine::Engine;
use crate::memory::{Memory, Source, Trust};
use crate::rank::Hit;

/// The line every briefing starts with.
pub const BRIEFING_HEADER: &str = "Memory from earlier sessions, most important first. If anything here conflicts with the current conversation, the conversation wins.";

/// One briefing line:
/// `- **<element or title>** [<KIND>] [VERIFY — the element drifted since this was written] (<agent or source>, <N> days ago): <content>`.
/// The VERIFY tag only when the memory is flagged; N counts from the last
/// confirmation (its freshness); inferred memories are worded as observations
/// with their confidence.
///
/// ```
/// # use recall::{briefing_line, Memory};
/// # fn demo(memory: &Memory, now: chrono::DateTime<chrono::Utc>) {
/// let line = briefing_line(memory, now);
/// assert!(line.starts_with("- **"));
/// # }
/// ```
pub fn briefing_line(m: &Memory, now: DateTime<Utc>) -> String {
    let label = m
        .elements
        .first()
        .cloned()
        .or_else(|| m.title.clone())
        .unwrap_or_else(|| m.bank.clone());
    let verify = if m.verify {
        " [VERIFY — the element drifted since this was written]"
    } else {
        ""
    };
    let who = m.agent.clone().unwrap_or_else(|| m.source.to_string());
    let days = (now - m.last_confirmed_at).num_days().max(0);
    let content = m.content.split_whitespace().collect::<Vec<_>>().join(" ");
    let content = if m.source == Source::Inferred {
        format!(
            "observed, not confirmed (confidence {:.2}): {content}",
            m.confidence
        )
    } else {
        content
    };
    format!(
        "- **{label}** [{}]{verify} ({who}, {days} days ago): {content}",
        m.kind.as_str().to_uppercase()
    )
}

impl Engine {
    /// Renders hits for a prompt: the header line, then one line per hit in
    /// the order given (recall's order: most important first), stopping
    /// before the first line that would exceed `budget_tokens`. Tokens are
    /// counted with the embedder's tokenizer when it has one; otherwise each
    /// character counts as a token (an upper bound for WordPiece and BPE
    /// vocabularies). Returns an empty string when not even the header fits.
    pub fn briefing(&self, hits: &[Hit], budget_tokens: usize) -> String {
        let now = self.config().clock.now();
        let mut lines = vec![BRIEFING_HEADER.to_string()];
        // A briefing goes into a prompt: quarantined text never does, even
        // when a review recall asked for it.
        lines.extend(
            hits.iter()
                .filter(|h| h.memory.trust != Trust::Quarantined)
                .map(|h| briefing_line(&h.memory, now)),
        );
        // A token is at least one byte in every vocabulary (WordPiece,
        // byte-level BPE), so when the bytes fit, so do the tokens, and
        // the tokenizer (about 1 ms for ten lines) is not needed.
        let bytes: usize = lines.iter().map(String::len).sum::<usize>() + lines.len() - 1;
        if bytes <= budget_tokens {
            return lines.join("\n");
        }
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let counts = self
            .embedder()
            .and_then(|e| e.count_tokens(&refs))
            .filter(|c| c.len() == refs.len())
            .unwrap_or_else(|| refs.iter().map(|l| l.chars().count()).collect());
        let mut used = 0;
        let mut out = Vec::new();
        for (line, tokens) in lines.iter().zip(counts) {
            // Each line after the first also costs its newline.
            let cost = tokens + usize::from(!out.is_empty());
            if used + cost > budget_tokens {
                break;
            }
            used += cost;
            out.push(line.as_str());
        }
        out.join("\n")
    }
}
