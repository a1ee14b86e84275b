//! The consolidation pass's shell: gathers a tenant's batch under the
//! state's read lock, asks the [`Consolidator`], checks each proposal
//! against the batch and applies it through the write path and events,
//! then stores the pass's cursor (a tenant-wide `consolidated` event).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use recall_indexer::AuditOp;
use serde::Serialize;
use uuid::Uuid;

use super::{
    ConsolidationBatch, Consolidator, DefaultConsolidator, LanguageModel, ModelConsolidator, Pair,
    Proposal,
};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::event::Event;
use crate::memory::{Kind, Memory, NewMemory, Remembered};
use crate::state::to_ms;
use crate::validate;
use crate::write_policy::near_copies;

/// The agent name on the memories and audit entries a pass writes.
const AGENT: &str = "recall consolidate";

/// A consolidation pass over one tenant, configured with setters and run
/// by [`Consolidate::execute`]. It looks at the memories written or
/// confirmed since the last pass (all of them the first time), so a
/// second pass over unchanged memories proposes nothing. It never
/// deletes: it supersedes, confirms and adds, through the write path
/// (redaction, screening, audit), so `history` explains each change and
/// an erasure still removes everything.
///
/// ```
/// # use recall::{Config, Engine, Kind, ModelSource, NewMemory};
/// # tokio::runtime::Runtime::new()?.block_on(async {
/// # let dir = tempfile::tempdir()?;
/// # let engine = Engine::open(Config::new(dir.path()).model(ModelSource::None)).await?;
/// engine.remember(NewMemory::new("acme", "org", Kind::Pitfall, "Leap days break the billing cron")).await?;
/// let preview = engine.consolidate("acme").dry_run(true).execute().await?;
/// assert!(preview.proposals.iter().all(|p| !p.applied));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Consolidate {
    engine: Engine,
    tenant: String,
    dry_run: bool,
    budget: Option<usize>,
    scope: Scope,
    decider: Decider,
}

/// Who decides what a pass proposes.
#[derive(Clone)]
enum Decider {
    /// A pure consolidator (the default's rules, or the caller's).
    Rules(Arc<dyn Consolidator>),
    /// A language model ([`ModelConsolidator`]).
    Model(ModelConsolidator),
}

/// Which of the tenant's memories a pass looks at (all by default).
#[derive(Debug, Clone, Default)]
struct Scope {
    banks: Option<Vec<String>>,
    kinds: Option<Vec<Kind>>,
    since: Option<DateTime<Utc>>,
}

impl Scope {
    /// A narrowed pass leaves the tenant's cursor alone: it did not look
    /// at everything that changed. Its rules still propose nothing twice
    /// (a folded copy is superseded, a fact's sources are among
    /// `already_derived`, a proposed supersession is on record).
    fn narrowed(&self) -> bool {
        self.banks.is_some() || self.kinds.is_some() || self.since.is_some()
    }
}

/// What a pass proposed and did.
#[derive(Debug, Clone, Serialize)]
pub struct Consolidation {
    /// Whether it only proposed (nothing was written, not even its cursor).
    pub dry_run: bool,
    /// Memories in the batch the consolidator saw.
    pub looked_at: usize,
    /// Changed memories the budget left for a later pass (0: none).
    pub left: usize,
    /// Each proposal, in the order it was applied.
    pub proposals: Vec<ProposalOutcome>,
}

/// One proposal and what became of it.
#[derive(Debug, Clone, Serialize)]
pub struct ProposalOutcome {
    /// The proposal (its `kind`: `fold`, `add` or `nothing`).
    #[serde(flatten)]
    pub proposal: Proposal,
    /// Every memory id it names.
    pub ids: Vec<Uuid>,
    /// Whether it was applied (for a proposal that waits for review:
    /// whether it was put in the review queue).
    pub applied: bool,
    /// Whether it waits in the review queue for a person or agent to
    /// accept ([`Engine::accept`]): a `supersede`, and an `add` into a
    /// bank that holds writes for review ([`crate::ProposalPolicy`]).
    pub pending: bool,
    /// Why it was not applied, when it was refused or failed.
    pub refused: Option<String>,
    /// The memory an `add` stored (or confirmed, if it was a near copy of
    /// another memory).
    pub memory: Option<Uuid>,
}

impl Engine {
    /// A consolidation pass over `tenant` with the [`DefaultConsolidator`]
    /// ([`Consolidate`]).
    pub fn consolidate(&self, tenant: impl Into<String>) -> Consolidate {
        Consolidate {
            engine: self.clone(),
            tenant: tenant.into(),
            dry_run: false,
            budget: None,
            scope: Scope::default(),
            decider: Decider::Rules(Arc::new(DefaultConsolidator::default())),
        }
    }
}

impl Consolidate {
    /// Only propose: write nothing, not even the cursor.
    pub fn dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }

    /// Looks at about `changed` of the memories changed since the last
    /// pass, those changed first, rounded up to whole instants (the cursor
    /// is a time, and a batch of writes shares one); the cursor stops after
    /// the last one looked at, so the next pass goes on from there
    /// ([`Consolidation::left`]). Bounds a first pass over a large tenant.
    /// Must be at least 1.
    pub fn budget(mut self, changed: usize) -> Self {
        self.budget = Some(changed);
        self
    }

    /// Looks only at memories of these banks (and proposes only among
    /// them). A narrowed pass does not move the tenant's cursor.
    pub fn banks<I, S>(mut self, banks: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.scope.banks = Some(banks.into_iter().map(Into::into).collect());
        self
    }

    /// Looks only at memories of these kinds. A narrowed pass does not
    /// move the tenant's cursor.
    pub fn kinds(mut self, kinds: impl IntoIterator<Item = Kind>) -> Self {
        self.scope.kinds = Some(kinds.into_iter().collect());
        self
    }

    /// Looks at the memories written or confirmed after `since` instead of
    /// after the last pass. A narrowed pass does not move the tenant's
    /// cursor.
    pub fn since(mut self, since: DateTime<Utc>) -> Self {
        self.scope.since = Some(since);
        self
    }

    /// Asks `consolidator` instead of the default.
    pub fn consolidator(mut self, consolidator: impl Consolidator + 'static) -> Self {
        self.decider = Decider::Rules(Arc::new(consolidator));
        self
    }

    /// Asks a language model instead of the default
    /// ([`ModelConsolidator`]): an answer outside the schema fails the pass
    /// with [`Error::Model`] and applies nothing (the cursor stays); the
    /// proposals it makes are checked and applied like the default's.
    pub fn model(mut self, model: impl LanguageModel + 'static) -> Self {
        self.decider = Decider::Model(ModelConsolidator::new(Arc::new(model)));
        self
    }

    /// Runs the pass.
    pub async fn execute(self) -> Result<Consolidation> {
        validate::scope_name("tenant", &self.tenant)?;
        if self.budget == Some(0) {
            return Err(Error::invalid("budget", "must be at least 1"));
        }
        for bank in self.scope.banks.iter().flatten() {
            validate::scope_name("bank", bank)?;
        }
        let engine = self.engine.clone();
        let (tenant, budget, scope) = (self.tenant.clone(), self.budget, self.scope.clone());
        let batch = tokio::task::spawn_blocking(move || {
            engine.consolidation_batch(&tenant, budget, &scope)
        })
        .await
        .map_err(|e| Error::Task(e.to_string()))??;
        let Some(Gathered {
            batch,
            left,
            cursor_ms,
        }) = batch
        else {
            return Ok(Consolidation {
                dry_run: self.dry_run,
                looked_at: 0,
                left: 0,
                proposals: Vec::new(),
            });
        };
        let proposals = match &self.decider {
            Decider::Rules(consolidator) => consolidator.propose(&batch),
            Decider::Model(model) => model.propose(&batch).await?,
        };
        let by_id: HashMap<Uuid, &Memory> = batch.memories.iter().map(|m| (m.id, m)).collect();
        let mut outcomes = Vec::with_capacity(proposals.len());
        for proposal in proposals {
            let mut outcome = ProposalOutcome {
                ids: proposal.ids(),
                proposal,
                applied: false,
                pending: false,
                refused: None,
                memory: None,
            };
            outcome.refused = check(&outcome.proposal, &by_id).err();
            if outcome.refused.is_none() && !self.dry_run {
                match self.apply(&outcome.proposal, &by_id).await {
                    Ok(Applied { memory, pending }) => {
                        outcome.applied = true;
                        outcome.pending = pending;
                        outcome.memory = memory;
                    }
                    Err(e) => outcome.refused = Some(e.to_string()),
                }
            }
            outcomes.push(outcome);
        }
        if !self.dry_run && !self.scope.narrowed() {
            let at = cursor_ms.unwrap_or_else(|| to_ms(self.engine.config().clock.now()));
            self.engine
                .append_event(&self.tenant, None, Event::Consolidated, Some(at))
                .await?;
        }
        Ok(Consolidation {
            dry_run: self.dry_run,
            looked_at: batch.memories.len(),
            left,
            proposals: outcomes,
        })
    }

    /// Applies a checked proposal.
    async fn apply(&self, proposal: &Proposal, batch: &HashMap<Uuid, &Memory>) -> Result<Applied> {
        let (engine, tenant) = (&self.engine, self.tenant.as_str());
        match proposal {
            Proposal::Fold { into, copies } => {
                for copy in copies {
                    // Looked up again: an earlier proposal may have taken it.
                    let (kept, gone) =
                        (engine.lookup(tenant, *into)?, engine.lookup(tenant, *copy)?);
                    for m in [&kept, &gone] {
                        if !m.is_active() {
                            return Err(Error::Conflict {
                                id: m.id,
                                reason: "is no longer active".into(),
                            });
                        }
                    }
                    let why = format!("near copy folded into {into}");
                    self.record(*copy, Event::SupersededBy(*into), None, &[*into], why)
                        .await?;
                    // The copy confirms what it copies, when it was last confirmed.
                    engine
                        .append_event(
                            tenant,
                            Some(*into),
                            Event::Confirm,
                            Some(to_ms(gone.last_confirmed_at)),
                        )
                        .await?;
                }
                Ok(Applied::default())
            }
            Proposal::Add {
                derived_from,
                memory_kind,
                content,
                elements,
            } => {
                let bank = derived_from
                    .first()
                    .and_then(|id| batch.get(id))
                    .map(|m| m.bank.clone())
                    .ok_or_else(|| {
                        Error::invalid("derived_from", "names no memory of the batch")
                    })?;
                let mut memory = NewMemory::new(tenant, bank, *memory_kind, content.clone())
                    .derived_from(derived_from.iter().copied())
                    .agent(AGENT);
                memory.elements = elements.clone();
                // A fact that quotes a source is found as that source is:
                // the same text, the same embeddings (which may be the
                // caller's own, not the model's).
                if let Some(quoted) = derived_from
                    .iter()
                    .find(|id| batch.get(id).is_some_and(|m| m.content == *content))
                {
                    let (vector, sentence_vectors) = engine.stored_vectors(tenant, *quoted)?;
                    memory.vector = vector;
                    if memory.vector.is_some() {
                        memory.sentence_vectors = sentence_vectors;
                    }
                }
                let written = engine.remember(memory).await?;
                Ok(Applied {
                    memory: Some(written.id()),
                    pending: matches!(written, Remembered::Proposed { .. }),
                })
            }
            Proposal::Replace {
                old,
                memory_kind,
                content,
                elements,
            } => {
                self.replace(old, *memory_kind, content, elements, batch)
                    .await
            }
            Proposal::Confirm { id, evidence } => {
                for piece in evidence {
                    let at = to_ms(engine.lookup(tenant, *piece)?.last_confirmed_at);
                    let why = format!("confirmed by {piece}");
                    self.record(*id, Event::Confirm, Some(at), &[*piece], why)
                        .await?;
                }
                Ok(Applied {
                    memory: Some(*id),
                    pending: false,
                })
            }
            Proposal::Link { a, b } => {
                self.record(*a, Event::Linked(*b), None, &[*b], format!("linked to {b}"))
                    .await?;
                Ok(Applied {
                    memory: Some(*a),
                    pending: false,
                })
            }
            Proposal::Supersede { old, by } => {
                for id in [old, by] {
                    if !engine.lookup(tenant, *id)?.is_active() {
                        return Err(Error::Conflict {
                            id: *id,
                            reason: "is no longer active".into(),
                        });
                    }
                }
                let event = Event::Proposed {
                    held: false,
                    supersedes: vec![*old],
                };
                let why = format!("proposed that {by} supersede {old}; waits for review");
                self.record(*by, event, None, &[*old], why).await?;
                Ok(Applied {
                    memory: Some(*by),
                    pending: true,
                })
            }
            Proposal::Nothing { .. } => Ok(Applied::default()),
        }
    }
}

impl Consolidate {
    /// Writes `event` on memory `on` (now, or at `at_ms`) with its audit
    /// entry: `consolidate`, naming `on` and then `others`, and `why`.
    async fn record(
        &self,
        on: Uuid,
        event: Event,
        at_ms: Option<i64>,
        others: &[Uuid],
        why: String,
    ) -> Result<()> {
        let ids: Vec<Uuid> = std::iter::once(on).chain(others.iter().copied()).collect();
        let audit = self
            .engine
            .audit_entry(&self.tenant, AuditOp::Consolidate, &ids)
            .detail(Some(why));
        self.engine
            .append_audited_event(&self.tenant, Some(on), event, at_ms, Some(audit))
            .await
    }

    /// Applies a checked `replace`: the new memory through the write path
    /// (superseding the first old memory there, derived from all of them),
    /// then each other old memory superseded by it; in a bank that holds
    /// writes for review, the proposal names every old memory instead.
    async fn replace(
        &self,
        old: &[Uuid],
        kind: Kind,
        content: &str,
        elements: &[String],
        batch: &HashMap<Uuid, &Memory>,
    ) -> Result<Applied> {
        let (engine, tenant) = (&self.engine, self.tenant.as_str());
        let (first, rest) = old
            .split_first()
            .ok_or_else(|| Error::invalid("old", "replaces nothing"))?;
        let bank = batch
            .get(first)
            .map(|m| m.bank.clone())
            .ok_or_else(|| Error::invalid("old", "names no memory of the batch"))?;
        let mut memory = NewMemory::new(tenant, bank, kind, content)
            .derived_from(old.iter().copied())
            .supersedes(first.to_string())
            .agent(AGENT);
        memory.elements = elements.to_vec();
        let written = engine.remember(memory).await?;
        match written {
            Remembered::Stored { id, .. } => {
                for gone in rest {
                    let why = format!("replaced by {id}");
                    self.record(*gone, Event::SupersededBy(id), None, &[id], why)
                        .await?;
                }
                Ok(Applied {
                    memory: Some(id),
                    pending: false,
                })
            }
            Remembered::Proposed { id, .. } => {
                if !rest.is_empty() {
                    let event = Event::Proposed {
                        held: true,
                        supersedes: old.to_vec(),
                    };
                    engine.append_event(tenant, Some(id), event, None).await?;
                }
                Ok(Applied {
                    memory: Some(id),
                    pending: true,
                })
            }
            Remembered::Deduplicated { id, .. } => Err(Error::Conflict {
                id,
                reason: "already says the replacement (it was confirmed instead); \
                         propose a fold into it"
                    .into(),
            }),
        }
    }
}

/// What applying a proposal did.
#[derive(Default)]
struct Applied {
    /// The memory an `add` stored or confirmed, or the one a `supersede`
    /// proposal was recorded on.
    memory: Option<Uuid>,
    /// Whether it waits in the review queue.
    pending: bool,
}

/// Whether `proposal` may be applied to the batch it came from: every id
/// it names is a memory of the batch (so of its tenant, active and
/// served), and the memories it joins share a bank.
fn check(proposal: &Proposal, batch: &HashMap<Uuid, &Memory>) -> std::result::Result<(), String> {
    let ids = proposal.ids();
    if let Some(outside) = ids.iter().find(|id| !batch.contains_key(id)) {
        return Err(format!(
            "names {outside}, which is not a memory of the batch"
        ));
    }
    let mut seen = HashSet::new();
    if let Some(twice) = ids.iter().find(|id| !seen.insert(**id)) {
        return Err(format!("names {twice} twice"));
    }
    let banks: HashSet<&str> = ids
        .iter()
        .filter_map(|id| batch.get(id))
        .map(|m| m.bank.as_str())
        .collect();
    if banks.len() > 1 {
        return Err("joins memories of different banks".into());
    }
    match proposal {
        Proposal::Fold { copies, .. } if copies.is_empty() => Err("folds no copies".into()),
        Proposal::Add { derived_from, .. } if derived_from.is_empty() => {
            Err("is derived from nothing".into())
        }
        Proposal::Add { content, .. } | Proposal::Replace { content, .. }
            if content.trim().is_empty() =>
        {
            Err("has no content".into())
        }
        Proposal::Replace { old, .. } if old.is_empty() => Err("replaces nothing".into()),
        Proposal::Confirm { evidence, .. } if evidence.is_empty() => Err("has no evidence".into()),
        _ => Ok(()),
    }
}

/// A pass's batch, with how many changed memories its budget left and,
/// when it left some, where the cursor stops.
struct Gathered {
    batch: ConsolidationBatch,
    left: usize,
    cursor_ms: Option<i64>,
}

impl Engine {
    /// The batch of a pass over `tenant` (None: the tenant has no memories):
    /// its served memories written or confirmed since the last pass, their
    /// neighbours from the write path's probe ([`near_copies`]), and the
    /// pairs among them in the similar band or closer.
    fn consolidation_batch(
        &self,
        tenant: &str,
        budget: Option<usize>,
        scope: &Scope,
    ) -> Result<Option<Gathered>> {
        let write = &self.config().write;
        let now = self.config().clock.now();
        let state = self.read_state()?;
        let Some(t) = state.tenant(tenant) else {
            return Ok(None);
        };
        let banks: Option<HashSet<u32>> = scope
            .banks
            .as_ref()
            .map(|names| names.iter().filter_map(|b| t.bank_id(b)).collect());
        let served = |i: usize| {
            t.memories[i].is_active()
                && !t.meta[i].quarantined
                && banks
                    .as_ref()
                    .is_none_or(|b| b.contains(&t.meta[i].bank_id))
                && scope
                    .kinds
                    .as_ref()
                    .is_none_or(|k| k.contains(&t.memories[i].kind))
        };
        let since = scope.since.map(to_ms).or(t.consolidated_ms);
        // When each served memory last changed: written or confirmed.
        let changed_at = |i: usize| {
            let m = &t.memories[i];
            m.row.created_at_ms.max(m.last_confirmed_ms)
        };
        let mut changed: Vec<usize> = (0..t.memories.len())
            .filter(|&i| served(i) && since.is_none_or(|c| changed_at(i) > c))
            .collect();
        changed.sort_by_key(|&i| (changed_at(i), i));
        let (mut left, mut cursor_ms) = (0, None);
        if let Some(budget) = budget.filter(|b| *b < changed.len()) {
            // Whole instants only (a batch of writes shares one): the
            // cursor is a time, and the next pass starts after it.
            let mut end = budget;
            while end < changed.len() && changed_at(changed[end]) == changed_at(changed[end - 1]) {
                end += 1;
            }
            if end < changed.len() {
                cursor_ms = Some(changed_at(changed[end - 1]));
                left = changed.len() - end;
                changed.truncate(end);
            }
        }
        let with_vector: Vec<(usize, &[f32])> = changed
            .iter()
            .filter_map(|&i| Some((i, t.vectors.row(t.memories[i].vector_row()?)?)))
            .collect();
        let queries: Vec<&[f32]> = with_vector.iter().map(|(_, v)| *v).collect();
        let found = near_copies(t, &queries, write, |q, j| {
            let i = with_vector[q].0;
            j != i && served(j) && t.meta[j].bank_id == t.meta[i].bank_id
        });
        let mut pairs = Vec::new();
        let mut seen = HashSet::new();
        let mut members: Vec<usize> = changed.clone();
        for (&(i, _), (near, _)) in with_vector.iter().zip(found) {
            for (j, cosine) in near {
                let (a, b) = if i < j { (i, j) } else { (j, i) };
                if seen.insert((a, b)) {
                    members.push(j);
                    pairs.push(Pair {
                        a: t.memories[a].id,
                        b: t.memories[b].id,
                        cosine,
                    });
                }
            }
        }
        members.sort_unstable();
        members.dedup();
        let already_derived = t
            .memories
            .iter()
            .filter(|m| m.is_active())
            .flat_map(|m| m.derived_from())
            .copied()
            .collect();
        Ok(Some(Gathered {
            batch: ConsolidationBatch {
                tenant: tenant.to_string(),
                now,
                memories: members.into_iter().map(|i| t.view(i)).collect(),
                pairs,
                already_derived,
                dedup_threshold: write.dedup_threshold,
                similar_threshold: write.similar_threshold,
            },
            left,
            cursor_ms,
        }))
    }
}
