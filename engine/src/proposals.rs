//! Proposals: writes a bank holds for review ([`crate::ProposalPolicy`])
//! and supersessions a consolidation proposed, accepted or rejected by a
//! person or agent. What accepting writes is decided by a pure function
//! ([`plan_accept`]) over the tenant's state under the store lock; the
//! engine makes it durable and audits it.
//!
//! Accepting applies a held proposal through the write path's rules as
//! if it were written now: a near copy of a memory served meanwhile
//! confirms that memory instead (and is superseded by it), a title held
//! by another active memory refuses it, and what it supersedes must still
//! be active: a memory superseded since (a fork: two proposals replacing
//! one memory) refuses the second acceptance, which stays pending for a
//! person to reject or re-propose.

use std::collections::HashMap;

use recall_indexer::{AuditEntry, AuditOp, Record};
use serde::Serialize;
use uuid::Uuid;

use crate::config::{Band, WriteConfig};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::event::Event;
use crate::memory::Memory;
use crate::state::{TenantState, to_ms};
use crate::validate;
use crate::write_policy::near_copies;

/// A pending proposal as the review queue lists it: the memory, what it
/// would replace or repeat, and the word diff between the two.
#[derive(Debug, Clone, Serialize)]
pub struct PendingProposal {
    /// The proposal (its [`Memory::proposal`] says what it proposes).
    pub memory: Memory,
    /// What it is compared with: the (first) memory it supersedes once accepted,
    /// or else its nearest active memory of the bank in the similar band
    /// or closer (what it may duplicate).
    pub against: Option<Memory>,
    /// The cosine between the two, when both have vectors.
    pub cosine: Option<f32>,
    /// The words `against` loses and the proposal adds:
    /// `[-removed-]` and `{+added+}` around the changed words.
    pub diff: Option<String>,
    /// Other pending proposals that would supersede the same memory: a
    /// fork. Accepting one refuses the others, which a person rejects.
    pub rivals: Vec<Uuid>,
}

/// The records and audit entries that accepting a proposal writes.
pub(crate) struct AcceptPlan {
    pub(crate) records: Vec<Record>,
    pub(crate) audit: Vec<AuditEntry>,
}

/// What accepting the proposal `id` writes, or why it cannot be accepted.
/// Pure: the caller holds the store lock, so the state does not change
/// between the plan and its write.
pub(crate) fn plan_accept(
    t: &TenantState,
    id: Uuid,
    by: &str,
    now_ms: i64,
    write: &WriteConfig,
) -> Result<AcceptPlan> {
    let tenant = t.name.as_ref();
    let index = *t
        .by_id
        .get(&id)
        .ok_or_else(|| Error::not_found(tenant, id))?;
    let m = &t.memories[index];
    let proposal = m.pending().ok_or_else(|| Error::Conflict {
        id,
        reason: "is not a pending proposal".into(),
    })?;
    if m.forgotten || m.superseded_by.is_some() {
        return Err(Error::Conflict {
            id,
            reason: "was forgotten or superseded while it waited".into(),
        });
    }
    let mut targets = Vec::with_capacity(proposal.supersedes.len());
    for &old in &proposal.supersedes {
        let old_index = *t
            .by_id
            .get(&old)
            .ok_or_else(|| Error::not_found(tenant, old))?;
        if !t.memories[old_index].is_active() {
            return Err(Error::Conflict {
                id: old,
                reason: "is no longer active (another change replaced or forgot it \
                         while this proposal waited): reject the proposal or propose again"
                    .into(),
            });
        }
        targets.push(old_index);
    }
    let accepted = Event::Accepted { by: by.to_string() };
    let entry = |op: AuditOp, ids: &[Uuid]| {
        let mut e = AuditEntry::new(now_ms, tenant, op).actor(Some(by.to_string()));
        e.ids = ids.iter().map(Uuid::to_string).collect();
        e
    };
    let mut plan = AcceptPlan {
        records: Vec::new(),
        audit: Vec::new(),
    };
    if proposal.held {
        // Written now, it would confirm a served near copy instead.
        if targets.is_empty()
            && let Some((copy, _)) = nearest_active(t, index, write)
                .filter(|(_, cos)| write.band(*cos) == Band::NearCopy)
        {
            let copy_id = t.memories[copy].id;
            plan.records.extend([
                accepted.record(tenant, Some(id), now_ms),
                Event::SupersededBy(copy_id).record(tenant, Some(id), now_ms),
                Event::Confirm.record(tenant, Some(copy_id), m.row.observed_at_ms),
            ]);
            plan.audit
                .push(entry(AuditOp::Accept, &[id, copy_id]).detail(Some(format!(
                    "a near copy of {copy_id}, which it confirmed"
                ))));
            return Ok(plan);
        }
        if let Some(title) = &m.row.title
            && let Some(&holder) = t.titles.get(&**title)
            && holder != index
            && !targets.contains(&holder)
        {
            return Err(Error::TitleTaken {
                title: title.to_string(),
                id: t.memories[holder].id,
            });
        }
    }
    for old_index in targets {
        let old = t.memories[old_index].id;
        plan.records
            .push(Event::SupersededBy(id).record(tenant, Some(old), now_ms));
        plan.audit.push(entry(AuditOp::Supersede, &[old, id]));
    }
    plan.records.push(accepted.record(tenant, Some(id), now_ms));
    plan.audit.push(entry(AuditOp::Accept, &[id]));
    Ok(plan)
}

/// The active memory of memory `index`'s bank nearest to it in vector (or
/// with the same folded text, for memories without vectors), at or above
/// the similar threshold, with the cosine.
fn nearest_active(t: &TenantState, index: usize, write: &WriteConfig) -> Option<(usize, f32)> {
    let m = &t.memories[index];
    let bank = t.meta[index].bank_id;
    let keep = |j: usize| j != index && t.meta[j].active && t.meta[j].bank_id == bank;
    match m.vector_row().and_then(|row| t.vectors.row(row)) {
        Some(v) => near_copies(t, &[v], write, |_, j| keep(j))
            .into_iter()
            .next()
            .and_then(|(hits, _)| hits.into_iter().max_by(|a, b| a.1.total_cmp(&b.1))),
        None => {
            let folded = validate::normalized_text(&m.row.content);
            (0..t.memories.len())
                .find(|&j| {
                    keep(j)
                        && t.memories[j].folded_hash == m.folded_hash
                        && validate::normalized_text(&t.memories[j].row.content) == folded
                })
                .map(|j| (j, 1.0))
        }
    }
}

/// `old` → `new` as changed words: `[-removed-]`, `{+added+}` around
/// each run of removed or added words.
pub(crate) fn word_diff(old: &str, new: &str) -> String {
    use similar::{ChangeTag, TextDiff};
    let diff = TextDiff::from_words(old, new);
    let mut out = String::new();
    let mut run: Option<(ChangeTag, String)> = None;
    let close = |out: &mut String, run: Option<(ChangeTag, String)>| match run {
        Some((ChangeTag::Delete, text)) => out.push_str(&format!("[-{text}-]")),
        Some((ChangeTag::Insert, text)) => out.push_str(&format!("{{+{text}+}}")),
        Some((ChangeTag::Equal, text)) => out.push_str(&text),
        None => {}
    };
    for change in diff.iter_all_changes() {
        match &mut run {
            Some((tag, text)) if *tag == change.tag() => text.push_str(change.value()),
            _ => {
                close(&mut out, run.take());
                run = Some((change.tag(), change.value().to_string()));
            }
        }
    }
    close(&mut out, run);
    out
}

impl Engine {
    /// Accepts the pending proposal `id` (§3, [`crate::ProposalPolicy`]):
    /// a held memory is served from now on and what it proposes to
    /// supersede is superseded, through the write path's rules (see the
    /// module). Audited as `accept` with `actor`. Returns the proposal's
    /// memory as it now is: `superseded_by` is set when it turned out to
    /// be a near copy of a memory served meanwhile, which it confirmed.
    ///
    /// ```
    /// # use recall::{Config, Engine, Kind, ModelSource, NewMemory, Remembered};
    /// # tokio::runtime::Runtime::new()?.block_on(async {
    /// # let dir = tempfile::tempdir()?;
    /// # let engine = Engine::open(Config::new(dir.path()).model(ModelSource::None)).await?;
    /// // An agent's write into a repository's bank waits for review.
    /// let proposed = engine
    ///     .remember(NewMemory::new("acme", "repo:api", Kind::Convention, "Retry with jitter."))
    ///     .await?;
    /// assert!(matches!(proposed, Remembered::Proposed { .. }));
    /// let memory = engine.accept("acme", proposed.id(), "ann").await?;
    /// assert!(memory.is_active());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn accept(&self, tenant: &str, id: Uuid, actor: &str) -> Result<Memory> {
        validate::scope_name("tenant", tenant)?;
        validate::label("actor", actor)?;
        let mut store = self.lock_store().await;
        let plan = {
            let state = self.read_state()?;
            let t = state
                .tenant(tenant)
                .ok_or_else(|| Error::not_found(tenant, id))?;
            plan_accept(
                t,
                id,
                actor,
                to_ms(self.config().clock.now()),
                &self.config().write,
            )?
        };
        self.persist(&mut store, plan.records).await?;
        store.audit(&plan.audit).await?;
        drop(store);
        self.lookup(tenant, id)
    }

    /// Rejects the pending proposal `id`: a held memory is never served
    /// (it stays in `get` and `history`, and an erasure removes it); a
    /// proposed supersession is dropped. Audited as `reject` with `actor`
    /// and the reason.
    pub async fn reject(
        &self,
        tenant: &str,
        id: Uuid,
        actor: &str,
        reason: Option<&str>,
    ) -> Result<Memory> {
        validate::scope_name("tenant", tenant)?;
        validate::label("actor", actor)?;
        if reason.is_some_and(|r| r.len() > self.config().write.max_content_bytes) {
            return Err(Error::invalid("reason", "is longer than a memory may be"));
        }
        let mut store = self.lock_store().await;
        {
            let state = self.read_state()?;
            let m = state
                .tenant(tenant)
                .and_then(|t| t.get(&id))
                .ok_or_else(|| Error::not_found(tenant, id))?;
            if m.pending().is_none() {
                return Err(Error::Conflict {
                    id,
                    reason: "is not a pending proposal".into(),
                });
            }
        }
        let now_ms = to_ms(self.config().clock.now());
        let event = Event::Rejected {
            by: actor.to_string(),
            reason: reason.map(str::to_string),
        };
        self.persist(&mut store, vec![event.record(tenant, Some(id), now_ms)])
            .await?;
        let entry = self
            .audit_entry(tenant, AuditOp::Reject, &[id])
            .actor(Some(actor.to_string()))
            .detail(reason.map(str::to_string));
        store.audit(&[entry]).await?;
        drop(store);
        self.lookup(tenant, id)
    }

    /// The tenant's pending proposals, oldest first, each with what it
    /// would replace or repeat and the diff between them. An agent reads
    /// it to see what it already proposed; the review queue holds it too.
    ///
    /// ```no_run
    /// # async fn demo(engine: recall::Engine) -> recall::Result<()> {
    /// for p in engine.proposals("acme").await? {
    ///     println!("{} {}", p.memory.id, p.diff.as_deref().unwrap_or(&p.memory.content));
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn proposals(&self, tenant: &str) -> Result<Vec<PendingProposal>> {
        validate::scope_name("tenant", tenant)?;
        let engine = self.clone();
        let tenant = tenant.to_owned();
        tokio::task::spawn_blocking(move || engine.proposals_now(&tenant))
            .await
            .map_err(|e| Error::Task(e.to_string()))?
    }

    pub(crate) fn proposals_now(&self, tenant: &str) -> Result<Vec<PendingProposal>> {
        let write = &self.config().write;
        let state = self.read_state()?;
        let Some(t) = state.tenant(tenant) else {
            return Ok(Vec::new());
        };
        let waiting: Vec<usize> = (0..t.memories.len())
            .filter(|&i| {
                let m = &t.memories[i];
                m.pending().is_some() && !m.forgotten && m.superseded_by.is_none()
            })
            .collect();
        let targets = |i: usize| -> &[Uuid] {
            t.memories[i]
                .pending()
                .map_or(&[], |p| p.supersedes.as_slice())
        };
        let mut by_target: HashMap<Uuid, Vec<Uuid>> = HashMap::new();
        for &i in &waiting {
            for old in targets(i) {
                by_target.entry(*old).or_default().push(t.memories[i].id);
            }
        }
        Ok(waiting
            .into_iter()
            .map(|i| (i, &t.memories[i]))
            .map(|(i, m)| {
                let against = match targets(i).first() {
                    Some(old) => t.by_id.get(old).copied(),
                    None => nearest_active(t, i, write).map(|(j, _)| j),
                };
                let vector = |k: usize| t.vectors.row(t.memories[k].vector_row()?);
                PendingProposal {
                    memory: t.view(i),
                    cosine: against.and_then(|j| Some(recall_indexer::dot(vector(i)?, vector(j)?))),
                    diff: against.map(|j| word_diff(&t.memories[j].row.content, &m.row.content)),
                    against: against.map(|j| t.view(j)),
                    rivals: {
                        let mut rivals: Vec<Uuid> = targets(i)
                            .iter()
                            .filter_map(|old| by_target.get(old))
                            .flatten()
                            .copied()
                            .filter(|id| *id != m.id)
                            .collect();
                        rivals.sort_unstable();
                        rivals.dedup();
                        rivals
                    },
                }
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::word_diff;

    #[test]
    fn the_diff_marks_changed_words() {
        assert_eq!(
            word_diff("Deploys run at noon.", "Deploys run at 3 pm."),
            "Deploys run at [-noon.-]{+3 pm.+}"
        );
        assert_eq!(word_diff("same", "same"), "same");
    }
}
