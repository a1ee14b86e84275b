//! Consolidation: what a pass over a tenant's memories proposes, decided
//! by a pure [`Consolidator`] over a [`ConsolidationBatch`]. The engine
//! gathers the batch, checks every proposal and applies it through the
//! normal write path and events ([`crate::Engine::consolidate`], in
//! `consolidation/pass.rs`); nothing here touches the store.
//!
//! The default, [`DefaultConsolidator`], calls no model and is
//! deterministic (the same batch gives the same proposals, in the same
//! order):
//! 1. near copies that slipped past write-time dedup (cosine at or above
//!    the dedup threshold, same bank and kind; e.g. written before a
//!    model was configured and backfilled) fold into the oldest;
//! 2. three or more episodes from two or more sessions about the same
//!    element that say the same thing (a connected group in the similar
//!    band, same bank, each pair sharing an element) become a `fact`
//!    quoting the group's most central member verbatim, derived from the
//!    group; the episodes stay. Episodes that name no element make no
//!    fact: on LoCoMo's turns (which name none) facts made from text alone
//!    lowered nDCG@10 on both halves (docs/MEASUREMENTS.md, "Consolidation").
//! 3. a newer memory that reads as a change of an older one ("no longer",
//!    "switched to", "instead of", "now ..."; [`reads_as_change`]), of the
//!    same bank and kind, about a shared element and in its similar band,
//!    proposes to supersede the newest such older memory: a
//!    [`Proposal::Supersede`], which waits in the review queue until a
//!    person or agent accepts it ([`crate::Engine::accept`]). A value
//!    changed three times makes a chain of two proposals.
//!
//! A consolidator of the caller's (or a [`LanguageModel`]'s answer) may also
//! propose a [`Proposal::Replace`] (several memories by one new content),
//! a [`Proposal::Confirm`] (a memory confirmed by evidence) and a
//! [`Proposal::Link`] (two memories that belong together).
//!
//! Forks and cycles cannot be auto-resolved either: a memory is superseded
//! once, so of two proposals replacing the same memory the second to be
//! accepted is refused and stays pending for a person to reject.

mod model;
mod pass;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::memory::{Kind, Memory};

pub use model::{LanguageModel, ModelConsolidator, ModelFuture, ModelRequest};
pub use pass::{Consolidate, Consolidation, ProposalOutcome};

/// What a [`Consolidator`] is given: the tenant's active memories that
/// changed since the last pass, their neighbours, and the pairs among
/// them in the similar band or closer.
#[derive(Debug, Clone)]
pub struct ConsolidationBatch {
    /// The tenant.
    pub tenant: String,
    /// The engine's clock at the start of the pass.
    pub now: DateTime<Utc>,
    /// Active, served memories: those written or confirmed since the last
    /// pass, and their neighbours. Proposals may cite only these.
    pub memories: Vec<Memory>,
    /// Pairs of `memories` in one bank at or above `similar_threshold`,
    /// each once, `a` the older.
    pub pairs: Vec<Pair>,
    /// Ids already among an active memory's `derived_from`: a group with
    /// one of them was consolidated before.
    pub already_derived: HashSet<Uuid>,
    /// [`crate::WriteConfig::dedup_threshold`].
    pub dedup_threshold: f32,
    /// [`crate::WriteConfig::similar_threshold`].
    pub similar_threshold: f32,
}

/// Two memories of a batch and their cosine.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Pair {
    /// The older memory.
    pub a: Uuid,
    /// The newer memory.
    pub b: Uuid,
    /// Their cosine.
    pub cosine: f32,
}

/// One change a [`Consolidator`] proposes (or a [`LanguageModel`] answers,
/// in the same JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Proposal {
    /// `copies` say what `into` says: each is superseded by `into`, and
    /// `into` is confirmed once per copy (as write-time dedup would have).
    Fold {
        /// The memory that stays.
        into: Uuid,
        /// The memories that leave recall, superseded by `into`.
        copies: Vec<Uuid>,
    },
    /// A new memory made from others, which stay; `derived_from` keeps them
    /// as its provenance ([`crate::NewMemory::derived_from`]).
    Add {
        /// The sources, all in one bank; the new memory goes there.
        derived_from: Vec<Uuid>,
        /// Its kind.
        memory_kind: Kind,
        /// Its content.
        content: String,
        /// Its elements.
        #[serde(default)]
        elements: Vec<String>,
    },
    /// A new memory that says what `old` say (several wordings merged into
    /// one, or a value restated): written through the write path with
    /// `derived_from` the olds, and superseding each of them (in a bank
    /// that holds writes for review, once it is accepted).
    Replace {
        /// The memories it replaces, all in one bank.
        old: Vec<Uuid>,
        /// Its kind.
        memory_kind: Kind,
        /// Its content.
        content: String,
        /// Its elements.
        #[serde(default)]
        elements: Vec<String>,
    },
    /// `evidence` shows that `id` still holds: `id` is confirmed once per
    /// piece of evidence; the evidence stays.
    Confirm {
        /// The memory confirmed.
        id: Uuid,
        /// The memories that confirm it.
        evidence: Vec<Uuid>,
    },
    /// `a` and `b` belong together: recall brings `b` in beside `a` as it
    /// would a `[[Title]]` link from `a`.
    Link {
        /// The memory that links.
        a: Uuid,
        /// The memory it links to.
        b: Uuid,
    },
    /// `by` (newer, served) reads as a change of `old`: once accepted,
    /// `old` is superseded by `by`. Never applied by the pass itself: it
    /// waits in the review queue ([`crate::Engine::proposals`]).
    Supersede {
        /// The memory that would leave recall.
        old: Uuid,
        /// The memory that replaces it.
        by: Uuid,
    },
    /// Nothing to do, and why (a model's answer; the default proposes
    /// nothing rather than saying so).
    Nothing {
        /// Why.
        reason: String,
    },
}

impl std::fmt::Display for Proposal {
    /// One line for a person: `fold 2 near copies into ID`, `add a fact
    /// from 3 memories: TEXT`, `supersede ID by ID`, `nothing: WHY`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Proposal::Fold { into, copies } => {
                write!(f, "fold {} near copies into {into}", copies.len())
            }
            Proposal::Add {
                derived_from,
                memory_kind,
                content,
                ..
            } => write!(
                f,
                "add a {memory_kind} from {} memories: {content}",
                derived_from.len()
            ),
            Proposal::Replace {
                old,
                memory_kind,
                content,
                ..
            } => write!(
                f,
                "replace {} memories by a {memory_kind}: {content}",
                old.len()
            ),
            Proposal::Confirm { id, evidence } => {
                write!(f, "confirm {id} by {} memories", evidence.len())
            }
            Proposal::Link { a, b } => write!(f, "link {a} to {b}"),
            Proposal::Supersede { old, by } => write!(f, "supersede {old} by {by}"),
            Proposal::Nothing { reason } => write!(f, "nothing: {reason}"),
        }
    }
}

impl Proposal {
    /// Every memory id it names.
    pub fn ids(&self) -> Vec<Uuid> {
        match self {
            Proposal::Fold { into, copies } => std::iter::once(*into)
                .chain(copies.iter().copied())
                .collect(),
            Proposal::Add { derived_from, .. } => derived_from.clone(),
            Proposal::Replace { old, .. } => old.clone(),
            Proposal::Confirm { id, evidence } => std::iter::once(*id)
                .chain(evidence.iter().copied())
                .collect(),
            Proposal::Supersede { old, by } => vec![*old, *by],
            Proposal::Link { a, b } => vec![*a, *b],
            Proposal::Nothing { .. } => Vec::new(),
        }
    }
}

/// Decides what a consolidation pass proposes. Pure: it sees only the
/// batch, and the engine checks and applies what it returns.
///
/// ```
/// use recall::{ConsolidationBatch, Consolidator, Proposal};
/// /// Proposes nothing, ever.
/// struct Quiet;
/// impl Consolidator for Quiet {
///     fn propose(&self, _batch: &ConsolidationBatch) -> Vec<Proposal> {
///         vec![Proposal::Nothing { reason: "quiet".into() }]
///     }
/// }
/// ```
pub trait Consolidator: Send + Sync {
    /// The proposals for `batch`, in the order they are to be applied.
    fn propose(&self, batch: &ConsolidationBatch) -> Vec<Proposal>;
}

/// The deterministic default (see the module's rules 1 to 3).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DefaultConsolidator {
    /// Fewest episodes that make a fact. Default 3.
    pub min_episodes: usize,
    /// Fewest distinct sessions among them. Default 2.
    pub min_sessions: usize,
}

impl Default for DefaultConsolidator {
    fn default() -> Self {
        DefaultConsolidator {
            min_episodes: 3,
            min_sessions: 2,
        }
    }
}

impl Consolidator for DefaultConsolidator {
    fn propose(&self, batch: &ConsolidationBatch) -> Vec<Proposal> {
        let by_id: HashMap<Uuid, &Memory> = batch.memories.iter().map(|m| (m.id, m)).collect();
        let mut proposals = Vec::new();

        // 1. Near copies within a bank and kind fold into the oldest.
        let copies = components(batch.pairs.iter().filter(|p| {
            p.cosine >= batch.dedup_threshold
                && both(&by_id, p, |a, b| a.bank == b.bank && a.kind == b.kind)
        }));
        let mut folded = HashSet::new();
        for group in copies {
            let mut members: Vec<&Memory> = group
                .iter()
                .filter_map(|id| by_id.get(id).copied())
                .collect();
            members.sort_by_key(|m| (m.created_at, m.id));
            let Some((into, rest)) = members.split_first() else {
                continue;
            };
            folded.extend(rest.iter().map(|m| m.id));
            proposals.push(Proposal::Fold {
                into: into.id,
                copies: rest.iter().map(|m| m.id).collect(),
            });
        }

        // 2. A repeated episode becomes a fact.
        let episode = |id: &Uuid| {
            by_id
                .get(id)
                .is_some_and(|m| m.kind == Kind::Episode && !folded.contains(id))
        };
        let groups = components(batch.pairs.iter().filter(|p| {
            p.cosine >= batch.similar_threshold
                && p.cosine < batch.dedup_threshold
                && episode(&p.a)
                && episode(&p.b)
                && both(&by_id, p, |a, b| a.bank == b.bank && share_an_element(a, b))
        }));
        for group in groups {
            if group.len() < self.min_episodes
                || group.iter().any(|id| batch.already_derived.contains(id))
            {
                continue;
            }
            let sessions: BTreeSet<&str> = group
                .iter()
                .filter_map(|id| by_id.get(id)?.session_id.as_deref())
                .collect();
            if sessions.len() < self.min_sessions {
                continue;
            }
            let Some(central) = most_central(&group, &batch.pairs).and_then(|id| by_id.get(&id))
            else {
                continue;
            };
            proposals.push(Proposal::Add {
                derived_from: group.iter().copied().collect(),
                memory_kind: Kind::Fact,
                content: central.content.clone(),
                elements: central.elements.clone(),
            });
        }

        // 3. A newer memory that reads as a change of an older one
        // proposes to supersede it; a person decides.
        let mut older: BTreeMap<Uuid, Vec<&Memory>> = BTreeMap::new();
        for p in batch
            .pairs
            .iter()
            .filter(|p| p.cosine >= batch.similar_threshold && p.cosine < batch.dedup_threshold)
        {
            let (Some(a), Some(b)) = (by_id.get(&p.a), by_id.get(&p.b)) else {
                continue;
            };
            let (old, new) = if (a.created_at, a.id) < (b.created_at, b.id) {
                (a, b)
            } else {
                (b, a)
            };
            if old.bank == new.bank
                && old.kind == new.kind
                && share_an_element(old, new)
                && new.proposal.is_none()
                && !folded.contains(&old.id)
                && !folded.contains(&new.id)
                && reads_as_change(&new.content)
            {
                older.entry(new.id).or_default().push(old);
            }
        }
        let mut changes: Vec<(&Memory, &Memory)> = older
            .into_iter()
            .filter_map(|(new, olds)| {
                let old = olds.into_iter().max_by_key(|m| (m.created_at, m.id))?;
                Some((old, *by_id.get(&new)?))
            })
            .collect();
        changes.sort_by_key(|(_, new)| (new.created_at, new.id));
        proposals.extend(changes.into_iter().map(|(old, new)| Proposal::Supersede {
            old: old.id,
            by: new.id,
        }));
        proposals
    }
}

/// Words that say a memory changes what an older one said.
const CHANGE_CUES: &[&str] = &[
    "no longer",
    "not anymore",
    "any more",
    "anymore",
    "switched to",
    "switched from",
    "instead of",
    "changed to",
    "moved to",
    "replaced",
    "replaces",
    "now",
    "from now on",
    "these days",
];

/// Whether `text` reads as a change of something said before: it has one
/// of the cue phrases ("no longer", "switched to", "instead of", "now",
/// ...) as whole words, in any case.
///
/// ```
/// use recall::reads_as_change;
/// assert!(reads_as_change("Deploys now run at 3 pm."));
/// assert!(reads_as_change("We switched to Postgres 16."));
/// assert!(!reads_as_change("I know the deploy runs at noon."));
/// ```
pub fn reads_as_change(text: &str) -> bool {
    let words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    let joined = format!(" {} ", words.join(" "));
    CHANGE_CUES
        .iter()
        .any(|cue| joined.contains(&format!(" {cue} ")))
}

/// Whether the pair's two memories are in the batch and `test` holds of them.
fn both(by_id: &HashMap<Uuid, &Memory>, p: &Pair, test: impl Fn(&Memory, &Memory) -> bool) -> bool {
    match (by_id.get(&p.a), by_id.get(&p.b)) {
        (Some(a), Some(b)) => test(a, b),
        _ => false,
    }
}

/// Whether two memories name an element in common.
fn share_an_element(a: &Memory, b: &Memory) -> bool {
    a.elements.iter().any(|e| b.elements.contains(e))
}

/// The connected groups of two or more that `edges` make, each sorted, in
/// the order of their smallest id (deterministic whatever the edge order).
fn components<'a>(edges: impl Iterator<Item = &'a Pair>) -> Vec<BTreeSet<Uuid>> {
    let mut parent: BTreeMap<Uuid, Uuid> = BTreeMap::new();
    fn root(parent: &mut BTreeMap<Uuid, Uuid>, id: Uuid) -> Uuid {
        let mut r = id;
        while let Some(&p) = parent.get(&r) {
            if p == r {
                break;
            }
            r = p;
        }
        parent.insert(id, r);
        r
    }
    for p in edges {
        parent.entry(p.a).or_insert(p.a);
        parent.entry(p.b).or_insert(p.b);
        let (ra, rb) = (root(&mut parent, p.a), root(&mut parent, p.b));
        if ra != rb {
            let (low, high) = if ra < rb { (ra, rb) } else { (rb, ra) };
            parent.insert(high, low);
        }
    }
    let ids: Vec<Uuid> = parent.keys().copied().collect();
    let mut groups: BTreeMap<Uuid, BTreeSet<Uuid>> = BTreeMap::new();
    for id in ids {
        let r = root(&mut parent, id);
        groups.entry(r).or_default().insert(id);
    }
    groups.into_values().filter(|g| g.len() >= 2).collect()
}

/// The member with the highest summed cosine to the others (ties: the
/// smallest id).
fn most_central(group: &BTreeSet<Uuid>, pairs: &[Pair]) -> Option<Uuid> {
    let mut sums: BTreeMap<Uuid, f32> = group.iter().map(|id| (*id, 0.0)).collect();
    for p in pairs {
        if group.contains(&p.a) && group.contains(&p.b) {
            *sums.entry(p.a).or_default() += p.cosine;
            *sums.entry(p.b).or_default() += p.cosine;
        }
    }
    sums.into_iter()
        .fold(None, |best: Option<(Uuid, f32)>, (id, s)| match best {
            Some((_, b)) if b >= s => best,
            _ => Some((id, s)),
        })
        .map(|(id, _)| id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(a: u128, b: u128, cosine: f32) -> Pair {
        Pair {
            a: Uuid::from_u128(a),
            b: Uuid::from_u128(b),
            cosine,
        }
    }

    #[test]
    fn components_join_chains_and_drop_singletons() {
        let edges = [pair(1, 2, 0.9), pair(3, 2, 0.9), pair(5, 6, 0.9)];
        let groups = components(edges.iter());
        let ids = |ns: &[u128]| {
            ns.iter()
                .map(|n| Uuid::from_u128(*n))
                .collect::<BTreeSet<_>>()
        };
        assert_eq!(groups, vec![ids(&[1, 2, 3]), ids(&[5, 6])]);
        // The same groups whatever the order the edges come in.
        let reversed: Vec<Pair> = edges.iter().rev().copied().collect();
        assert_eq!(components(reversed.iter()), groups);
    }

    #[test]
    fn the_most_central_member_is_closest_to_the_rest() {
        let group: BTreeSet<Uuid> = [1, 2, 3].map(Uuid::from_u128).into();
        let pairs = [pair(1, 2, 0.83), pair(2, 3, 0.9), pair(1, 3, 0.84)];
        assert_eq!(most_central(&group, &pairs), Some(Uuid::from_u128(3)));
    }
}
