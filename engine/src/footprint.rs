//! Where an open engine's memory goes: the bytes its in-memory state holds,
//! by part ([`MemoryUse`], from [`crate::Engine::memory_use`]).
//!
//! The figures are the heap the parts hold allocated (capacities, not
//! lengths), counted from the structures themselves; hash maps are counted
//! at their capacity times their entry's size. What the process holds on
//! top (the allocator's retained pages, the model, LanceDB's and tantivy's
//! caches, the mapped index files) is the difference to the resident set.

use std::collections::{HashMap, HashSet};

use recall_indexer::VectorBytes;

use crate::memory::ProposalStatus;
use crate::state::{MemoryState, RowMeta, State, TenantState};

/// Bytes held by an open engine's in-memory state, by part.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryUse {
    /// Memories: their rows (text, elements, provenance), counters and
    /// per-row metadata.
    pub memories: usize,
    /// The lookups by id, sequence number and title.
    pub lookups: usize,
    /// Whole-memory vectors: the `f32` rows, sign codes and partitions.
    pub vectors: VectorBytes,
    /// Sentence vectors: the same parts.
    pub sentence_vectors: VectorBytes,
    /// Vector rows (whole and sentence) mapped from their derived files
    /// instead of held on the heap: not in [`MemoryUse::total`], resident
    /// only as far as scans read them, and as page cache the kernel can
    /// take back (`DATA/derived/vectors/`).
    pub mapped_vectors: usize,
}

impl MemoryUse {
    /// All parts together.
    ///
    /// ```
    /// let use_ = recall::MemoryUse::default();
    /// assert_eq!(use_.total(), 0);
    /// ```
    pub fn total(&self) -> usize {
        self.memories + self.lookups + self.vectors.total() + self.sentence_vectors.total()
    }
}

/// What `state` holds, summed over its tenants.
pub(crate) fn memory_use(state: &State) -> MemoryUse {
    state
        .tenants
        .values()
        .map(tenant_use)
        .fold(MemoryUse::default(), |a, b| MemoryUse {
            memories: a.memories + b.memories,
            lookups: a.lookups + b.lookups,
            vectors: a.vectors + b.vectors,
            sentence_vectors: a.sentence_vectors + b.sentence_vectors,
            mapped_vectors: a.mapped_vectors + b.mapped_vectors,
        })
}

fn tenant_use(t: &TenantState) -> MemoryUse {
    let memories = t.memories.capacity() * size_of::<MemoryState>()
        + t.memories.iter().map(memory_heap).sum::<usize>()
        + t.meta.capacity() * size_of::<RowMeta>();
    let lookups = map_bytes(&t.by_id)
        + map_bytes(&t.by_seq)
        + map_bytes(&t.titles)
        + t.titles.keys().map(String::capacity).sum::<usize>()
        + map_bytes(&t.drift)
        + map_bytes(&t.ended_sessions)
        + map_bytes(&t.bank_ids)
        + t.bank_ids.keys().map(String::capacity).sum::<usize>()
        + t.banks.iter().map(|b| b.len()).sum::<usize>()
        + t.name.len();
    MemoryUse {
        memories,
        lookups,
        vectors: t.vectors.heap_bytes(),
        sentence_vectors: t.sentences.heap_bytes(),
        mapped_vectors: t.vectors.mapped_bytes() + t.sentences.mapped_bytes(),
    }
}

/// The heap one memory's fields point to (its struct is counted apart).
fn memory_heap(m: &MemoryState) -> usize {
    let r = &m.row;
    let optional = |s: &Option<Box<str>>| s.as_ref().map_or(0, |s| s.len());
    let list = |l: &[Box<str>]| size_of_val(l) + l.iter().map(|s| s.len()).sum::<usize>();
    // The tenant and bank names are the tenant's (counted once per tenant).
    let strings = optional(&r.title)
        + r.content.len()
        + list(&r.elements)
        + optional(&r.agent)
        + optional(&r.session_id);
    strings
        + m.usage.sessions().map_or(0, |s| {
            size_of::<crate::state::Sessions>() + set_bytes(&s.dealt) + set_bytes(&s.cited)
        })
        + m.screening.screened().map_or(0, |s| {
            size_of::<crate::state::Screened>()
                + s.redactions
                    .keys()
                    .map(|k| k.capacity() + 48)
                    .sum::<usize>()
                + s.quarantine.as_ref().map_or(0, |(rule, _)| rule.capacity())
        })
        + m.relations.as_deref().map_or(0, |r| {
            let ids = |v: &Vec<uuid::Uuid>| v.capacity() * size_of::<uuid::Uuid>();
            size_of::<crate::state::Relations>()
                + list(&r.links)
                + ids(&r.derived_from)
                + ids(&r.linked)
                + r.proposal.as_ref().map_or(0, |p| {
                    ids(&p.supersedes)
                        + match &p.status {
                            ProposalStatus::Pending => 0,
                            ProposalStatus::Accepted { by } => by.capacity(),
                            ProposalStatus::Rejected { by, reason } => {
                                by.capacity() + reason.as_ref().map_or(0, String::capacity)
                            }
                        }
                })
        })
}

/// A hash map's table: a slot and a control byte per bucket.
fn map_bytes<K, V>(map: &HashMap<K, V>) -> usize {
    map.capacity() * (size_of::<(K, V)>() + 1)
}

fn set_bytes(set: &HashSet<String>) -> usize {
    set.capacity() * (size_of::<String>() + 1) + set.iter().map(String::capacity).sum::<usize>()
}
