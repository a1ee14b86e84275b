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
                            title: None,
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
                        title: None,
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
            consolidate: false,
        });
    }
    (out, skipped)
}

/// One haystack per conversation, turn level (`dia_id`), text
/// `<speaker>: <text>` (+ ` [image: <caption>]`), categories 1–4 with
/// evidence (the dataset README's rules). Questions are asked a day after
/// the last session. With `context` > 0 each memory is also given the
/// `context` turns before it in its session (the hit still credits only
/// its own turn): an answer often only makes sense with the question it
/// answers. `context_in` says where they go.
pub fn locomo(
    conversations: &[Conversation],
    context: usize,
    context_in: ContextIn,
    cross: bool,
) -> Vec<Haystack> {
    conversations
        .iter()
        .enumerate()
        .map(|(n, c)| {
            let mut docs = Vec::new();
            for s in &c.sessions {
                for (i, t) in s.turns.iter().enumerate() {
                    let before: Vec<String> = s.turns[i.saturating_sub(context)..i]
                        .iter()
                        .map(|p| p.document())
                        .collect();
                    let (text, title) = match context_in {
                        _ if before.is_empty() => (t.document(), None),
                        ContextIn::Title => (t.document(), Some(context_title(&t.dia_id, &before))),
                        ContextIn::Content => {
                            let mut lines = before;
                            lines.push(t.document());
                            (lines.join("\n"), None)
                        }
                    };
                    docs.push(Doc {
                        unit: t.dia_id.clone(),
                        text,
                        at: s.date,
                        title,
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
                    .collect::<Vec<_>>();
            let mut questions = questions;
            if cross && conversations.len() > 1 {
                questions.extend(cross_questions(
                    &conversations[(n + 1) % conversations.len()],
                    c,
                    asked,
                ));
            }
            Haystack {
                name: c.sample_id.clone(),
                docs,
                questions,
                kind: Kind::Episode,
                consolidate: false,
            }
        })
        .collect()
}

/// The questions of `asked` that are unanswerable over `against`
/// ([`Conversation::cross_questions`]), as abstention questions (group
/// `cross`).
fn cross_questions(
    asked: &Conversation,
    against: &Conversation,
    at: chrono::DateTime<chrono::Utc>,
) -> Vec<Question> {
    asked
        .cross_questions(against)
        .enumerate()
        .map(|(i, q)| Question {
            id: format!("{}>{}#{i}", asked.sample_id, against.sample_id),
            group: "cross".into(),
            text: q.question.clone(),
            gold: Vec::new(),
            abstain: true,
            newest_first: false,
            at,
        })
        .collect()
}

/// Where a LoCoMo turn's preceding turns are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ContextIn {
    /// In the memory's title: BM25 searches it, the vector is the turn's
    /// own, so the turn after the evidence (whose title quotes it) does
    /// not also match it by meaning.
    Title,
    /// Above the turn in its content: searched and embedded together.
    Content,
}

/// A title naming the turn (titles are unique in a tenant) and the turns
/// it follows, on one line of at most [`TITLE_BYTES`].
fn context_title(dia_id: &str, before: &[String]) -> String {
    let mut title = format!("{dia_id} after: {}", before.join(" / ")).replace('\n', " ");
    let mut end = title.len().min(TITLE_BYTES);
    while !title.is_char_boundary(end) {
        end -= 1;
    }
    title.truncate(end);
    title
}

/// The engine takes titles of up to 256 bytes.
const TITLE_BYTES: usize = 256;

#[cfg(test)]
mod tests {
    use super::*;

    fn conversation(id: &str, speakers: [&str; 2], questions: &[&str]) -> Conversation {
        use recall_datasets::locomo::{Qa, Session, Turn};
        Conversation {
            sample_id: id.into(),
            sessions: vec![Session {
                number: 1,
                date: chrono::Utc::now(),
                turns: speakers
                    .iter()
                    .enumerate()
                    .map(|(i, s)| Turn {
                        dia_id: format!("D1:{}", i + 1),
                        speaker: s.to_string(),
                        text: format!("{s} says hello"),
                        caption: None,
                    })
                    .collect(),
            }],
            qa: questions
                .iter()
                .map(|q| Qa {
                    question: q.to_string(),
                    category: 1,
                    evidence: vec!["D1:1".into()],
                })
                .collect(),
        }
    }

    #[test]
    fn cross_questions_are_the_next_conversations_and_must_abstain() {
        let conversations = [
            conversation("a", ["Ana", "Bo"], &["What did Ana bake?"]),
            conversation("b", ["Cy", "Di"], &["Where did Cy run?", "Which city?"]),
        ];
        let without = locomo(&conversations, 0, ContextIn::Title, false);
        assert!(
            without
                .iter()
                .all(|h| h.questions.iter().all(|q| !q.abstain))
        );
        let with = locomo(&conversations, 0, ContextIn::Title, true);
        // a is asked b's question naming b's people; b is asked a's.
        let cross = |h: &Haystack| -> Vec<String> {
            h.questions
                .iter()
                .filter(|q| q.abstain)
                .map(|q| format!("{} {}", q.group, q.text))
                .collect()
        };
        assert_eq!(cross(&with[0]), ["cross Where did Cy run?"]);
        assert_eq!(cross(&with[1]), ["cross What did Ana bake?"]);
        assert!(
            with.iter()
                .flat_map(|h| &h.questions)
                .filter(|q| q.abstain)
                .all(|q| q.gold.is_empty())
        );
        // The answerable questions are unchanged.
        assert_eq!(with[1].questions.len(), without[1].questions.len() + 1);
    }

    #[test]
    fn a_context_title_is_one_line_within_the_limit_and_names_its_turn() {
        let long = "é".repeat(300);
        let title = context_title("D3:7", &["A: first\nline".into(), long]);
        assert!(title.starts_with("D3:7 after: A: first line / é"));
        assert!(title.len() <= TITLE_BYTES && !title.contains('\n'));
        assert_eq!(
            context_title("D1:2", &["B: hi".into()]),
            "D1:2 after: B: hi"
        );
    }
}
