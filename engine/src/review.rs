//! What needs a person's eye, and what is documented (§8). Nothing here
//! removes anything: heuristics only queue memories for review.

use std::collections::{HashMap, HashSet};

use recall_indexer::{AuditEntry, AuditOp};
use serde::Serialize;
use uuid::Uuid;

use crate::config::Band;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::event::Event;
use crate::memory::{Kind, Memory, Source, Trust};
use crate::score::faded;
use crate::state::to_ms;
use crate::validate;
use crate::write_policy::near_copies;

/// Most recent active memories checked for similar pairs; the check is a
/// nearest-neighbour search per memory, so it is bounded.
const SIMILAR_SCAN_LIMIT: usize = 2_000;

/// A memory dealt often and never cited.
#[derive(Debug, Clone, Serialize)]
pub struct Ignored {
    /// The memory.
    pub memory: Memory,
    /// Sessions it was dealt to.
    pub impressions: u32,
}

/// Two active memories close enough that one may replace the other.
#[derive(Debug, Clone, Serialize)]
pub struct SimilarPair {
    /// The older one.
    pub older: Memory,
    /// The newer one.
    pub newer: Memory,
    /// Their cosine (in the similar band, 0.82 ≤ cos < 0.94 by default).
    pub cosine: f32,
}

/// The review queue of one tenant.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ReviewQueue {
    /// ≥ 5 impressions, 0 citations.
    pub ignored: Vec<Ignored>,
    /// On an element that drifted since their last confirmation.
    pub drifted: Vec<Memory>,
    /// Inferred memories whose confidence fell below the recall floor.
    pub low_confidence: Vec<Memory>,
    /// Held back by the injection screen.
    pub quarantined: Vec<Memory>,
    /// In the bank of a session that ended and not promoted: out of recall,
    /// kept until someone promotes or forgets them.
    pub session_ended: Vec<Memory>,
    /// Similar but neither supersedes the other.
    pub similar: Vec<SimilarPair>,
    /// Pending proposals ([`Engine::proposals`]): writes a bank holds for
    /// review and supersessions a consolidation proposed.
    pub proposals: Vec<crate::PendingProposal>,
}

/// One element of the knowledge map.
#[derive(Debug, Clone, Serialize)]
pub struct ElementSummary {
    /// The element.
    pub element: String,
    /// Active memories about it.
    pub memories: usize,
    /// Days since the freshest of them was confirmed (None when undocumented).
    pub freshest_days: Option<i64>,
    /// How many of them are pitfalls.
    pub pitfalls: usize,
}

/// Which of the host's elements the tenant's memory covers.
#[derive(Debug, Clone, Serialize)]
pub struct KnowledgeMap {
    /// One summary per requested element, in the order given.
    pub elements: Vec<ElementSummary>,
    /// Elements with at least one memory.
    pub documented: usize,
    /// `"N of M elements documented"`.
    pub headline: String,
}

impl Engine {
    /// The tenant's review queue (§8). Its similar-pair search scans the
    /// tenant for the neighbours of the 2,000 most recent memories (0.2 s
    /// at 100k memories, 2.2 s at a million in `recall-bench scale`), so it
    /// runs on the blocking pool, not on the caller's async worker.
    ///
    /// ```no_run
    /// # async fn demo(engine: recall::Engine) -> recall::Result<()> {
    /// let queue = engine.review_queue("acme").await?;
    /// for pair in &queue.similar {
    ///     println!("{:.2}: {} / {}", pair.cosine, pair.older.content, pair.newer.content);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn review_queue(&self, tenant: &str) -> Result<ReviewQueue> {
        validate::scope_name("tenant", tenant)?;
        let engine = self.clone();
        let tenant = tenant.to_owned();
        tokio::task::spawn_blocking(move || engine.queue_now(&tenant))
            .await
            .map_err(|e| Error::Task(e.to_string()))?
    }

    fn queue_now(&self, tenant: &str) -> Result<ReviewQueue> {
        let config = &self.config().scoring;
        let now = to_ms(self.config().clock.now());
        let proposals = self.proposals_now(tenant)?;
        let state = self.read_state()?;
        let Some(t) = state.tenant(tenant) else {
            return Ok(ReviewQueue::default());
        };
        let mut queue = ReviewQueue {
            proposals,
            ..ReviewQueue::default()
        };
        for (i, m) in t.memories.iter().enumerate() {
            if !m.is_active() {
                continue;
            }
            if m.citations() == 0 && m.impressions() >= config.ignored_after {
                queue.ignored.push(Ignored {
                    memory: t.view(i),
                    impressions: m.impressions(),
                });
            }
            if t.drifted(m) {
                queue.drifted.push(t.view(i));
            }
            if faded(
                config,
                m.row.confidence,
                m.source == Source::Inferred,
                now - m.last_confirmed_ms,
            ) {
                queue.low_confidence.push(t.view(i));
            }
            if m.trust == Trust::Quarantined {
                queue.quarantined.push(t.view(i));
            }
            if t.session_ended(i) {
                queue.session_ended.push(t.view(i));
            }
        }
        let write = &self.config().write;
        let mut seen: HashSet<(Uuid, Uuid)> = HashSet::new();
        // Only pairs in the similar band are wanted: the scan re-scores only
        // rows whose sign codes allow that cosine, and the batch reads the
        // tenant's codes once per group of queries instead of once per memory.
        let recent: Vec<(usize, &[f32])> = t
            .memories
            .iter()
            .enumerate()
            .rev()
            .filter(|(_, m)| m.is_active() && m.vector_row().is_some())
            .take(SIMILAR_SCAN_LIMIT)
            .filter_map(|(i, m)| Some((i, t.vectors.row(m.vector_row()?)?)))
            .collect();
        let queries: Vec<&[f32]> = recent.iter().map(|(_, v)| *v).collect();
        // The write path's question ("which stored memories are in the
        // similar band of this one?"), asked after the fact.
        let neighbours = near_copies(t, &queries, write, |q, j| {
            let i = recent[q].0;
            j != i && t.memories[j].is_active() && t.meta[j].bank_id == t.meta[i].bank_id
        });
        for (&(i, _), (near, _)) in recent.iter().zip(neighbours) {
            for (j, cos) in near {
                if write.band(cos) != Band::Similar {
                    continue;
                }
                let (older, newer) = if i < j { (i, j) } else { (j, i) };
                if seen.insert((t.memories[older].id, t.memories[newer].id)) {
                    queue.similar.push(SimilarPair {
                        older: t.view(older),
                        newer: t.view(newer),
                        cosine: cos,
                    });
                }
            }
        }
        Ok(queue)
    }

    /// Per registered element: active memories, freshest age, pitfalls; and
    /// the headline "N of M elements documented" (§8).
    ///
    /// One pass over the tenant's memories whatever the number of elements
    /// asked about (34 ms for 1,014 elements at a million memories in
    /// `recall-bench scale`), on the blocking pool like the review queue. An
    /// element asked about twice gets two equal summaries; a memory naming
    /// an element twice counts once.
    ///
    /// ```no_run
    /// # async fn demo(engine: &recall::Engine) -> recall::Result<()> {
    /// let map = engine
    ///     .knowledge_map("acme", &["ApiGateway".to_string(), "Billing".to_string()])
    ///     .await?;
    /// println!("{}", map.headline); // "1 of 2 elements documented"
    /// # Ok(()) }
    /// ```
    pub async fn knowledge_map(&self, tenant: &str, elements: &[String]) -> Result<KnowledgeMap> {
        validate::scope_name("tenant", tenant)?;
        for e in elements {
            validate::label("element", e)?;
        }
        let engine = self.clone();
        let tenant = tenant.to_owned();
        let elements = elements.to_vec();
        tokio::task::spawn_blocking(move || engine.map_now(&tenant, &elements))
            .await
            .map_err(|e| Error::Task(e.to_string()))?
    }

    fn map_now(&self, tenant: &str, elements: &[String]) -> Result<KnowledgeMap> {
        let now_ms = to_ms(self.config().clock.now());
        let mut slots: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, e) in elements.iter().enumerate() {
            slots.entry(e.as_str()).or_default().push(i);
        }
        let mut summaries: Vec<ElementSummary> = elements
            .iter()
            .map(|element| ElementSummary {
                element: element.clone(),
                memories: 0,
                freshest_days: None,
                pitfalls: 0,
            })
            .collect();
        let mut freshest_ms: Vec<Option<i64>> = vec![None; elements.len()];
        let state = self.read_state()?;
        for m in state
            .tenant(tenant)
            .into_iter()
            .flat_map(|t| t.memories.iter())
            .filter(|m| m.is_active())
        {
            let named = &m.row.elements;
            for (k, e) in named.iter().enumerate() {
                if named[..k].contains(e) {
                    continue;
                }
                for &i in slots.get(&**e).into_iter().flatten() {
                    let s = &mut summaries[i];
                    s.memories += 1;
                    s.pitfalls += usize::from(m.kind == Kind::Pitfall);
                    let f = &mut freshest_ms[i];
                    *f = Some(f.map_or(m.last_confirmed_ms, |f| f.max(m.last_confirmed_ms)));
                }
            }
        }
        for (s, f) in summaries.iter_mut().zip(freshest_ms) {
            s.freshest_days = f.map(|ms| (now_ms - ms).max(0) / 86_400_000);
        }
        let documented = summaries.iter().filter(|s| s.memories > 0).count();
        Ok(KnowledgeMap {
            headline: format!("{documented} of {} elements documented", summaries.len()),
            documented,
            elements: summaries,
        })
    }
}

impl Engine {
    /// Lets a quarantined memory be served (§7), after a person looked at
    /// it: it gets back the trust it was written with (`external` when its
    /// writer quarantined it). Audited with `actor`.
    pub async fn release(&self, tenant: &str, id: Uuid, actor: &str) -> Result<Memory> {
        let m = self.lookup(tenant, id)?;
        if m.trust != Trust::Quarantined {
            return Err(Error::Conflict {
                id,
                reason: "is not quarantined".into(),
            });
        }
        let audit = self
            .audit_entry(tenant, AuditOp::Release, &[id])
            .actor(Some(actor.to_string()));
        self.append_audited_event(
            tenant,
            Some(id),
            Event::Released {
                by: actor.to_string(),
            },
            None,
            Some(audit),
        )
        .await?;
        self.lookup(tenant, id)
    }

    /// The tenant's audit log, oldest first: remember, supersede, forget,
    /// erase and release, with ids and content hashes, never content.
    pub async fn audit(&self, tenant: &str) -> Result<Vec<AuditEntry>> {
        validate::scope_name("tenant", tenant)?;
        Ok(self.lock_store().await.audit_entries(tenant).await?)
    }
}
