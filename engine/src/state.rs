//! The in-memory state: every memory of every tenant with its counters,
//! folded from the store's rows and events. The store is the truth; this is
//! rebuilt from it at open and kept in step by every write.

use std::collections::{HashMap, HashSet};
use std::str::FromStr;

use chrono::{DateTime, TimeZone, Utc};
use recall_indexer::{EventRow, MemoryRow, VectorSet};
use uuid::Uuid;

use crate::memory::{Kind, Memory, Source, Trust};

/// Event operations written by the engine.
pub(crate) mod op {
    /// `confirmations += 1`, `last_confirmed_at = max(last, at)`, drift cleared.
    pub const CONFIRM: &str = "confirm";
    /// Soft delete.
    pub const FORGET: &str = "forget";
    /// `arg` = the superseding memory's id.
    pub const SUPERSEDED_BY: &str = "superseded_by";
    /// `arg` = the session the memory was dealt to.
    pub const IMPRESSION: &str = "impression";
}

pub(crate) fn to_ms(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

pub(crate) fn from_ms(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms)
        .single()
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// One memory with its mutable counters.
#[derive(Debug, Clone)]
pub(crate) struct MemoryState {
    pub(crate) id: Uuid,
    pub(crate) row: MemoryRow,
    pub(crate) kind: Kind,
    pub(crate) source: Source,
    pub(crate) trust: Trust,
    pub(crate) last_confirmed_ms: i64,
    pub(crate) confirmations: u32,
    pub(crate) forgotten: bool,
    pub(crate) superseded_by: Option<Uuid>,
    pub(crate) sessions_dealt: HashSet<String>,
    pub(crate) citations: u32,
    pub(crate) vector_row: Option<usize>,
    /// Text folded for dedup when there are no vectors.
    pub(crate) folded: String,
}

impl MemoryState {
    pub(crate) fn is_active(&self) -> bool {
        !self.forgotten && self.superseded_by.is_none()
    }

    pub(crate) fn view(&self) -> Memory {
        let r = &self.row;
        Memory {
            id: self.id,
            tenant: r.tenant.clone(),
            bank: r.bank.clone(),
            kind: self.kind,
            title: r.title.clone(),
            content: r.content.clone(),
            elements: r.elements.clone(),
            source: self.source,
            trust: self.trust,
            agent: r.agent.clone(),
            session_id: r.session_id.clone(),
            confidence: r.confidence,
            observed_at: from_ms(r.observed_at_ms),
            created_at: from_ms(r.created_at_ms),
            last_confirmed_at: from_ms(self.last_confirmed_ms),
            confirmations: self.confirmations,
            expires_at: r.expires_at_ms.map(from_ms),
            supersedes: r
                .supersedes
                .as_deref()
                .and_then(|s| Uuid::parse_str(s).ok()),
            superseded_by: self.superseded_by,
            forgotten: self.forgotten,
            impressions: self.sessions_dealt.len() as u32,
            citations: self.citations,
            has_vector: self.vector_row.is_some(),
        }
    }
}

/// One tenant: its memories, lookups, and vectors.
#[derive(Debug)]
pub(crate) struct TenantState {
    pub(crate) memories: Vec<MemoryState>,
    pub(crate) by_id: HashMap<Uuid, usize>,
    pub(crate) by_seq: HashMap<u64, usize>,
    /// Titles of active memories.
    pub(crate) titles: HashMap<String, usize>,
    pub(crate) vectors: VectorSet,
    /// Element → when its code last changed (§6; stamped by the lifecycle's drift marking).
    pub(crate) drift: HashMap<String, i64>,
}

impl TenantState {
    fn new(dim: usize) -> TenantState {
        TenantState {
            memories: Vec::new(),
            by_id: HashMap::new(),
            by_seq: HashMap::new(),
            titles: HashMap::new(),
            vectors: VectorSet::new(dim),
            drift: HashMap::new(),
        }
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

    /// True when one of the memory's elements drifted after its last confirmation.
    pub(crate) fn drifted(&self, m: &MemoryState) -> bool {
        m.row.elements.iter().any(|e| {
            self.drift
                .get(e)
                .is_some_and(|at| *at > m.last_confirmed_ms)
        })
    }

    fn deactivate(&mut self, index: usize) {
        if let Some(title) = &self.memories[index].row.title {
            if self.titles.get(title) == Some(&index) {
                self.titles.remove(title);
            }
        }
    }
}

/// All tenants.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) tenants: HashMap<String, TenantState>,
    dim: usize,
}

impl State {
    pub(crate) fn new(dim: usize) -> State {
        State {
            tenants: HashMap::new(),
            dim,
        }
    }

    pub(crate) fn tenant(&self, tenant: &str) -> Option<&TenantState> {
        self.tenants.get(tenant)
    }

    /// Adds a memory row (rows with unknown kinds or ids are skipped with a
    /// warning: they were written by a newer or damaged engine).
    pub(crate) fn apply_memory(&mut self, mut row: MemoryRow) {
        let parsed = (
            Uuid::parse_str(&row.id),
            Kind::from_str(&row.kind),
            Source::from_str(&row.source),
            Trust::from_str(&row.trust),
        );
        let (Ok(id), Ok(kind), Ok(source), Ok(trust)) = parsed else {
            tracing::warn!(id = %row.id, "skipping a stored memory this engine cannot read");
            return;
        };
        let dim = self.dim;
        let tenant = self
            .tenants
            .entry(row.tenant.clone())
            .or_insert_with(|| TenantState::new(dim));
        if tenant.by_id.contains_key(&id) {
            return;
        }
        let index = tenant.memories.len();
        if let Some(old) = row
            .supersedes
            .as_deref()
            .and_then(|s| Uuid::parse_str(s).ok())
        {
            if let Some(&old_index) = tenant.by_id.get(&old) {
                tenant.memories[old_index].superseded_by = Some(id);
                tenant.deactivate(old_index);
            }
        }
        let vector_row = match row.vector.take() {
            Some(v) if v.len() == dim => {
                tenant.vectors.push(index, &v);
                Some(tenant.vectors.len() - 1)
            }
            _ => None,
        };
        if let Some(title) = &row.title {
            tenant.titles.insert(title.clone(), index);
        }
        tenant.by_id.insert(id, index);
        tenant.by_seq.insert(row.seq, index);
        tenant.memories.push(MemoryState {
            id,
            folded: crate::validate::normalized_text(&row.content),
            last_confirmed_ms: row.observed_at_ms,
            row,
            kind,
            source,
            trust,
            confirmations: 0,
            forgotten: false,
            superseded_by: None,
            sessions_dealt: HashSet::new(),
            citations: 0,
            vector_row,
        });
    }

    /// Applies an event; events about unknown memories are ignored.
    pub(crate) fn apply_event(&mut self, event: &EventRow) {
        let Some(tenant) = self.tenants.get_mut(&event.tenant) else {
            return;
        };
        let Some(&index) = Uuid::parse_str(&event.memory_id)
            .ok()
            .and_then(|id| tenant.by_id.get(&id))
        else {
            return;
        };
        match event.op.as_str() {
            op::CONFIRM => {
                let m = &mut tenant.memories[index];
                m.confirmations += 1;
                m.last_confirmed_ms = m.last_confirmed_ms.max(event.at_ms);
            }
            op::FORGET => {
                tenant.memories[index].forgotten = true;
                tenant.deactivate(index);
            }
            op::SUPERSEDED_BY => {
                let by = event.arg.as_deref().and_then(|s| Uuid::parse_str(s).ok());
                if by.is_some() {
                    tenant.memories[index].superseded_by = by;
                    tenant.deactivate(index);
                }
            }
            op::IMPRESSION => {
                if let Some(session) = &event.arg {
                    tenant.memories[index]
                        .sessions_dealt
                        .insert(session.clone());
                }
            }
            other => tracing::warn!(op = other, "skipping an event this engine does not know"),
        }
    }
}
