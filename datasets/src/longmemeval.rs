//! The LongMemEval instance format (SPEC §9). Field names are the release's,
//! so `longmemeval_s.json`, `_m` and `_oracle` load unchanged, and files the
//! [`crate::probes`] generator writes load in any LongMemEval tool.

use std::path::Path;

use chrono::{DateTime, NaiveDateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::{Result, format_error, read};

/// Question types of the release (the `_abs` suffix on `question_id`, not a
/// type, marks abstention).
pub const QUESTION_TYPES: [&str; 6] = [
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "temporal-reasoning",
    "knowledge-update",
];

/// One turn of a haystack session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    /// `user` or `assistant`.
    pub role: String,
    /// The text.
    pub content: String,
    /// True on the turns that hold the evidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_answer: Option<bool>,
}

impl Turn {
    /// Whether this turn holds evidence.
    pub fn is_evidence(&self) -> bool {
        self.has_answer == Some(true)
    }
}

/// One question with its haystack.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Instance {
    /// Unique id; the suffix `_abs` marks an abstention question.
    pub question_id: String,
    /// One of [`QUESTION_TYPES`].
    pub question_type: String,
    /// The question.
    pub question: String,
    /// The answer: a string, or a number in some released items.
    pub answer: serde_json::Value,
    /// When the question is asked, e.g. `2023/05/30 (Tue) 23:40`.
    pub question_date: String,
    /// One id per haystack session.
    pub haystack_session_ids: Vec<String>,
    /// One date per haystack session, same format as `question_date`.
    pub haystack_dates: Vec<String>,
    /// The sessions, each a list of turns.
    pub haystack_sessions: Vec<Vec<Turn>>,
    /// Sessions that hold the evidence.
    pub answer_session_ids: Vec<String>,
}

impl Instance {
    /// An abstention question: the haystack does not hold the answer.
    pub fn is_abstention(&self) -> bool {
        self.question_id.ends_with("_abs")
    }
}

/// Parses LongMemEval's date format, `2023/05/30 (Tue) 23:40`, as UTC.
///
/// ```
/// let at = recall_datasets::longmemeval::parse_date("2023/05/30 (Tue) 23:40").unwrap();
/// assert_eq!(at.to_rfc3339(), "2023-05-30T23:40:00+00:00");
/// assert!(recall_datasets::longmemeval::parse_date("May 30").is_none());
/// ```
pub fn parse_date(text: &str) -> Option<DateTime<Utc>> {
    NaiveDateTime::parse_from_str(text.trim(), "%Y/%m/%d (%a) %H:%M")
        .ok()
        .map(|t| t.and_utc())
}

/// Formats a date the way LongMemEval writes it.
pub fn format_date(at: DateTime<Utc>) -> String {
    at.format("%Y/%m/%d (%a) %H:%M").to_string()
}

/// Loads a LongMemEval file (a JSON array of instances) and checks what the
/// harness relies on: one id and one parseable date per session, a
/// parseable question date.
pub fn load(path: &Path) -> Result<Vec<Instance>> {
    let bytes = read(path)?;
    let instances: Vec<Instance> =
        serde_json::from_slice(&bytes).map_err(|e| format_error(path, e))?;
    for inst in &instances {
        let sessions = inst.haystack_sessions.len();
        if inst.haystack_session_ids.len() != sessions || inst.haystack_dates.len() != sessions {
            return Err(format_error(
                path,
                format!(
                    "{}: {} sessions but {} ids and {} dates",
                    inst.question_id,
                    sessions,
                    inst.haystack_session_ids.len(),
                    inst.haystack_dates.len()
                ),
            ));
        }
        for date in inst.haystack_dates.iter().chain([&inst.question_date]) {
            if parse_date(date).is_none() {
                return Err(format_error(
                    path,
                    format!("{}: unreadable date {date:?}", inst.question_id),
                ));
            }
        }
    }
    Ok(instances)
}

/// Writes instances as a LongMemEval file.
pub fn save(path: &Path, instances: &[Instance]) -> Result<()> {
    let text = serde_json::to_string_pretty(instances).map_err(|e| format_error(path, e))?;
    std::fs::write(path, text).map_err(|source| crate::DatasetError::Io {
        path: path.display().to_string(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const RELEASED: &str = r#"[{"question_id": "gpt4_2655b836", "question_type": "temporal-reasoning",
      "question": "What was the first issue I had with my new car after its first service?",
      "answer": 3, "question_date": "2023/04/10 (Mon) 23:07",
      "haystack_session_ids": ["s1"], "haystack_dates": ["2023/04/10 (Mon) 17:50"],
      "haystack_sessions": [[{"role": "user", "content": "hi", "has_answer": true},
                             {"role": "assistant", "content": "hello"}]],
      "answer_session_ids": ["s1"], "extra_field": 1}]"#;

    #[test]
    fn a_released_instance_loads_unchanged_and_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        std::fs::write(&path, RELEASED).unwrap();
        let loaded = load(&path).unwrap();
        assert_eq!(loaded[0].answer, serde_json::json!(3));
        assert!(loaded[0].haystack_sessions[0][0].is_evidence());
        assert!(!loaded[0].haystack_sessions[0][1].is_evidence());
        save(&path, &loaded).unwrap();
        assert_eq!(load(&path).unwrap(), loaded);
    }

    #[test]
    fn mismatched_sessions_and_bad_dates_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.json");
        std::fs::write(
            &path,
            RELEASED.replace(r#"["s1"], "haystack_dates""#, r#"[], "haystack_dates""#),
        )
        .unwrap();
        assert!(
            load(&path)
                .unwrap_err()
                .to_string()
                .contains("1 sessions but 0 ids")
        );
        std::fs::write(
            &path,
            RELEASED.replace("2023/04/10 (Mon) 17:50", "yesterday"),
        )
        .unwrap();
        assert!(load(&path).unwrap_err().to_string().contains("yesterday"));
    }
}
