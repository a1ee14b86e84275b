//! The memory model (§2): kinds, provenance, and the public view of a memory.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::Error;

macro_rules! closed_set {
    ($(#[$doc:meta])* $name:ident, $err:expr, { $($(#[$vdoc:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($(#[$vdoc])* $variant),+ }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            /// The value as stored and printed.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl FromStr for $name {
            type Err = Error;
            fn from_str(s: &str) -> Result<Self, Error> {
                match s { $($text => Ok($name::$variant),)+ other => Err($err(other)) }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { f.write_str(self.as_str()) }
        }
    };
}

closed_set!(
    /// What sort of knowledge a memory is. A closed set: unknown kinds are an error.
    Kind, |k: &str| Error::UnknownKind(k.to_string()), {
        /// Something that went wrong and will again.
        Pitfall => "pitfall",
        /// How things are done here.
        Convention => "convention",
        /// A plain note.
        Note => "note",
        /// What a session achieved.
        SessionOutcome => "session_outcome",
        /// What a person likes.
        Preference => "preference",
        /// A fact about the world or the code.
        Fact => "fact",
        /// Something that happened.
        Episode => "episode",
});

closed_set!(
    /// Whether a person said it or an agent inferred it.
    Source, |s: &str| Error::invalid("source", format!("`{s}` is not explicit or inferred")), {
        /// A person said it.
        Explicit => "explicit",
        /// Observed or guessed by an agent.
        Inferred => "inferred",
});

closed_set!(
    /// Where the text came from, for safety decisions (§7).
    Trust, |s: &str| Error::invalid("trust", format!("`{s}` is not user, agent, external or quarantined")), {
        /// Written by the person.
        User => "user",
        /// Written by an agent.
        Agent => "agent",
        /// Read from a web page, mail or document.
        External => "external",
        /// Held back for review: never served unless asked for.
        Quarantined => "quarantined",
});

/// A stored memory as callers see it, with its lifecycle counters.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Memory {
    /// UUID v7.
    pub id: Uuid,
    /// Hard partition.
    pub tenant: String,
    /// Scope inside the tenant.
    pub bank: String,
    /// What sort of knowledge it is.
    pub kind: Kind,
    /// Optional title, unique among the tenant's active memories.
    pub title: Option<String>,
    /// The text.
    pub content: String,
    /// Things it is about.
    pub elements: Vec<String>,
    /// Said by a person or inferred.
    pub source: Source,
    /// Where the text came from.
    pub trust: Trust,
    /// The agent that wrote it.
    pub agent: Option<String>,
    /// The session it came from.
    pub session_id: Option<String>,
    /// Confidence as written (inferred memories lose confidence over time at recall).
    pub confidence: f32,
    /// When it was said or happened.
    pub observed_at: DateTime<Utc>,
    /// When it was written.
    pub created_at: DateTime<Utc>,
    /// When it was last confirmed (starts at `observed_at`).
    pub last_confirmed_at: DateTime<Utc>,
    /// Independent confirmations (repeats that deduplicated into it, `confirm` calls).
    pub confirmations: u32,
    /// When it leaves recall, if ever.
    pub expires_at: Option<DateTime<Utc>>,
    /// The memory it replaced.
    pub supersedes: Option<Uuid>,
    /// The memory that replaced it.
    pub superseded_by: Option<Uuid>,
    /// Soft-deleted.
    pub forgotten: bool,
    /// Distinct sessions it was dealt to.
    pub impressions: u32,
    /// Distinct sessions that said they used it.
    pub citations: u32,
    /// Whether it has an embedding yet.
    pub has_vector: bool,
    /// An element it is about drifted since it was last confirmed: check it before relying on it.
    pub verify: bool,
    /// Titles it references as `[[Title]]`, resolved to the active memory
    /// holding the title, or pending (`id: None`) until one is written.
    pub links: Vec<Link>,
    /// What redaction replaced at write time: placeholder kind → count (§7).
    /// Never the values.
    pub redactions: BTreeMap<String, u32>,
    /// The screening rule that quarantined it, if the engine did (§7).
    pub quarantine_rule: Option<String>,
    /// The memories it was made from (a consolidation's fact), kept as
    /// provenance; empty for a memory written as it is.
    pub derived_from: Vec<Uuid>,
    /// Set when it was written as a proposal (a write into a bank that
    /// holds an agent's writes for review, [`crate::ProposalPolicy`]) or a
    /// consolidation proposed that it replace another: what it proposes
    /// and what became of it.
    pub proposal: Option<Proposed>,
}

/// A proposal carried by a memory ([`Memory::proposal`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Proposed {
    /// Held from recall until accepted: a write into a `propose` bank. A
    /// proposal that is not held is a served memory a consolidation
    /// proposed should replace `supersedes`.
    pub held: bool,
    /// The memories it replaces once accepted (most often one; a
    /// consolidation's replacement may name several).
    pub supersedes: Vec<Uuid>,
    /// Pending, accepted or rejected (`status`, and `by` and `reason` once
    /// decided, in JSON).
    #[serde(flatten)]
    pub status: ProposalStatus,
}

/// Where a proposal stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ProposalStatus {
    /// Waiting for [`crate::Engine::accept`] or [`crate::Engine::reject`].
    Pending,
    /// Accepted by `by`: applied through the write path.
    Accepted {
        /// Who accepted it.
        by: String,
    },
    /// Rejected by `by`: a held proposal is never served.
    Rejected {
        /// Who rejected it.
        by: String,
        /// Why, if they said.
        reason: Option<String>,
    },
}

impl Proposed {
    /// Whether it waits for a decision.
    pub fn is_pending(&self) -> bool {
        self.status == ProposalStatus::Pending
    }

    /// Whether it keeps its memory out of recall: held and not accepted.
    pub fn holds_back(&self) -> bool {
        self.held && !matches!(self.status, ProposalStatus::Accepted { .. })
    }
}

/// A `[[Title]]` reference.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Link {
    /// The referenced title.
    pub title: String,
    /// The active memory with that title, if one exists yet.
    pub id: Option<Uuid>,
}

impl Memory {
    /// Neither forgotten nor superseded, nor a proposal held for review.
    pub fn is_active(&self) -> bool {
        !self.forgotten
            && self.superseded_by.is_none()
            && !self.proposal.as_ref().is_some_and(Proposed::holds_back)
    }
}

/// A memory to write. Built with setters; only tenant, bank, kind and content
/// are required.
///
/// ```
/// use recall::{Kind, NewMemory};
/// let m = NewMemory::new("acme", "repo:api", Kind::Pitfall, "The gateway drops headers over 8 KB.")
///     .title("Gateway header limit")
///     .element("ApiGateway");
/// assert_eq!(m.elements, vec!["ApiGateway".to_string()]);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewMemory {
    /// Hard partition (`[A-Za-z0-9._:@/-]{1,128}`, no `..`).
    pub tenant: String,
    /// Scope inside the tenant (same alphabet).
    pub bank: String,
    /// What sort of knowledge it is.
    pub kind: Kind,
    /// The text (≤ 16 KiB by default).
    pub content: String,
    /// Optional unique title.
    #[serde(default)]
    pub title: Option<String>,
    /// Things it is about.
    #[serde(default)]
    pub elements: Vec<String>,
    /// Explicit (default) or inferred.
    #[serde(default = "default_source")]
    pub source: Source,
    /// Trust (default `agent`).
    #[serde(default = "default_trust")]
    pub trust: Trust,
    /// Confidence in (0, 1]; default 1.0.
    #[serde(default = "default_confidence")]
    pub confidence: f32,
    /// The agent that wrote it.
    #[serde(default)]
    pub agent: Option<String>,
    /// The session it came from.
    #[serde(default)]
    pub session_id: Option<String>,
    /// When it was said (default: now).
    #[serde(default)]
    pub observed_at: Option<DateTime<Utc>>,
    /// When it leaves recall.
    #[serde(default)]
    pub expires_at: Option<DateTime<Utc>>,
    /// Id or title of the memory this one replaces.
    #[serde(default)]
    pub supersedes: Option<String>,
    /// A precomputed embedding (bulk import); checked against the embedder's width.
    #[serde(default)]
    pub vector: Option<Vec<f32>>,
    /// Precomputed embeddings of the content's sentences, one per entry of
    /// [`crate::sentences`]`(content)` in order (none for a content of one
    /// sentence), so a caller that brings its own vectors gets the
    /// closest-sentence scoring a model-embedded memory gets. Only with
    /// `vector`; checked against the embedder's width.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sentence_vectors: Vec<Vec<f32>>,
    /// Ids of the tenant's memories it is made from (a consolidation's
    /// fact), kept as provenance ([`Memory::derived_from`]). Each must
    /// exist in the tenant. A memory is not a copy of its sources: write
    /// dedup and the similar band skip them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub derived_from: Vec<Uuid>,
}

fn default_source() -> Source {
    Source::Explicit
}
fn default_trust() -> Trust {
    Trust::Agent
}
fn default_confidence() -> f32 {
    1.0
}

impl NewMemory {
    /// A memory with the required fields and defaults for the rest.
    pub fn new(
        tenant: impl Into<String>,
        bank: impl Into<String>,
        kind: Kind,
        content: impl Into<String>,
    ) -> NewMemory {
        NewMemory {
            tenant: tenant.into(),
            bank: bank.into(),
            kind,
            content: content.into(),
            title: None,
            elements: Vec::new(),
            source: Source::Explicit,
            trust: Trust::Agent,
            confidence: 1.0,
            agent: None,
            session_id: None,
            observed_at: None,
            expires_at: None,
            supersedes: None,
            vector: None,
            sentence_vectors: Vec::new(),
            derived_from: Vec::new(),
        }
    }

    /// Sets the title.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// Adds an element.
    pub fn element(mut self, element: impl Into<String>) -> Self {
        self.elements.push(element.into());
        self
    }

    /// Sets source and confidence (inferred memories usually carry < 1.0).
    pub fn source(mut self, source: Source, confidence: f32) -> Self {
        self.source = source;
        self.confidence = confidence;
        self
    }

    /// Sets the trust level.
    pub fn trust(mut self, trust: Trust) -> Self {
        self.trust = trust;
        self
    }

    /// Sets the memories it is made from ([`NewMemory::derived_from`]).
    pub fn derived_from(mut self, ids: impl IntoIterator<Item = Uuid>) -> Self {
        self.derived_from = ids.into_iter().collect();
        self
    }

    /// Sets the writing agent.
    pub fn agent(mut self, agent: impl Into<String>) -> Self {
        self.agent = Some(agent.into());
        self
    }

    /// Sets when it was said (replays of old conversations).
    pub fn observed_at(mut self, at: DateTime<Utc>) -> Self {
        self.observed_at = Some(at);
        self
    }

    /// Sets when it leaves recall.
    pub fn expires_at(mut self, at: DateTime<Utc>) -> Self {
        self.expires_at = Some(at);
        self
    }

    /// Names (by id or title) the memory this one replaces.
    pub fn supersedes(mut self, id_or_title: impl Into<String>) -> Self {
        self.supersedes = Some(id_or_title.into());
        self
    }

    /// Supplies a precomputed embedding.
    pub fn vector(mut self, vector: Vec<f32>) -> Self {
        self.vector = Some(vector);
        self
    }

    /// Supplies precomputed embeddings of the content's sentences, with
    /// [`NewMemory::vector`]: one per entry of [`crate::sentences`], in order.
    ///
    /// ```
    /// # fn embed(_: &str) -> Vec<f32> { vec![1.0; 384] }
    /// let content = "Deploys run at noon. Freezes start Friday.";
    /// let memory = recall::NewMemory::new("acme", "repo:api", recall::Kind::Note, content)
    ///     .vector(embed(content))
    ///     .sentence_vectors(recall::sentences(content).iter().map(|s| embed(s)).collect());
    /// assert_eq!(memory.sentence_vectors.len(), 2);
    /// ```
    pub fn sentence_vectors(mut self, vectors: Vec<Vec<f32>>) -> Self {
        self.sentence_vectors = vectors;
        self
    }
}

/// A near memory reported on write (cosine in the similar band).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Similar {
    /// Its id.
    pub id: Uuid,
    /// Its title, if any.
    pub title: Option<String>,
    /// Cosine to the new memory.
    pub cosine: f32,
}

/// What `remember` did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Remembered {
    /// Stored as a new memory; `similar_to` lists near ones (0.82 ≤ cosine < 0.94).
    Stored {
        /// The new memory's id.
        id: Uuid,
        /// Near memories the writer may want to supersede.
        similar_to: Vec<Similar>,
        /// What redaction replaced (placeholder kind → count); empty when nothing.
        redactions: BTreeMap<String, u32>,
        /// The screening rule that quarantined it: it is stored with trust
        /// `quarantined` and not served until [`crate::Engine::release`].
        quarantined: Option<String>,
    },
    /// Stored as a proposal: the bank holds an agent's writes for review
    /// ([`crate::ProposalPolicy`]), so it is not served until
    /// [`crate::Engine::accept`]. Accepting it applies `supersedes`.
    Proposed {
        /// The proposal's id (a memory, held back).
        id: Uuid,
        /// The memory it replaces once accepted.
        supersedes: Option<Uuid>,
        /// Near memories (as [`Remembered::Stored`]'s).
        similar_to: Vec<Similar>,
        /// What redaction replaced.
        redactions: BTreeMap<String, u32>,
        /// The screening rule that quarantined it, if one did: it stays
        /// held back after acceptance until [`crate::Engine::release`].
        quarantined: Option<String>,
    },
    /// A near-copy (cosine ≥ 0.94, or equal normalized text without vectors)
    /// of an existing memory, which was confirmed instead. A proposal that
    /// copies a pending proposal confirms that one.
    Deduplicated {
        /// The existing memory.
        id: Uuid,
        /// Cosine to it (1.0 for equal text).
        cosine: f32,
    },
}

impl Remembered {
    /// The id of the memory that now holds the knowledge.
    pub fn id(&self) -> Uuid {
        match self {
            Remembered::Stored { id, .. }
            | Remembered::Proposed { id, .. }
            | Remembered::Deduplicated { id, .. } => *id,
        }
    }
}
