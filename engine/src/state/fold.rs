//! Folding the store's records into the state: what each memory row
//! derives on its own ([`DerivedBatch`], in parallel and, at an open, on
//! the thread that reads the store) and the records applied in order
//! ([`State::apply_derived`]), which is what an open's fold thread and
//! every write run.

use std::str::FromStr;
use std::sync::Arc;

use rayon::prelude::*;
use recall_indexer::{EventRow, MemoryRow, Placement, Record, VectorRow};
use uuid::Uuid;

use super::{
    MemoryState, Relations, RowMeta, Screening, State, Usage, WrittenRow, boxed_list, row_u32,
};
use crate::event::{Event, EventDecodeError};
use crate::links::parse_links;
use crate::memory::{Kind, ProposalStatus, Proposed, Source, Trust};

/// Batches at least this large derive their rows' text fields in parallel.
const PARALLEL_DERIVE_FROM: usize = 64;

/// What a memory row's state derives from its text: the work per row that
/// needs no other row, so it can run in parallel and off the thread that
/// folds ([`DerivedBatch`]).
struct Derived {
    /// The row's id, kind, source and trust, parsed (None: one of them is
    /// not readable by this engine).
    parsed: Option<(Uuid, Kind, Source, Trust)>,
    folded_hash: u64,
    links: Vec<String>,
}

impl Derived {
    fn of(row: &MemoryRow) -> Derived {
        let parsed = (
            Uuid::parse_str(&row.id),
            Kind::from_str(&row.kind),
            Source::from_str(&row.source),
            Trust::from_str(&row.trust),
        );
        Derived {
            parsed: match parsed {
                (Ok(id), Ok(kind), Ok(source), Ok(trust)) => Some((id, kind, source, trust)),
                _ => None,
            },
            folded_hash: crate::validate::folded_hash(&crate::validate::normalized_text(
                &row.content,
            )),
            links: parse_links(&row.content),
        }
    }
}

/// Records with what their memory rows derive ([`Derived`]), derived before
/// the state is locked: an open derives the next batch on the thread that
/// reads the store while the fold's thread applies the one before.
pub(crate) struct DerivedBatch {
    records: Vec<Record>,
    derived: Vec<Option<Derived>>,
}

impl DerivedBatch {
    /// Derives `records`' memory rows, in parallel for large batches.
    pub(crate) fn of(records: Vec<Record>) -> DerivedBatch {
        let derive = |record: &Record| match record {
            Record::Memory(row) => Some(Derived::of(row)),
            Record::Event(_) | Record::Vector(_) => None,
        };
        let derived = if records.len() >= PARALLEL_DERIVE_FROM {
            records.par_iter().map(derive).collect()
        } else {
            records.iter().map(derive).collect()
        };
        DerivedBatch { records, derived }
    }

    /// The records, in order.
    pub(crate) fn records(&self) -> &[Record] {
        &self.records
    }
}

impl State {
    /// Applies one durable record.
    pub(crate) fn apply(&mut self, record: Record) {
        if matches!(record, Record::Memory(_) | Record::Vector(_)) {
            self.vectors_grew = true;
        }
        match record {
            Record::Memory(row) => {
                let derived = Derived::of(&row);
                self.apply_memory(row, derived, None);
            }
            Record::Event(event) => self.apply_event(&event),
            Record::Vector(vector) => self.apply_vector(vector),
        }
    }

    /// Applies records in order, like [`State::apply`] on each. What a
    /// memory row derives from its text is computed first, in parallel for
    /// large batches: the caller holds the state's write lock meanwhile.
    pub(crate) fn apply_all(&mut self, records: Vec<Record>) {
        self.apply_derived(DerivedBatch::of(records), Vec::new());
    }

    /// [`State::apply_all`] for records whose vectors' lists the write
    /// path's probe found (`placements[i]` belongs to `records[i]`; a
    /// shorter list leaves the rest to the set's own assignment).
    pub(crate) fn apply_placed(
        &mut self,
        records: Vec<Record>,
        placements: Vec<Option<Placement>>,
    ) {
        self.apply_derived(DerivedBatch::of(records), placements);
    }

    /// [`State::apply_placed`] for records derived beforehand.
    pub(crate) fn apply_derived(
        &mut self,
        batch: DerivedBatch,
        placements: Vec<Option<Placement>>,
    ) {
        let mut placements = placements.into_iter();
        for (record, derived) in batch.records.into_iter().zip(batch.derived) {
            let placement = placements.next().flatten();
            match (record, derived) {
                (Record::Memory(row), Some(derived)) => {
                    self.vectors_grew = true;
                    self.apply_memory(row, derived, placement)
                }
                (record, _) => self.apply(record),
            }
        }
    }

    /// Adds a memory row (rows with unknown kinds or ids are skipped with a
    /// warning: they were written by a newer or damaged engine).
    fn apply_memory(&mut self, mut row: MemoryRow, derived: Derived, placement: Option<Placement>) {
        let Some((id, kind, source, trust)) = derived.parsed else {
            tracing::warn!(id = %row.id, "skipping a stored memory this engine cannot read");
            return;
        };
        let (dim, elided) = (self.dim, self.vectors_elided);
        let Some(tenant) = self.tenant_or_new(&row.tenant) else {
            return;
        };
        let index = tenant.memories.len();
        // One probe of the largest map per row: taken here, as nothing
        // below returns before the memory is pushed.
        let std::collections::hash_map::Entry::Vacant(slot) = tenant.by_id.entry(id) else {
            return;
        };
        slot.insert(index);
        let supersedes = row
            .supersedes
            .as_deref()
            .and_then(|s| Uuid::parse_str(s).ok());
        if let Some(old) = supersedes.filter(|&old| old != id)
            && let Some(&old_index) = tenant.by_id.get(&old)
        {
            tenant.memories[old_index].superseded_by = Some(id);
            tenant.deactivate(old_index);
        }
        let vector_row = match row.vector.take() {
            Some(v) if v.len() == dim => {
                tenant.vectors.push_placed(index, &v, placement);
                Some(tenant.vectors.len() - 1)
            }
            Some(_) => None,
            None if elided => {
                let key = crate::derived::row_key(&id, derived.folded_hash);
                if tenant.vectors.next_key() == Some(key) && tenant.vectors.adopt_next(index) {
                    Some(tenant.vectors.len() - 1)
                } else {
                    tenant.vectors_to_read.push((row.seq, index));
                    None
                }
            }
            None => None,
        };
        let first_sentence = tenant.sentences.len();
        for v in std::mem::take(&mut row.sentences) {
            if v.len() == dim {
                tenant.sentences.push(index, &v);
            }
        }
        let sentence_rows = first_sentence..tenant.sentences.len();
        if let Some(title) = &row.title {
            // A held proposal may carry the title of the memory it would
            // replace; that memory keeps it until the proposal is accepted.
            tenant.titles.entry(title.clone()).or_insert(index);
        }
        if vector_row.is_none() {
            tenant.without_vector += 1;
        }
        let bank_id = match tenant.bank_ids.get(&row.bank) {
            Some(id) => *id,
            None => {
                let next = tenant.bank_ids.len() as u32;
                tenant.bank_ids.insert(row.bank.clone(), next);
                tenant.banks.push(Arc::from(row.bank.as_str()));
                next
            }
        };
        tenant.by_seq.insert(row.seq, index);
        tenant.meta.push(RowMeta {
            bank_id,
            active: true,
            quarantined: trust == Trust::Quarantined,
            inferred: source == Source::Inferred,
            expires_at_ms: row.expires_at_ms.unwrap_or(i64::MAX),
        });
        tenant.memories.push(MemoryState {
            id,
            folded_hash: derived.folded_hash,
            last_confirmed_ms: row.observed_at_ms,
            row: WrittenRow {
                title: row.title.map(String::into_boxed_str),
                content: row.content.into_boxed_str(),
                elements: boxed_list(row.elements),
                agent: row.agent.map(String::into_boxed_str),
                session_id: row.session_id.map(String::into_boxed_str),
                confidence: row.confidence,
                observed_at_ms: row.observed_at_ms,
                created_at_ms: row.created_at_ms,
            },
            kind,
            source,
            trust,
            confirmations: 0,
            drift_ack_ms: i64::MIN,
            forgotten: false,
            superseded_by: None,
            usage: Usage::default(),
            vector_index: vector_row.map(row_u32),
            sentence_span: row_u32(sentence_rows.start)..row_u32(sentence_rows.end),
            screening: Screening::default(),
            relations: Relations::of_row(derived.links, supersedes),
        });
    }

    fn apply_vector(&mut self, row: VectorRow) {
        let Some(tenant) = self.tenants.get_mut(&row.tenant) else {
            return;
        };
        let Some(&index) = Uuid::parse_str(&row.memory_id)
            .ok()
            .and_then(|id| tenant.by_id.get(&id))
        else {
            return;
        };
        if tenant.memories[index].vector_row().is_none() && row.vector.len() == self.dim {
            tenant.vectors.push(index, &row.vector);
            tenant.memories[index].set_vector_row(tenant.vectors.len() - 1);
            let first_sentence = tenant.sentences.len();
            for v in row.sentences.iter().filter(|v| v.len() == self.dim) {
                tenant.sentences.push(index, v);
            }
            tenant.memories[index].set_sentence_rows(first_sentence..tenant.sentences.len());
            tenant.without_vector = tenant.without_vector.saturating_sub(1);
        }
    }

    /// Applies an event; events about unknown memories, and rows this
    /// engine cannot read, are skipped.
    fn apply_event(&mut self, row: &EventRow) {
        let Some(tenant) = self.tenants.get_mut(&row.tenant) else {
            return;
        };
        let event = match Event::decode(&row.op, row.arg.as_deref()) {
            Ok(event) => event,
            Err(error @ EventDecodeError::UnknownOp(_)) => {
                tracing::warn!(seq = row.seq, %error, "skipping an event this engine does not know");
                return;
            }
            Err(error) => {
                tracing::debug!(seq = row.seq, %error, "skipping an unreadable event");
                return;
            }
        };
        match event {
            Event::Drift { element } => {
                let stamp = tenant.drift.entry(element).or_insert(row.at_ms);
                *stamp = (*stamp).max(row.at_ms);
                return;
            }
            Event::SessionEnd { session } => {
                tenant.ended_sessions.insert(session, row.at_ms);
                return;
            }
            Event::Erased { .. } => return,
            Event::Consolidated => {
                let cursor = tenant.consolidated_ms.get_or_insert(row.at_ms);
                *cursor = (*cursor).max(row.at_ms);
                return;
            }
            _ => {}
        }
        let Some(&index) = Uuid::parse_str(&row.memory_id)
            .ok()
            .and_then(|id| tenant.by_id.get(&id))
        else {
            return;
        };
        match event {
            Event::Confirm => {
                let latest_drift = tenant.latest_drift(&tenant.memories[index]);
                let m = &mut tenant.memories[index];
                m.confirmations += 1;
                m.last_confirmed_ms = m.last_confirmed_ms.max(row.at_ms);
                if let Some(at) = latest_drift {
                    m.drift_ack_ms = m.drift_ack_ms.max(at);
                }
            }
            Event::Forget => {
                tenant.memories[index].forgotten = true;
                tenant.deactivate(index);
            }
            Event::SupersededBy(by) => {
                tenant.memories[index].superseded_by = Some(by);
                tenant.deactivate(index);
            }
            Event::Impression { session } => {
                tenant.memories[index].usage.deal(session);
            }
            Event::Citation { session } => {
                tenant.memories[index].usage.cite(session);
            }
            Event::Redacted(counts) => tenant.memories[index].screening.redacted(counts),
            Event::Quarantined { rule, trust } => {
                tenant.memories[index].screening.quarantined(rule, trust);
            }
            Event::Released { .. } => {
                let m = &mut tenant.memories[index];
                // Back to the trust it was written with; a memory written as
                // quarantined by its caller becomes `external` (looked at, not vouched for).
                m.trust = match m.screening.quarantine() {
                    Some((_, trust)) if trust != Trust::Quarantined => trust,
                    _ => Trust::External,
                };
                tenant.meta[index].quarantined = false;
            }
            Event::DerivedFrom(ids) => {
                tenant.memories[index].relations_mut().derived_from = ids;
            }
            Event::Proposed { held, supersedes } => {
                tenant.memories[index].relations_mut().proposal = Some(Proposed {
                    held,
                    supersedes,
                    status: ProposalStatus::Pending,
                });
                if held {
                    tenant.deactivate(index);
                }
            }
            Event::Accepted { by } => tenant.accepted(index, by),
            Event::Linked(to) => {
                let linked = &mut tenant.memories[index].relations_mut().linked;
                if !linked.contains(&to) {
                    linked.push(to);
                }
            }
            Event::Rejected { by, reason } => {
                if let Some(p) = tenant.memories[index]
                    .relations
                    .as_deref_mut()
                    .and_then(|r| r.proposal.as_mut())
                {
                    p.status = ProposalStatus::Rejected { by, reason };
                }
            }
            Event::Drift { .. }
            | Event::SessionEnd { .. }
            | Event::Erased { .. }
            | Event::Consolidated => {}
        }
    }
}
