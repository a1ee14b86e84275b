//! LoCoMo (`locomo10.json`, SPEC §9) with the dataset README's cleaning
//! rules: evidence strings are split on `;` and white space, ids that do not
//! exist in the conversation are dropped, and an item left without evidence
//! is not scored. Category 5 (adversarial) is loaded but not scored.

use std::collections::HashSet;
use std::path::Path;

use chrono::{DateTime, NaiveDateTime, Utc};
use serde_json::Value;

use crate::{Result, format_error, read};

/// One turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    /// `D<session>:<turn>`.
    pub dia_id: String,
    /// Who speaks.
    pub speaker: String,
    /// What they say.
    pub text: String,
    /// The caption of a shared image, if any.
    pub caption: Option<String>,
}

impl Turn {
    /// The text indexed for this turn: `<speaker>: <text>`, plus
    /// ` [image: <caption>]` when the turn shares an image.
    pub fn document(&self) -> String {
        match &self.caption {
            Some(c) => format!("{}: {} [image: {c}]", self.speaker, self.text),
            None => format!("{}: {}", self.speaker, self.text),
        }
    }
}

/// One session: its date and turns.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    /// `N` of `session_N`.
    pub number: u32,
    /// `session_N_date_time`.
    pub date: DateTime<Utc>,
    /// The turns in order.
    pub turns: Vec<Turn>,
}

/// One question.
#[derive(Debug, Clone, PartialEq)]
pub struct Qa {
    /// The question.
    pub question: String,
    /// 1–4 scored; 5 adversarial.
    pub category: u8,
    /// Evidence dia_ids after cleaning (may be empty).
    pub evidence: Vec<String>,
}

impl Qa {
    /// Scored by recall metrics: categories 1–4 with evidence left after cleaning.
    pub fn is_scored(&self) -> bool {
        (1..=4).contains(&self.category) && !self.evidence.is_empty()
    }
}

/// One conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    /// `sample_id`.
    pub sample_id: String,
    /// Sessions in number order.
    pub sessions: Vec<Session>,
    /// Questions, all categories.
    pub qa: Vec<Qa>,
}

impl Conversation {
    /// Questions scored by recall metrics.
    pub fn scored(&self) -> impl Iterator<Item = &Qa> {
        self.qa.iter().filter(|q| q.is_scored())
    }

    /// The people who speak in it, in order of first turn.
    pub fn speakers(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for (_, t) in self.turns() {
            if !out.contains(&t.speaker.as_str()) {
                out.push(&t.speaker);
            }
        }
        out
    }

    /// This conversation's scored questions that make sense as
    /// unanswerable questions over `other`: each names one of this
    /// conversation's speakers and none of `other`'s (three conversations
    /// have a John; a question about one of them is left out when asked of
    /// another). Its people and events never appear in `other`, so the
    /// right retrieval there is nothing.
    ///
    /// ```
    /// # use recall_datasets::locomo::*;
    /// # use chrono::Utc;
    /// let conversation = |id: &str, speakers: [&str; 2], questions: &[&str]| Conversation {
    ///     sample_id: id.into(),
    ///     sessions: vec![Session { number: 1, date: Utc::now(), turns: speakers.iter().enumerate()
    ///         .map(|(i, s)| Turn { dia_id: format!("D1:{i}"), speaker: s.to_string(),
    ///                              text: "hi".into(), caption: None }).collect() }],
    ///     qa: questions.iter().map(|q| Qa { question: q.to_string(), category: 1,
    ///                                       evidence: vec!["D1:0".into()] }).collect(),
    /// };
    /// let asked = conversation("a", ["Ana", "John"], &["What did Ana bake?", "Where does John run?", "Which city?"]);
    /// let other = conversation("b", ["John", "Mei"], &[]);
    /// let cross: Vec<&str> = asked.cross_questions(&other).map(|q| q.question.as_str()).collect();
    /// assert_eq!(cross, ["What did Ana bake?"]);
    /// ```
    pub fn cross_questions<'a>(&'a self, other: &'a Conversation) -> impl Iterator<Item = &'a Qa> {
        let own = self.speakers();
        let theirs = other.speakers();
        self.scored().filter(move |q| {
            let names = |people: &[&str]| {
                people.iter().any(|p| {
                    q.question
                        .split(|c: char| !c.is_alphanumeric())
                        .any(|w| w == *p)
                })
            };
            names(&own) && !names(&theirs)
        })
    }

    /// Every turn with its session's date.
    pub fn turns(&self) -> impl Iterator<Item = (&Session, &Turn)> {
        self.sessions
            .iter()
            .flat_map(|s| s.turns.iter().map(move |t| (s, t)))
    }
}

/// Which conversations a run uses. Tuning happens on [`Split::Train`]
/// only; [`Split::Test`] is what results are reported on. The split is by
/// conversation (every question of a conversation is on one side), and by
/// position in the file: the first five conversations of `locomo10.json`
/// (conv-26, -30, -41, -42, -43) are train, the last five (conv-44, -47,
/// -48, -49, -50) test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Split {
    /// The first half of the conversations.
    Train,
    /// The second half.
    Test,
    /// All of them.
    #[default]
    All,
}

impl Split {
    /// The conversations of this split, in file order.
    ///
    /// ```
    /// use recall_datasets::locomo::Split;
    /// let ids = ["c1", "c2", "c3", "c4", "c5"];
    /// assert_eq!(Split::Train.select(&ids), ["c1", "c2"]);
    /// assert_eq!(Split::Test.select(&ids), ["c3", "c4", "c5"]);
    /// assert_eq!(Split::All.select(&ids).len(), 5);
    /// ```
    pub fn select<T: Clone>(self, conversations: &[T]) -> Vec<T> {
        let half = conversations.len() / 2;
        match self {
            Split::Train => conversations[..half].to_vec(),
            Split::Test => conversations[half..].to_vec(),
            Split::All => conversations.to_vec(),
        }
    }

    /// `train`, `test` or `all`.
    pub fn name(self) -> &'static str {
        match self {
            Split::Train => "train",
            Split::Test => "test",
            Split::All => "all",
        }
    }
}

impl std::str::FromStr for Split {
    type Err = String;

    fn from_str(text: &str) -> std::result::Result<Split, String> {
        match text {
            "train" => Ok(Split::Train),
            "test" => Ok(Split::Test),
            "all" => Ok(Split::All),
            other => Err(format!("unknown split {other:?} (train, test, all)")),
        }
    }
}

/// Parses LoCoMo's session dates, e.g. `1:56 pm on 8 May, 2023`, as UTC.
///
/// ```
/// let at = recall_datasets::locomo::parse_date("1:56 pm on 8 May, 2023").unwrap();
/// assert_eq!(at.to_rfc3339(), "2023-05-08T13:56:00+00:00");
/// ```
pub fn parse_date(text: &str) -> Option<DateTime<Utc>> {
    NaiveDateTime::parse_from_str(text.trim(), "%I:%M %p on %d %B, %Y")
        .ok()
        .map(|t| t.and_utc())
}

/// Loads `locomo10.json` (or a file in its format), cleaning evidence.
pub fn load(path: &Path) -> Result<Vec<Conversation>> {
    let bytes = read(path)?;
    let root: Value = serde_json::from_slice(&bytes).map_err(|e| format_error(path, e))?;
    let items = root
        .as_array()
        .ok_or_else(|| format_error(path, "expected a JSON array of conversations"))?;
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            conversation(item).map_err(|e| format_error(path, format!("item {i}: {e}")))
        })
        .collect()
}

fn text(value: &Value, key: &str) -> std::result::Result<String, String> {
    value
        .get(key)
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| format!("missing text field {key:?}"))
}

fn conversation(item: &Value) -> std::result::Result<Conversation, String> {
    let sample_id = text(item, "sample_id")?;
    let conv = item
        .get("conversation")
        .and_then(Value::as_object)
        .ok_or("missing \"conversation\"")?;
    let mut sessions = Vec::new();
    for (key, value) in conv {
        let Some(number) = key
            .strip_prefix("session_")
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let date_key = format!("session_{number}_date_time");
        let date_text = conv
            .get(&date_key)
            .and_then(Value::as_str)
            .ok_or_else(|| format!("{sample_id}: missing {date_key}"))?;
        let date = parse_date(date_text)
            .ok_or_else(|| format!("{sample_id}: unreadable date {date_text:?}"))?;
        let turns = value
            .as_array()
            .ok_or_else(|| format!("{sample_id}: {key} is not a list"))?
            .iter()
            .map(|t| {
                Ok(Turn {
                    dia_id: text(t, "dia_id")?,
                    speaker: text(t, "speaker")?,
                    text: text(t, "text")?,
                    caption: t
                        .get("blip_caption")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                })
            })
            .collect::<std::result::Result<Vec<_>, String>>()?;
        sessions.push(Session {
            number,
            date,
            turns,
        });
    }
    sessions.sort_by_key(|s| s.number);
    let known: HashSet<&str> = sessions
        .iter()
        .flat_map(|s| s.turns.iter().map(|t| t.dia_id.as_str()))
        .collect();
    let qa = item
        .get("qa")
        .and_then(Value::as_array)
        .ok_or_else(|| format!("{sample_id}: missing \"qa\""))?
        .iter()
        .map(|q| {
            let category = q
                .get("category")
                .and_then(Value::as_u64)
                .and_then(|c| u8::try_from(c).ok())
                .ok_or_else(|| format!("{sample_id}: a question without a category"))?;
            let evidence = q
                .get("evidence")
                .and_then(Value::as_array)
                .map(|list| clean_evidence(list.iter().filter_map(Value::as_str), &known))
                .unwrap_or_default();
            Ok(Qa {
                question: text(q, "question")?,
                category,
                evidence,
            })
        })
        .collect::<std::result::Result<Vec<_>, String>>()?;
    Ok(Conversation {
        sample_id,
        sessions,
        qa,
    })
}

/// Splits evidence strings on `;` and white space and keeps the ids the
/// conversation has, each once, in order.
fn clean_evidence<'a>(raw: impl Iterator<Item = &'a str>, known: &HashSet<&str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for id in raw.flat_map(|s| s.split(|c: char| c == ';' || c.is_whitespace())) {
        if known.contains(id) && !out.iter().any(|o| o == id) {
            out.push(id.to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evidence_is_split_and_unknown_ids_dropped() {
        let known: HashSet<&str> = ["D8:6", "D9:17", "D9:1", "D4:4"].into_iter().collect();
        let raw = ["D8:6; D9:17", "D9:1 D4:4", "D", "D:11:26", "D8:6"];
        assert_eq!(
            clean_evidence(raw.into_iter(), &known),
            ["D8:6", "D9:17", "D9:1", "D4:4"]
        );
    }

    #[test]
    fn the_shared_file_has_1535_scored_items() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../shared/datasets/locomo/locomo10.json");
        if !path.exists() {
            // CI always has shared/ beside its clone (see bench's harness test).
            assert!(
                std::env::var_os("CI").is_none(),
                "CI without the LoCoMo data at {}",
                path.display()
            );
            eprintln!("skipped: {} is not on this machine", path.display());
            return;
        }
        let conversations = load(&path).unwrap();
        assert_eq!(conversations.len(), 10);
        let turns: usize = conversations.iter().map(|c| c.turns().count()).sum();
        assert_eq!(turns, 5882);
        let scored: usize = conversations.iter().map(|c| c.scored().count()).sum();
        assert_eq!(scored, 1535);
        let captioned = conversations[0].turns().find(|(_, t)| t.caption.is_some());
        assert!(captioned.unwrap().1.document().contains(" [image: "));
    }
}
