//! The events the engine appends: one typed [`Event`] and the one place that
//! turns it into the `events` table's `op` / `arg` columns and back.
//!
//! Nothing rewrites a memory row: confirmations, impressions, citations,
//! drift, forgetting, supersession, quarantine and release are appended as
//! events and folded into the state at open ([`crate::state`]). The column
//! format is the one the engine has always written (`op` a lower-case word,
//! `arg` a plain string), so stores written before this type existed load
//! unchanged.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use recall_indexer::{EventRow, Record};
use uuid::Uuid;

use crate::memory::Trust;

/// One thing that happened to a memory or a tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Event {
    /// Someone checked it and it still holds: `confirmations += 1`,
    /// `last_confirmed_at = max(last, at)`, drift acknowledged.
    Confirm,
    /// Soft delete.
    Forget,
    /// Replaced by the given memory.
    SupersededBy(Uuid),
    /// Dealt to the session by a recall.
    Impression { session: String },
    /// The session said it used the memory.
    Citation { session: String },
    /// Tenant-wide: the code behind `element` changed at the event's time.
    Drift { element: String },
    /// Tenant-wide: the session ended at the event's time.
    SessionEnd { session: String },
    /// Written with a memory: what redaction replaced (kind → count).
    Redacted(BTreeMap<String, u32>),
    /// Written with a memory the screen held back: the rule, and the trust
    /// the writer gave it.
    Quarantined { rule: String, trust: Trust },
    /// A person looked at a quarantined memory and let it be served.
    Released { by: String },
    /// Tenant-wide: an erasure ran over this many memories. Holds no content;
    /// it keeps the store's sequence numbers rising past erased rows.
    Erased { memories: usize },
    /// Written with a memory made from others (a consolidation's fact):
    /// the memories it was derived from, kept as provenance.
    DerivedFrom(Vec<Uuid>),
    /// Tenant-wide: a consolidation pass looked at every memory written or
    /// confirmed before the event's time (its cursor).
    Consolidated,
    /// A proposal: written with a memory a `propose` bank holds back
    /// (`held`), or on a served memory a consolidation proposed should
    /// replace `supersedes`. Waits for `Accepted` or `Rejected`.
    Proposed { held: bool, supersedes: Vec<Uuid> },
    /// The memory is linked to the given one (a consolidation said the two
    /// belong together): recall brings it in as a `[[Title]]` link would.
    Linked(Uuid),
    /// A person or agent accepted the memory's proposal.
    Accepted { by: String },
    /// A person or agent rejected the memory's proposal.
    Rejected { by: String, reason: Option<String> },
}

/// Why an event row could not be read as an [`Event`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EventDecodeError {
    /// An operation this engine does not know (written by a newer one).
    UnknownOp(String),
    /// A known operation whose argument is missing or malformed.
    BadArg { op: &'static str },
}

impl fmt::Display for EventDecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EventDecodeError::UnknownOp(op) => write!(f, "unknown event op {op:?}"),
            EventDecodeError::BadArg { op } => write!(f, "event {op:?} has a bad argument"),
        }
    }
}

mod op {
    pub const CONFIRM: &str = "confirm";
    pub const FORGET: &str = "forget";
    pub const SUPERSEDED_BY: &str = "superseded_by";
    pub const IMPRESSION: &str = "impression";
    pub const CITATION: &str = "citation";
    pub const DRIFT: &str = "drift";
    pub const SESSION_END: &str = "session_end";
    pub const REDACTED: &str = "redacted";
    pub const QUARANTINED: &str = "quarantined";
    pub const RELEASED: &str = "released";
    pub const ERASED: &str = "erased";
    pub const DERIVED_FROM: &str = "derived_from";
    pub const CONSOLIDATED: &str = "consolidated";
    pub const PROPOSED: &str = "proposed";
    pub const LINKED: &str = "linked";
    pub const ACCEPTED: &str = "accepted";
    pub const REJECTED: &str = "rejected";
}

impl Event {
    /// The `op` column.
    pub(crate) fn op(&self) -> &'static str {
        match self {
            Event::Confirm => op::CONFIRM,
            Event::Forget => op::FORGET,
            Event::SupersededBy(_) => op::SUPERSEDED_BY,
            Event::Impression { .. } => op::IMPRESSION,
            Event::Citation { .. } => op::CITATION,
            Event::Drift { .. } => op::DRIFT,
            Event::SessionEnd { .. } => op::SESSION_END,
            Event::Redacted(_) => op::REDACTED,
            Event::Quarantined { .. } => op::QUARANTINED,
            Event::Released { .. } => op::RELEASED,
            Event::Erased { .. } => op::ERASED,
            Event::DerivedFrom(_) => op::DERIVED_FROM,
            Event::Consolidated => op::CONSOLIDATED,
            Event::Proposed { .. } => op::PROPOSED,
            Event::Linked(_) => op::LINKED,
            Event::Accepted { .. } => op::ACCEPTED,
            Event::Rejected { .. } => op::REJECTED,
        }
    }

    /// The `arg` column.
    pub(crate) fn arg(&self) -> Option<String> {
        match self {
            Event::Confirm | Event::Forget | Event::Consolidated => None,
            Event::SupersededBy(id) | Event::Linked(id) => Some(id.to_string()),
            Event::Impression { session }
            | Event::Citation { session }
            | Event::SessionEnd { session } => Some(session.clone()),
            Event::Drift { element } => Some(element.clone()),
            Event::Redacted(counts) => Some(encode_counts(counts)),
            Event::Quarantined { rule, trust } => Some(format!("{rule}|{}", trust.as_str())),
            Event::Released { by } | Event::Accepted { by } => Some(by.clone()),
            // `held` or `served`, then the superseded ids after a `|`.
            Event::Proposed { held, supersedes } => {
                let mode = if *held { "held" } else { "served" };
                Some(match supersedes.is_empty() {
                    true => mode.to_string(),
                    false => format!(
                        "{mode}|{}",
                        supersedes
                            .iter()
                            .map(Uuid::to_string)
                            .collect::<Vec<_>>()
                            .join(",")
                    ),
                })
            }
            // Who, then why after a line break (an actor is one line).
            Event::Rejected { by, reason } => Some(match reason {
                Some(reason) => format!("{by}\n{reason}"),
                None => by.clone(),
            }),
            Event::Erased { memories } => Some(memories.to_string()),
            Event::DerivedFrom(ids) => Some(
                ids.iter()
                    .map(Uuid::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
            ),
        }
    }

    /// The record that stores it; `memory` is `None` for tenant-wide events.
    /// The store assigns the sequence number.
    pub(crate) fn record(&self, tenant: &str, memory: Option<Uuid>, at_ms: i64) -> Record {
        Record::Event(EventRow {
            seq: 0,
            tenant: tenant.to_string(),
            memory_id: memory.map(|id| id.to_string()).unwrap_or_default(),
            op: self.op().to_string(),
            at_ms,
            arg: self.arg(),
        })
    }

    /// Reads an event row's `op` and `arg`.
    ///
    /// Lenient where the engine always was: a `quarantined` event without a
    /// readable argument still quarantines (rule `unknown`, trust `external`),
    /// and redaction counts skip pairs they cannot read.
    pub(crate) fn decode(op: &str, arg: Option<&str>) -> Result<Event, EventDecodeError> {
        let need = |op: &'static str| arg.ok_or(EventDecodeError::BadArg { op });
        Ok(match op {
            op::CONFIRM => Event::Confirm,
            op::FORGET => Event::Forget,
            op::SUPERSEDED_BY => {
                Event::SupersededBy(Uuid::parse_str(need(op::SUPERSEDED_BY)?).map_err(|_| {
                    EventDecodeError::BadArg {
                        op: op::SUPERSEDED_BY,
                    }
                })?)
            }
            op::IMPRESSION => Event::Impression {
                session: need(op::IMPRESSION)?.to_string(),
            },
            op::CITATION => Event::Citation {
                session: need(op::CITATION)?.to_string(),
            },
            op::DRIFT => Event::Drift {
                element: need(op::DRIFT)?.to_string(),
            },
            op::SESSION_END => Event::SessionEnd {
                session: need(op::SESSION_END)?.to_string(),
            },
            op::REDACTED => Event::Redacted(decode_counts(need(op::REDACTED)?)),
            op::QUARANTINED => {
                let (rule, trust) = arg
                    .and_then(|a| a.split_once('|'))
                    .unwrap_or(("unknown", "external"));
                Event::Quarantined {
                    rule: rule.to_string(),
                    trust: Trust::from_str(trust).unwrap_or(Trust::External),
                }
            }
            op::RELEASED => Event::Released {
                by: arg.unwrap_or_default().to_string(),
            },
            op::ERASED => Event::Erased {
                memories: arg.and_then(|a| a.parse().ok()).unwrap_or(0),
            },
            op::DERIVED_FROM => Event::DerivedFrom(
                need(op::DERIVED_FROM)?
                    .split(',')
                    .map(Uuid::parse_str)
                    .collect::<Result<_, _>>()
                    .map_err(|_| EventDecodeError::BadArg {
                        op: op::DERIVED_FROM,
                    })?,
            ),
            op::CONSOLIDATED => Event::Consolidated,
            op::PROPOSED => {
                let bad = || EventDecodeError::BadArg { op: op::PROPOSED };
                let text = need(op::PROPOSED)?;
                let (mode, supersedes) = match text.split_once('|') {
                    Some((mode, ids)) => (
                        mode,
                        ids.split(',')
                            .map(Uuid::parse_str)
                            .collect::<Result<Vec<_>, _>>()
                            .map_err(|_| bad())?,
                    ),
                    None => (text, Vec::new()),
                };
                let held = match mode {
                    "held" => true,
                    "served" => false,
                    _ => return Err(bad()),
                };
                Event::Proposed { held, supersedes }
            }
            op::LINKED => Event::Linked(
                Uuid::parse_str(need(op::LINKED)?)
                    .map_err(|_| EventDecodeError::BadArg { op: op::LINKED })?,
            ),
            op::ACCEPTED => Event::Accepted {
                by: need(op::ACCEPTED)?.to_string(),
            },
            op::REJECTED => {
                let text = need(op::REJECTED)?;
                let (by, reason) = match text.split_once('\n') {
                    Some((by, reason)) => (by, Some(reason.to_string())),
                    None => (text, None),
                };
                Event::Rejected {
                    by: by.to_string(),
                    reason,
                }
            }
            other => return Err(EventDecodeError::UnknownOp(other.to_string())),
        })
    }
}

/// `KIND=n,KIND=n` ← counts.
pub(crate) fn encode_counts(counts: &BTreeMap<String, u32>) -> String {
    counts
        .iter()
        .map(|(k, n)| format!("{k}={n}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn decode_counts(text: &str) -> BTreeMap<String, u32> {
    text.split(',')
        .filter_map(|pair| pair.split_once('='))
        .filter_map(|(k, n)| Some((k.to_string(), n.parse().ok()?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn word() -> impl Strategy<Value = String> {
        "[a-zA-Z0-9:_ .-]{1,24}"
    }

    fn trust() -> impl Strategy<Value = Trust> {
        prop_oneof![
            Just(Trust::User),
            Just(Trust::Agent),
            Just(Trust::External),
            Just(Trust::Quarantined),
        ]
    }

    fn event() -> impl Strategy<Value = Event> {
        prop_oneof![
            Just(Event::Confirm),
            Just(Event::Forget),
            any::<u128>().prop_map(|n| Event::SupersededBy(Uuid::from_u128(n))),
            word().prop_map(|session| Event::Impression { session }),
            word().prop_map(|session| Event::Citation { session }),
            word().prop_map(|element| Event::Drift { element }),
            word().prop_map(|session| Event::SessionEnd { session }),
            proptest::collection::btree_map("[A-Z_]{1,12}", any::<u32>(), 1..4)
                .prop_map(Event::Redacted),
            ("[a-z_-]{1,20}", trust()).prop_map(|(rule, trust)| Event::Quarantined { rule, trust }),
            word().prop_map(|by| Event::Released { by }),
            any::<u32>().prop_map(|n| Event::Erased {
                memories: n as usize
            }),
            proptest::collection::vec(any::<u128>(), 1..5)
                .prop_map(|ns| Event::DerivedFrom(ns.into_iter().map(Uuid::from_u128).collect())),
            Just(Event::Consolidated),
            (
                any::<bool>(),
                proptest::collection::vec(any::<u128>(), 0..3)
            )
                .prop_map(|(held, ids)| Event::Proposed {
                    held,
                    supersedes: ids.into_iter().map(Uuid::from_u128).collect(),
                }),
            word().prop_map(|by| Event::Accepted { by }),
            any::<u128>().prop_map(|n| Event::Linked(Uuid::from_u128(n))),
            (word(), proptest::option::of("[a-z ,.\n]{0,40}"))
                .prop_map(|(by, reason)| Event::Rejected { by, reason }),
        ]
    }

    proptest! {
        #[test]
        fn every_event_reads_back_as_written(event in event()) {
            let arg = event.arg();
            prop_assert_eq!(Event::decode(event.op(), arg.as_deref()), Ok(event));
        }
    }

    /// The exact strings stores written before the typed events hold.
    #[test]
    fn rows_in_the_earlier_format_read_as_before() {
        let id = "0190f0c4-0000-7000-8000-000000000000";
        let cases: Vec<(&str, Option<&str>, Event)> = vec![
            ("confirm", None, Event::Confirm),
            ("forget", None, Event::Forget),
            (
                "superseded_by",
                Some(id),
                Event::SupersededBy(Uuid::parse_str(id).unwrap()),
            ),
            (
                "impression",
                Some("s-1"),
                Event::Impression {
                    session: "s-1".into(),
                },
            ),
            (
                "citation",
                Some("s-1"),
                Event::Citation {
                    session: "s-1".into(),
                },
            ),
            (
                "drift",
                Some("AuthService"),
                Event::Drift {
                    element: "AuthService".into(),
                },
            ),
            (
                "session_end",
                Some("s-1"),
                Event::SessionEnd {
                    session: "s-1".into(),
                },
            ),
            (
                "redacted",
                Some("EMAIL=2,SECRET=1"),
                Event::Redacted(BTreeMap::from([
                    ("EMAIL".to_string(), 2),
                    ("SECRET".to_string(), 1),
                ])),
            ),
            (
                "quarantined",
                Some("instruction_override|agent"),
                Event::Quarantined {
                    rule: "instruction_override".into(),
                    trust: Trust::Agent,
                },
            ),
            (
                "quarantined",
                None,
                Event::Quarantined {
                    rule: "unknown".into(),
                    trust: Trust::External,
                },
            ),
            (
                "released",
                Some("reviewer"),
                Event::Released {
                    by: "reviewer".into(),
                },
            ),
            ("erased", Some("3"), Event::Erased { memories: 3 }),
        ];
        for (op, arg, want) in cases {
            assert_eq!(Event::decode(op, arg), Ok(want.clone()), "{op} {arg:?}");
            if op != "quarantined" || arg.is_some() {
                assert_eq!((want.op(), want.arg().as_deref()), (op, arg));
            }
        }
    }

    #[test]
    fn unknown_and_malformed_rows_are_told_apart() {
        assert_eq!(
            Event::decode("promote", None),
            Err(EventDecodeError::UnknownOp("promote".into()))
        );
        assert_eq!(
            Event::decode("superseded_by", Some("not-a-uuid")),
            Err(EventDecodeError::BadArg {
                op: "superseded_by"
            })
        );
        assert_eq!(
            Event::decode("impression", None),
            Err(EventDecodeError::BadArg { op: "impression" })
        );
    }
}
