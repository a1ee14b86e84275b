//! The in-memory state: every memory of every tenant with its counters,
//! folded from the store's records. The store is the truth; this is rebuilt
//! from it at open and kept in step by every write.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, TimeZone, Utc};
#[cfg(test)]
use recall_indexer::{MemoryRow, Record};
use recall_indexer::{VectorSet, dot};
use uuid::Uuid;

use crate::memory::{Kind, Link, Memory, ProposalStatus, Proposed, Source, Trust};
use crate::score::PartCosines;
use crate::sentences::sentences;

mod fold;
mod rare;

pub(crate) use fold::DerivedBatch;
pub(crate) use rare::{Relations, Screened, Screening, Sessions, Usage};

/// `list` boxed at its length. Collected in place, a row's list would keep
/// the capacity it was read with (four for one element) and be shrunk by a
/// reallocation per row: a tenth of an open's fold at 1M.
fn boxed_list(list: Vec<String>) -> Box<[Box<str>]> {
    let mut boxed = Vec::with_capacity(list.len());
    boxed.extend(list.into_iter().map(String::into_boxed_str));
    boxed.into_boxed_slice()
}

/// A vector set's row as a memory keeps it. The vector sets count their
/// rows in `u32` themselves, so a row past `u32::MAX` cannot exist; were one
/// asked for, `u32::MAX` names no row, and the memory reads as vectorless.
fn row_u32(row: usize) -> u32 {
    u32::try_from(row).unwrap_or(u32::MAX)
}

pub(crate) fn to_ms(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

pub(crate) fn from_ms(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms)
        .single()
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// What a memory's row said when it was written, as the engine keeps it
/// after the open: the row's id, kind, source and trust are kept typed in
/// [`MemoryState`], its vectors in the tenant's vector sets, its tenant
/// and bank by the tenant (the bank interned in [`RowMeta`]), and when it
/// expires in [`RowMeta`] too. Its text is boxed rather than growable, a
/// `Box<str>` being 16 bytes to a `String`'s 24: the open folds a million
/// of these, and the kernel zeroes every page they land on first (at a
/// million memories the row's copies of the tenant and bank were about a
/// third of the memories' bytes).
#[derive(Debug, Clone)]
pub(crate) struct WrittenRow {
    pub(crate) title: Option<Box<str>>,
    pub(crate) content: Box<str>,
    pub(crate) elements: Box<[Box<str>]>,
    pub(crate) agent: Option<Box<str>>,
    pub(crate) session_id: Option<Box<str>>,
    pub(crate) confidence: f32,
    pub(crate) observed_at_ms: i64,
    pub(crate) created_at_ms: i64,
}

impl WrittenRow {
    /// Its title as the public types hold it.
    pub(crate) fn owned_title(&self) -> Option<String> {
        owned(&self.title)
    }

    /// Its elements as the public types hold them.
    pub(crate) fn owned_elements(&self) -> Vec<String> {
        self.elements.iter().map(|e| e.to_string()).collect()
    }
}

fn owned(text: &Option<Box<str>>) -> Option<String> {
    text.as_deref().map(str::to_string)
}

/// One memory with its mutable counters.
#[derive(Debug, Clone)]
pub(crate) struct MemoryState {
    pub(crate) id: Uuid,
    pub(crate) row: WrittenRow,
    pub(crate) kind: Kind,
    pub(crate) source: Source,
    pub(crate) trust: Trust,
    pub(crate) last_confirmed_ms: i64,
    pub(crate) confirmations: u32,
    /// Drift stamps at or before this are acknowledged by a confirmation.
    pub(crate) drift_ack_ms: i64,
    pub(crate) forgotten: bool,
    pub(crate) superseded_by: Option<Uuid>,
    /// The sessions it was dealt to and those that cited it (§5).
    pub(crate) usage: Usage,
    /// Its row in [`TenantState::vectors`] ([`MemoryState::vector_row`]);
    /// `u32`, as a tenant's rows are counted in `u32` elsewhere too.
    vector_index: Option<u32>,
    /// Its rows in [`TenantState::sentences`] ([`MemoryState::sentence_rows`]).
    sentence_span: std::ops::Range<u32>,
    /// The hash of its text folded for dedup when there are no vectors
    /// ([`crate::validate::folded_hash`]).
    pub(crate) folded_hash: u64,
    /// What redaction replaced and why screening quarantined it, if either did.
    pub(crate) screening: Screening,
    /// What it replaces, what it was made from, what it links to and what
    /// it proposes ([`Relations`]); boxed, as nearly every memory has none
    /// of them.
    pub(crate) relations: Option<Box<Relations>>,
}

impl MemoryState {
    /// Its row in [`TenantState::vectors`], if it has a vector.
    pub(crate) fn vector_row(&self) -> Option<usize> {
        self.vector_index.map(|r| r as usize)
    }

    fn set_vector_row(&mut self, row: usize) {
        self.vector_index = Some(row_u32(row));
    }

    /// Its rows in [`TenantState::sentences`] (empty: none).
    pub(crate) fn sentence_rows(&self) -> std::ops::Range<usize> {
        self.sentence_span.start as usize..self.sentence_span.end as usize
    }

    fn set_sentence_rows(&mut self, rows: std::ops::Range<usize>) {
        self.sentence_span = row_u32(rows.start)..row_u32(rows.end);
    }
    /// Neither forgotten nor superseded, nor a proposal held for review.
    pub(crate) fn is_active(&self) -> bool {
        !self.forgotten && self.superseded_by.is_none() && !self.held_back()
    }

    /// A proposal held from recall until it is accepted.
    pub(crate) fn held_back(&self) -> bool {
        self.proposal().is_some_and(Proposed::holds_back)
    }

    /// A proposal that waits for a decision.
    pub(crate) fn pending(&self) -> Option<&Proposed> {
        self.proposal().filter(|p| p.is_pending())
    }

    /// Titles its text references as `[[Title]]`.
    pub(crate) fn links(&self) -> &[Box<str>] {
        self.relations.as_deref().map_or(&[], |r| &r.links)
    }

    /// The memory its row says it replaces.
    pub(crate) fn supersedes(&self) -> Option<Uuid> {
        self.relations.as_deref().and_then(|r| r.supersedes)
    }

    /// What it proposes, if it is a proposal.
    pub(crate) fn proposal(&self) -> Option<&Proposed> {
        self.relations.as_deref()?.proposal.as_ref()
    }

    /// The memories it was made from.
    pub(crate) fn derived_from(&self) -> &[Uuid] {
        self.relations
            .as_deref()
            .map_or(&[], |r| r.derived_from.as_slice())
    }

    /// The memories a consolidation linked it to.
    pub(crate) fn linked(&self) -> &[Uuid] {
        self.relations
            .as_deref()
            .map_or(&[], |r| r.linked.as_slice())
    }

    fn relations_mut(&mut self) -> &mut Relations {
        self.relations.get_or_insert_default()
    }

    pub(crate) fn impressions(&self) -> u32 {
        self.usage.sessions().map_or(0, |s| s.dealt.len() as u32)
    }

    pub(crate) fn citations(&self) -> u32 {
        self.usage.sessions().map_or(0, |s| s.cited.len() as u32)
    }
}

/// What the hot paths test for every row, kept apart from [`MemoryState`]
/// so a scan over 100k rows touches 24 bytes a row, not the whole memory.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RowMeta {
    /// The bank, interned per tenant.
    pub(crate) bank_id: u32,
    pub(crate) active: bool,
    pub(crate) quarantined: bool,
    pub(crate) inferred: bool,
    /// `i64::MAX` when it never expires.
    pub(crate) expires_at_ms: i64,
}

/// One tenant: its memories, lookups, vectors, drift stamps and ended sessions.
#[derive(Debug)]
pub(crate) struct TenantState {
    pub(crate) memories: Vec<MemoryState>,
    /// One entry per memory, same index.
    pub(crate) meta: Vec<RowMeta>,
    pub(crate) by_id: HashMap<Uuid, usize>,
    pub(crate) by_seq: HashMap<u64, usize>,
    /// Titles of active memories.
    pub(crate) titles: HashMap<String, usize>,
    pub(crate) vectors: VectorSet,
    /// The sentence vectors of memories of several sentences
    /// ([`crate::sentences`]), each row owned by its memory's index.
    pub(crate) sentences: VectorSet,
    /// Element → when its code last changed (§6).
    pub(crate) drift: HashMap<String, i64>,
    /// Sessions that ended, with when: their `session:<id>` banks expire (§7).
    pub(crate) ended_sessions: HashMap<String, i64>,
    /// The tenant's name, shared by its memories' rows.
    pub(crate) name: Arc<str>,
    /// Bank name → interned id.
    pub(crate) bank_ids: HashMap<String, u32>,
    /// Interned id → bank name, shared by the bank's memories' rows.
    pub(crate) banks: Vec<Arc<str>>,
    /// Memories stored without a vector (dedup falls back to text for them).
    pub(crate) without_vector: usize,
    /// When the last consolidation pass ran (its cursor), if one did.
    pub(crate) consolidated_ms: Option<i64>,
    /// While an open adopts vector files by key: memories whose rows came
    /// without their vector and that no file row stood for, as
    /// `(seq, index)`; their vectors are read from the tables after the
    /// fold ([`State::take_vectors_to_read`]).
    vectors_to_read: Vec<(u64, usize)>,
}

impl TenantState {
    fn new(name: &str, dim: usize) -> TenantState {
        TenantState {
            name: Arc::from(name),
            banks: Vec::new(),
            memories: Vec::new(),
            meta: Vec::new(),
            by_id: HashMap::new(),
            by_seq: HashMap::new(),
            titles: HashMap::new(),
            vectors: VectorSet::new(dim),
            sentences: VectorSet::new(dim),
            drift: HashMap::new(),
            ended_sessions: HashMap::new(),
            bank_ids: HashMap::new(),
            without_vector: 0,
            consolidated_ms: None,
            vectors_to_read: Vec::new(),
        }
    }

    /// Memory `i`'s cosine to the unit vector `query`, as a candidate's:
    /// the larger of its whole vector's and its closest sentence's (None
    /// without a vector).
    pub(crate) fn cosine(&self, i: usize, query: &[f32]) -> Option<f32> {
        let whole = dot(self.vectors.row(self.memories[i].vector_row()?)?, query);
        Some(
            self.sentence_cosine(i, query)
                .map_or(whole, |s| s.max(whole)),
        )
    }

    /// The cosine of memory `i`'s closest sentence to the unit vector `query`
    /// (None when it has no sentence vectors).
    pub(crate) fn sentence_cosine(&self, i: usize, query: &[f32]) -> Option<f32> {
        self.closest_sentence(i, query).map(|(cosine, _)| cosine)
    }

    /// Memory `i`'s best cosines to the unit vector `query` among its
    /// vectors that state something and those that only ask: its whole
    /// vector (as `is_question` says of the whole) and each sentence's.
    pub(crate) fn part_cosines(&self, i: usize, query: &[f32], is_question: bool) -> PartCosines {
        let m = &self.memories[i];
        let mut parts = PartCosines::default();
        let mut note = |vector: Option<&[f32]>, question: bool| {
            if let Some(v) = vector {
                let best = if question {
                    &mut parts.question
                } else {
                    &mut parts.statement
                };
                let cosine = dot(v, query);
                *best = Some(best.map_or(cosine, |c| c.max(cosine)));
            }
        };
        note(
            m.vector_row().and_then(|row| self.vectors.row(row)),
            is_question,
        );
        if !m.sentence_rows().is_empty() {
            // The sentence rows were embedded from these, in this order.
            for (row, sentence) in m.sentence_rows().zip(sentences(&m.row.content)) {
                note(
                    self.sentences.row(row),
                    crate::sentences::is_question(&sentence),
                );
            }
        }
        parts
    }

    /// Memory `i`'s vector closest to the unit vector `query`: its whole
    /// vector or one of its sentences' (the whole vector without a query;
    /// None when it has no vector).
    pub(crate) fn closest_vector(&self, i: usize, query: Option<&[f32]>) -> Option<&[f32]> {
        let whole = self.memories[i]
            .vector_row()
            .and_then(|row| self.vectors.row(row))?;
        Some(
            match query.and_then(|q| Some((q, self.closest_sentence(i, q)?))) {
                Some((q, (cosine, sentence))) if cosine > dot(whole, q) => sentence,
                _ => whole,
            },
        )
    }

    /// Memory `i`'s sentence vector closest to `query`, with its cosine.
    fn closest_sentence(&self, i: usize, query: &[f32]) -> Option<(f32, &[f32])> {
        self.memories[i]
            .sentence_rows()
            .filter_map(|row| self.sentences.row(row))
            .map(|v| (dot(v, query), v))
            .reduce(|best, next| if next.0 > best.0 { next } else { best })
    }

    /// The interned id of `bank`, if any memory of the tenant is in it.
    pub(crate) fn bank_id(&self, bank: &str) -> Option<u32> {
        self.bank_ids.get(bank).copied()
    }

    pub(crate) fn get(&self, id: &Uuid) -> Option<&MemoryState> {
        self.by_id.get(id).map(|i| &self.memories[*i])
    }

    /// An id or an active title → index.
    pub(crate) fn resolve(&self, id_or_title: &str) -> Option<usize> {
        Uuid::parse_str(id_or_title)
            .ok()
            .and_then(|id| self.by_id.get(&id).copied())
            .or_else(|| self.titles.get(id_or_title).copied())
    }

    /// The latest drift stamp on any of the memory's elements.
    fn latest_drift(&self, m: &MemoryState) -> Option<i64> {
        m.row
            .elements
            .iter()
            .filter_map(|e| self.drift.get(&**e).copied())
            .max()
    }

    /// True when one of the memory's elements drifted after its last
    /// confirmation (and no confirmation acknowledged that drift since).
    pub(crate) fn drifted(&self, m: &MemoryState) -> bool {
        self.latest_drift(m)
            .is_some_and(|at| at > m.last_confirmed_ms && at > m.drift_ack_ms)
    }

    /// The bank memory `index` lives in.
    pub(crate) fn bank_of(&self, index: usize) -> &str {
        self.meta
            .get(index)
            .and_then(|meta| self.banks.get(meta.bank_id as usize))
            .map_or("", |bank| bank)
    }

    /// True when memory `index` lives in the bank of a session that has ended.
    pub(crate) fn session_ended(&self, index: usize) -> bool {
        self.bank_of(index)
            .strip_prefix("session:")
            .is_some_and(|s| self.ended_sessions.contains_key(s))
    }

    /// The public view of the memory at `index`.
    pub(crate) fn view(&self, index: usize) -> Memory {
        let m = &self.memories[index];
        let r = &m.row;
        Memory {
            id: m.id,
            tenant: self.name.to_string(),
            bank: self.bank_of(index).to_string(),
            kind: m.kind,
            title: r.owned_title(),
            content: r.content.to_string(),
            elements: r.owned_elements(),
            source: m.source,
            trust: m.trust,
            agent: owned(&r.agent),
            session_id: owned(&r.session_id),
            confidence: r.confidence,
            observed_at: from_ms(r.observed_at_ms),
            created_at: from_ms(r.created_at_ms),
            last_confirmed_at: from_ms(m.last_confirmed_ms),
            confirmations: m.confirmations,
            expires_at: self
                .meta
                .get(index)
                .map(|meta| meta.expires_at_ms)
                .filter(|&at| at != i64::MAX)
                .map(from_ms),
            supersedes: m.supersedes(),
            superseded_by: m.superseded_by,
            forgotten: m.forgotten,
            impressions: m.impressions(),
            citations: m.citations(),
            has_vector: m.vector_row().is_some(),
            verify: self.drifted(m),
            links: m
                .links()
                .iter()
                .map(|title| Link {
                    title: title.to_string(),
                    id: self.titles.get(&**title).map(|i| self.memories[*i].id),
                })
                // Links by id: named by the other memory's title, or its id.
                .chain(m.linked().iter().map(|id| {
                    Link {
                        title: self
                            .get(id)
                            .and_then(|other| other.row.owned_title())
                            .unwrap_or_else(|| id.to_string()),
                        id: Some(*id),
                    }
                }))
                .collect(),
            redactions: m.screening.redactions().cloned().unwrap_or_default(),
            quarantine_rule: m.screening.quarantine().map(|(rule, _)| rule.to_string()),
            derived_from: m.derived_from().to_vec(),
            proposal: m.proposal().cloned(),
        }
    }

    pub(crate) fn view_of(&self, id: &Uuid) -> Option<Memory> {
        self.by_id.get(id).map(|i| self.view(*i))
    }

    /// Applies an accepted proposal: a held memory is served from now on
    /// (and takes its title, if no active memory holds it), and records
    /// what it supersedes (the `superseded_by` event on the older memory,
    /// written before this one, took that out of recall).
    fn accepted(&mut self, index: usize, by: String) {
        let m = &mut self.memories[index];
        let Some(r) = m.relations.as_deref_mut() else {
            return;
        };
        let Some(p) = r.proposal.as_mut() else {
            return;
        };
        p.status = ProposalStatus::Accepted { by };
        if let Some(old) = p.supersedes.first().copied() {
            r.supersedes = Some(old);
        }
        if m.is_active() {
            self.meta[index].active = true;
            if let Some(title) = &self.memories[index].row.title {
                self.titles.entry(title.to_string()).or_insert(index);
            }
        }
    }

    fn deactivate(&mut self, index: usize) {
        self.meta[index].active = false;
        if let Some(title) = &self.memories[index].row.title
            && self.titles.get(&**title) == Some(&index)
        {
            self.titles.remove(&**title);
        }
    }
}

/// All tenants.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) tenants: HashMap<String, TenantState>,
    dim: usize,
    /// Tenants created from now on defer their vector sets' partitions
    /// (a store being opened; see [`crate::derived`]).
    defer_partitions: bool,
    /// Memory rows without a vector may have one in the tables that the
    /// open did not read ([`recall_indexer::StoreOptions::elide_vectors`]):
    /// each takes its tenant's next file row when that row's key is its
    /// own, and is listed to be read otherwise.
    vectors_elided: bool,
    /// Records that may have added vector rows were applied since the
    /// last look for full blocks to map ([`crate::derived`]), which
    /// clears it: writes of events alone skip that look.
    pub(crate) vectors_grew: bool,
}

impl State {
    pub(crate) fn new(dim: usize) -> State {
        State {
            tenants: HashMap::new(),
            dim,
            defer_partitions: false,
            vectors_elided: false,
            vectors_grew: false,
        }
    }

    /// A state for a store being opened: every vector set pushes its rows
    /// without partition upkeep until [`crate::derived::resume_partitions`].
    /// With `vectors_elided`, the store's memory rows come without their
    /// vectors (see [`State::take_vectors_to_read`]).
    pub(crate) fn opening(dim: usize, vectors_elided: bool) -> State {
        State {
            defer_partitions: true,
            vectors_elided,
            ..State::new(dim)
        }
    }

    /// Ends the fold of an open whose rows came without vectors: the
    /// memories whose vectors no file row stood for, as `(seq, tenant,
    /// index)` in sequence order, for [`State::apply_read_vector`].
    pub(crate) fn take_vectors_to_read(&mut self) -> Vec<(u64, String, usize)> {
        self.vectors_elided = false;
        let mut out: Vec<(u64, String, usize)> = self
            .tenants
            .iter_mut()
            .flat_map(|(name, t)| {
                std::mem::take(&mut t.vectors_to_read)
                    .into_iter()
                    .map(move |(seq, index)| (seq, name.clone(), index))
            })
            .collect();
        out.sort_unstable_by_key(|(seq, ..)| *seq);
        out
    }

    /// Gives memory `index` of `tenant` the vector the tables hold for it
    /// (see [`State::take_vectors_to_read`]), as its row would have at
    /// the fold; one that has a vector by now keeps it.
    pub(crate) fn apply_read_vector(&mut self, tenant: &str, index: usize, vector: &[f32]) {
        let Some(t) = self.tenants.get_mut(tenant) else {
            return;
        };
        let Some(memory) = t.memories.get_mut(index) else {
            return;
        };
        if memory.vector_row().is_some() || vector.len() != self.dim {
            return;
        }
        t.vectors.push(index, vector);
        memory.set_vector_row(t.vectors.len() - 1);
        t.without_vector = t.without_vector.saturating_sub(1);
        self.vectors_grew = true;
    }

    /// `tenant`'s state, created empty if it has none (always `Some`).
    fn tenant_or_new(&mut self, tenant: &str) -> Option<&mut TenantState> {
        // Looked up before inserting: `entry` would allocate the key per row.
        if !self.tenants.contains_key(tenant) {
            let mut state = TenantState::new(tenant, self.dim);
            if self.defer_partitions {
                state.vectors.defer_partitions();
                state.sentences.defer_partitions();
            }
            self.tenants.insert(tenant.to_string(), state);
        }
        self.tenants.get_mut(tenant)
    }

    /// Makes room in `tenant`'s state for `memories` memories before they
    /// are applied (an open that knows the tenant's size from its saved
    /// partitions): the memories, their maps and the whole vectors' sign
    /// codes then grow once instead of doubling, each doubling a copy into
    /// pages never touched before. A
    /// reservation that cannot be made is skipped; the state grows as it
    /// would have.
    pub(crate) fn reserve_tenant(&mut self, tenant: &str, memories: usize) {
        let Some(state) = self.tenant_or_new(tenant) else {
            return;
        };
        let more = memories.saturating_sub(state.memories.len());
        let reserved = state.memories.try_reserve(more).is_ok()
            && state.meta.try_reserve(more).is_ok()
            && state.by_id.try_reserve(more).is_ok()
            && state.by_seq.try_reserve(more).is_ok()
            && state.vectors.reserve(memories);
        if !reserved {
            tracing::debug!(
                tenant,
                memories,
                "no room reserved for the tenant's memories"
            );
        }
    }

    /// Ends [`State::opening`]: tenants created later partition as they grow.
    pub(crate) fn opened(&mut self) {
        self.defer_partitions = false;
    }

    pub(crate) fn tenant(&self, tenant: &str) -> Option<&TenantState> {
        self.tenants.get(tenant)
    }
}

/// A memory row as the engine's unit tests write it: tenant `t`, bank
/// `org`, no title, written at time 0 by an agent, its id made from `seq`.
#[cfg(test)]
pub(crate) fn test_row(seq: u64, kind: &str, content: &str, vector: Vec<f32>) -> MemoryRow {
    MemoryRow {
        seq,
        id: Uuid::from_u128(u128::from(seq)).to_string(),
        tenant: "t".into(),
        bank: "org".into(),
        kind: kind.into(),
        title: None,
        content: content.into(),
        elements: Vec::new(),
        source: "explicit".into(),
        trust: "agent".into(),
        agent: None,
        session_id: None,
        confidence: 1.0,
        observed_at_ms: 0,
        created_at_ms: 0,
        expires_at_ms: None,
        supersedes: None,
        vector: Some(vector),
        sentences: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memories(n: u64) -> Vec<Record> {
        (1..=n)
            .map(|seq| {
                Record::Memory(test_row(
                    seq,
                    "fact",
                    &format!("fact number {seq}"),
                    vec![1.0, 0.0, 0.0, 0.0],
                ))
            })
            .collect()
    }

    #[test]
    fn a_tenant_reserved_before_its_rows_folds_them_alike_and_grows_once() {
        let mut reserved = State::opening(4, false);
        reserved.reserve_tenant("t", 300);
        let room = reserved.tenants["t"].memories.capacity();
        assert!(room >= 300);
        reserved.apply_all(memories(300));
        assert_eq!(reserved.tenants["t"].memories.capacity(), room);

        let mut grown = State::opening(4, false);
        grown.apply_all(memories(300));
        let (a, b) = (&reserved.tenants["t"], &grown.tenants["t"]);
        assert_eq!(a.memories.len(), 300);
        let ids = |t: &TenantState| t.memories.iter().map(|m| m.id).collect::<Vec<_>>();
        assert_eq!(ids(a), ids(b));
        assert_eq!(a.by_id, b.by_id);
        assert_eq!(a.vectors.len(), b.vectors.len());

        // A size no machine has room for is skipped, not a failure.
        let mut huge = State::opening(4, false);
        huge.reserve_tenant("t", usize::MAX / 2);
        huge.apply_all(memories(3));
        assert_eq!(huge.tenants["t"].memories.len(), 3);
    }

    #[test]
    fn a_folded_row_reads_back_whole_from_the_tenant_it_lives_in() {
        let mut state = State::opening(4, false);
        let mut first = test_row(
            1,
            "fact",
            "The [[Gateway]] drops idle sockets.",
            vec![0.0, 1.0, 0.0, 0.0],
        );
        first.bank = "repo:api".into();
        first.title = Some("Sockets".into());
        first.elements = vec!["src/net.rs".into(), "src/gateway.rs".into()];
        first.agent = Some("coder".into());
        first.session_id = Some("s-7".into());
        first.confidence = 0.75;
        first.observed_at_ms = 1_000;
        first.created_at_ms = 2_000;
        first.expires_at_ms = Some(9_000);
        first.sentences = vec![vec![1.0, 0.0, 0.0, 0.0], vec![0.0, 0.0, 1.0, 0.0]];
        let mut second = test_row(2, "pitfall", "Never retry a 400.", vec![1.0, 0.0, 0.0, 0.0]);
        second.bank = "session:s-7".into();
        second.vector = None;
        let mut third = test_row(3, "pitfall", "Never retry a 4xx.", vec![1.0, 0.0, 0.0, 0.0]);
        third.supersedes = Some(Uuid::from_u128(2).to_string());
        state.apply_all(vec![
            Record::Memory(first),
            Record::Memory(second),
            Record::Memory(third),
        ]);
        let t = &state.tenants["t"];

        let m = t.view(0);
        assert_eq!((m.tenant.as_str(), m.bank.as_str()), ("t", "repo:api"));
        assert_eq!(m.title.as_deref(), Some("Sockets"));
        assert_eq!(m.content, "The [[Gateway]] drops idle sockets.");
        assert_eq!(m.elements, ["src/net.rs", "src/gateway.rs"]);
        assert_eq!(
            (m.agent.as_deref(), m.session_id.as_deref()),
            (Some("coder"), Some("s-7"))
        );
        assert_eq!(m.confidence, 0.75);
        assert_eq!(m.expires_at, Some(from_ms(9_000)));
        assert_eq!(m.links.len(), 1);
        assert_eq!(m.links[0].title, "Gateway");
        assert!(m.has_vector);
        assert_eq!(t.memories[0].vector_row(), Some(0));
        assert_eq!(t.memories[0].sentence_rows(), 0..2);

        let m = t.view(1);
        assert_eq!(m.bank, "session:s-7");
        assert_eq!(m.expires_at, None);
        assert!(!m.has_vector);
        assert_eq!(t.memories[1].vector_row(), None);
        assert!(t.memories[1].sentence_rows().is_empty());
        assert_eq!((t.bank_of(0), t.bank_of(1)), ("repo:api", "session:s-7"));
        assert_eq!(m.superseded_by, Some(Uuid::from_u128(3)));
        assert_eq!(t.view(2).supersedes, Some(Uuid::from_u128(2)));
        assert_eq!(t.view(0).supersedes, None);
    }

    #[test]
    fn a_row_read_twice_or_naming_itself_as_replaced_is_folded_once_and_served() {
        let mut state = State::opening(4, false);
        let mut own = test_row(
            1,
            "fact",
            "Builds run on Fridays.",
            vec![1.0, 0.0, 0.0, 0.0],
        );
        own.supersedes = Some(own.id.clone());
        let mut unreadable = test_row(2, "gossip", "Not a kind.", vec![0.0, 1.0, 0.0, 0.0]);
        unreadable.id = "not-an-id".into();
        state.apply_all(vec![
            Record::Memory(own.clone()),
            Record::Memory(own),
            Record::Memory(unreadable),
        ]);
        let t = &state.tenants["t"];
        assert_eq!(t.memories.len(), 1);
        assert_eq!(t.by_id.len(), 1);
        assert!(t.memories[0].is_active());
        assert!(t.meta[0].active);
    }

    /// The open writes one of these per memory (a million at 1M) into
    /// pages the kernel zeroes first: a field that grows it past this
    /// belongs boxed, like [`Relations`], or in the tenant, like the bank.
    #[test]
    fn a_memory_s_state_stays_within_its_bytes() {
        assert!(
            size_of::<MemoryState>() <= 216,
            "{} bytes",
            size_of::<MemoryState>()
        );
    }
}
