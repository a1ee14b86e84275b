//! The parts of a memory's state that few memories have (usage, what
//! screening did, relations to other memories), each boxed so that a
//! memory without it holds one pointer.

use std::collections::{BTreeMap, HashSet};

use uuid::Uuid;

use crate::memory::{Proposed, Trust};

/// A memory's relations to others that few memories have, boxed together
/// so a memory without any holds one pointer.
#[derive(Debug, Clone, Default)]
pub(crate) struct Relations {
    /// Titles its text references as `[[Title]]`.
    pub(crate) links: Box<[Box<str>]>,
    /// The memory its row says it replaces.
    pub(crate) supersedes: Option<Uuid>,
    /// The memories it was made from ([`crate::NewMemory::derived_from`]).
    pub(crate) derived_from: Vec<Uuid>,
    /// Memories a consolidation linked it to (`Event::Linked`).
    pub(crate) linked: Vec<Uuid>,
    /// What it proposes, when it is a proposal ([`Proposed`]).
    pub(crate) proposal: Option<Proposed>,
}

impl Relations {
    /// A new row's relations: boxed only when it has some.
    pub(crate) fn of_row(links: Vec<String>, supersedes: Option<Uuid>) -> Option<Box<Relations>> {
        (!links.is_empty() || supersedes.is_some()).then(|| {
            Box::new(Relations {
                links: super::boxed_list(links),
                supersedes,
                ..Relations::default()
            })
        })
    }
}

/// The sessions a memory was dealt to and those that cited it. Most
/// memories are never recalled, so the sets are boxed and made on the first
/// impression: an unused memory holds one pointer instead of two empty
/// hash sets (88 bytes less a memory).
#[derive(Debug, Clone, Default)]
pub(crate) struct Usage(Option<Box<Sessions>>);

/// [`Usage`]'s sets.
#[derive(Debug, Clone, Default)]
pub(crate) struct Sessions {
    pub(crate) dealt: HashSet<String>,
    pub(crate) cited: HashSet<String>,
}

impl Usage {
    pub(crate) fn sessions(&self) -> Option<&Sessions> {
        self.0.as_deref()
    }

    /// True when `session` was dealt the memory.
    pub(crate) fn dealt_to(&self, session: &str) -> bool {
        self.sessions().is_some_and(|s| s.dealt.contains(session))
    }

    /// True when `session` cited the memory.
    pub(crate) fn cited_by(&self, session: &str) -> bool {
        self.sessions().is_some_and(|s| s.cited.contains(session))
    }

    pub(super) fn deal(&mut self, session: String) {
        self.0.get_or_insert_default().dealt.insert(session);
    }

    /// Testimony counts only for what the session was dealt.
    pub(super) fn cite(&mut self, session: String) {
        if let Some(s) = self.0.as_deref_mut()
            && s.dealt.contains(&session)
        {
            s.cited.insert(session);
        }
    }
}

/// What redaction replaced in a memory (kind → count) and, when screening
/// quarantined it, the rule and the trust its writer gave. Few memories
/// have either, so both are boxed together: an unscreened memory holds one
/// pointer instead of an empty map and an empty option (48 bytes less).
#[derive(Debug, Clone, Default)]
pub(crate) struct Screening(Option<Box<Screened>>);

/// [`Screening`]'s fields.
#[derive(Debug, Clone, Default)]
pub(crate) struct Screened {
    pub(crate) redactions: BTreeMap<String, u32>,
    pub(crate) quarantine: Option<(String, Trust)>,
}

impl Screening {
    pub(crate) fn screened(&self) -> Option<&Screened> {
        self.0.as_deref()
    }

    pub(crate) fn redactions(&self) -> Option<&BTreeMap<String, u32>> {
        self.screened().map(|s| &s.redactions)
    }

    /// The rule that quarantined it and the trust its writer gave.
    pub(crate) fn quarantine(&self) -> Option<(&str, Trust)> {
        self.screened()?
            .quarantine
            .as_ref()
            .map(|(rule, trust)| (rule.as_str(), *trust))
    }

    pub(super) fn redacted(&mut self, counts: BTreeMap<String, u32>) {
        self.0.get_or_insert_default().redactions = counts;
    }

    pub(super) fn quarantined(&mut self, rule: String, trust: Trust) {
        self.0.get_or_insert_default().quarantine = Some((rule, trust));
    }
}
