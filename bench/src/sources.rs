//! Turning evaluation files into [`Haystack`]s: LongMemEval instances (real
//! or generated) at turn or session granularity, and LoCoMo conversations
//! at turn level.

use std::collections::BTreeSet;

use chrono::Duration;
use recall::Kind;
use recall_datasets::locomo::Conversation;
use recall_datasets::longmemeval::{Instance, parse_date};

use crate::eval::{Doc, Haystack, Question};

/// What one LongMemEval memory holds, and so what a hit is credited with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Granularity {
    /// One memory per user turn; gold = user turns with `has_answer`
    /// (unit id `<session_id>#<turn index>`).
    Turn,
    /// One memory per session (its user turns, one per line); gold =
    /// `answer_session_ids`.
    Session,
}

/// One haystack per instance. User turns only are written (what an agent
/// would remember about its user); a question whose evidence is only in
/// assistant turns has no gold at turn level and is counted in `skipped`.
pub fn longmemeval(instances: &[Instance], granularity: Granularity) -> (Vec<Haystack>, usize) {
    let mut skipped = 0;
    let mut out = Vec::with_capacity(instances.len());
    for inst in instances {
        let mut docs = Vec::new();
        let mut gold = Vec::new();
        for ((sid, date), session) in inst
            .haystack_session_ids
            .iter()
            .zip(&inst.haystack_dates)
            .zip(&inst.haystack_sessions)
        {
            let Some(at) = parse_date(date) else { continue };
            match granularity {
                Granularity::Turn => {
                    for (t, turn) in session.iter().enumerate() {
                        if turn.role != "user" {
                            continue;
                        }
                        let unit = format!("{sid}#{t}");
                        if turn.is_evidence() {
                            gold.push(unit.clone());
                        }
                        docs.push(Doc {
                            unit,
                            text: turn.content.clone(),
                            at,
                        });
                    }
                }
                Granularity::Session => {
                    let text: Vec<&str> = session
                        .iter()
                        .filter(|t| t.role == "user")
                        .map(|t| t.content.as_str())
                        .collect();
                    if inst.answer_session_ids.contains(sid) {
                        gold.push(sid.clone());
                    }
                    docs.push(Doc {
                        unit: sid.clone(),
                        text: text.join("\n"),
                        at,
                    });
                }
            }
        }
        let abstain = inst.is_abstention();
        if !abstain && gold.is_empty() {
            skipped += 1;
            continue;
        }
        let dates: BTreeSet<_> = gold
            .iter()
            .filter_map(|g| docs.iter().find(|d| &d.unit == g).map(|d| d.at))
            .collect();
        let at = parse_date(&inst.question_date)
            .unwrap_or_else(|| docs.last().map_or_else(chrono::Utc::now, |d| d.at));
        docs.sort_by_key(|d| d.at);
        out.push(Haystack {
            name: inst.question_id.clone(),
            questions: vec![Question {
                id: inst.question_id.clone(),
                group: inst.question_type.clone(),
                text: inst.question.clone(),
                gold: if abstain { Vec::new() } else { gold },
                abstain,
                newest_first: !abstain
                    && inst.question_type == "knowledge-update"
                    && dates.len() > 1,
                at,
            }],
            docs,
            kind: Kind::Episode,
        });
    }
    (out, skipped)
}

/// One haystack per conversation, turn level (`dia_id`), text
/// `<speaker>: <text>` (+ ` [image: <caption>]`), categories 1–4 with
/// evidence (the dataset README's rules). Questions are asked a day after
/// the last session. With `context` > 0 each memory also holds the
/// `context` turns before it in its session, one per line above it (the
/// hit still credits only its own turn): an answer often only makes sense
/// with the question it answers.
pub fn locomo(conversations: &[Conversation], context: usize) -> Vec<Haystack> {
    conversations
        .iter()
        .map(|c| {
            let mut docs = Vec::new();
            for s in &c.sessions {
                for (i, t) in s.turns.iter().enumerate() {
                    let mut lines: Vec<String> = s.turns[i.saturating_sub(context)..i]
                        .iter()
                        .map(|p| p.document())
                        .collect();
                    lines.push(t.document());
                    docs.push(Doc {
                        unit: t.dia_id.clone(),
                        text: lines.join("\n"),
                        at: s.date,
                    });
                }
            }
            let asked =
                c.sessions.iter().map(|s| s.date).max().unwrap_or_default() + Duration::days(1);
            let questions =
                c.qa.iter()
                    .enumerate()
                    .filter(|(_, q)| q.is_scored())
                    .map(|(i, q)| Question {
                        id: format!("{}#{i}", c.sample_id),
                        group: q.category.to_string(),
                        text: q.question.clone(),
                        gold: q.evidence.clone(),
                        abstain: false,
                        newest_first: false,
                        at: asked,
                    })
                    .collect();
            Haystack {
                name: c.sample_id.clone(),
                docs,
                questions,
                kind: Kind::Episode,
            }
        })
        .collect()
}
