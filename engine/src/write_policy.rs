//! The write policy (§3), as pure functions over a tenant's state, the
//! batch and the configuration: [`prepare`] (steps 1–3: validate, redact,
//! screen) and [`decide`] (supersession, title uniqueness, deduplication
//! into a near copy, the similar band; the records to log and the caller's
//! outcomes). No IO and no locks: `Engine::write_prepared` in `engine.rs`
//! holds the store lock around [`decide`] and makes its records durable.

use std::collections::{BTreeMap, HashMap, HashSet};

use recall_indexer::{
    AuditEntry, AuditOp, Hits, MemoryRow, Placement, Record, ScanConfig, near_pairs, normalized,
};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::config::{Band, Config, WriteConfig};
use crate::error::{Error, Result};
use crate::event::{Event, encode_counts};
use crate::memory::{NewMemory, Remembered, Similar, Source, Trust};
use crate::policy::BankMode;
use crate::screen::ScreenMatch;
use crate::state::{State, TenantState, to_ms};
use crate::validate;

/// Steps 1–3 of the write path (§3): validate, redact, screen. Returns
/// what redaction and screening did; the item is changed in place.
pub(crate) fn prepare(config: &Config, dim: usize, m: &mut NewMemory) -> Result<Guarded> {
    validate::scope_name("tenant", &m.tenant)?;
    validate::scope_name("bank", &m.bank)?;
    let mut redactions = BTreeMap::new();
    if let Some(redactor) = &config.redactor {
        let mut fields = vec![&mut m.content];
        fields.extend(m.title.as_mut());
        for field in fields {
            let redaction = redactor.redact(field);
            if redaction.is_redacted() {
                *field = redaction.text;
                for (kind, n) in redaction.counts {
                    *redactions.entry(kind).or_insert(0) += n;
                }
            }
        }
        if !redactions.is_empty() {
            // A caller's vectors were computed from the unredacted text
            // and can leak it; the redacted text is embedded instead.
            m.vector = None;
            m.sentence_vectors.clear();
        }
    }
    validate_new(config, dim, m)?;
    let quarantined = match &config.screen {
        Some(screen) => std::iter::once(m.content.as_str())
            .chain(m.title.as_deref())
            .find_map(|text| screen.screen(text)),
        None => None,
    };
    Ok(Guarded {
        redactions,
        quarantined,
        folded: validate::normalized_text(&m.content),
        content_sha256: content_sha256(&m.content),
        sentences: std::mem::take(&mut m.sentence_vectors),
    })
}

fn validate_new(config: &Config, dim: usize, m: &mut NewMemory) -> Result<()> {
    validate::content(&m.content, config.write.max_content_bytes)?;
    validate::confidence(m.confidence)?;
    if m.source == Source::Explicit && m.confidence < 1.0 {
        // Explicit memories are certain by definition (§2).
        m.confidence = 1.0;
    }
    if let Some(title) = &m.title {
        validate::label("title", title)?;
    }
    for element in &m.elements {
        validate::label("element", element)?;
    }
    if let Some(s) = &m.supersedes {
        validate::label("supersedes", s)?;
    }
    if let Some(v) = m.vector.take() {
        m.vector = Some(normalized(v, dim).map_err(|e| Error::invalid("vector", e.to_string()))?);
    }
    if !m.sentence_vectors.is_empty() {
        if m.vector.is_none() {
            return Err(Error::invalid(
                "sentence_vectors",
                "given without the content's vector",
            ));
        }
        let expected = crate::sentences::sentences(&m.content).len();
        if m.sentence_vectors.len() != expected {
            return Err(Error::invalid(
                "sentence_vectors",
                format!(
                    "{} given for a content that recall::sentences cuts into {expected}",
                    m.sentence_vectors.len()
                ),
            ));
        }
        m.sentence_vectors = std::mem::take(&mut m.sentence_vectors)
            .into_iter()
            .map(|v| {
                normalized(v, dim).map_err(|e| Error::invalid("sentence_vectors", e.to_string()))
            })
            .collect::<Result<_>>()?;
    }
    Ok(())
}

/// The write policy: supersession, title uniqueness, dedup, the similar
/// band, and whether the bank holds the write as a proposal.
///
/// A proposal ([`BankMode::Propose`]) is decided like any write, except
/// that what it supersedes is applied only when it is accepted, and that
/// a proposal copying a pending proposal confirms that one (an agent
/// proposing the same lesson twice makes one proposal). A proposal that
/// copies a served memory confirms it, as any write does: the text the
/// bank serves does not change.
pub(crate) fn decide(
    state: &State,
    items: Vec<NewMemory>,
    mut guarded: Vec<Guarded>,
    now: chrono::DateTime<chrono::Utc>,
    config: &Config,
    dim: usize,
) -> Result<Decided> {
    let (write, proposals) = (&config.write, &config.proposals);
    let folded: Vec<String> = guarded
        .iter_mut()
        .map(|g| std::mem::take(&mut g.folded))
        .collect();
    let proposing: Vec<bool> = items
        .iter()
        .map(|m| proposals.mode(&m.bank, m.trust) == BankMode::Propose)
        .collect();
    // Neighbours already in the store, and near copies among the
    // batch's own items (one matrix product, on one thread), side by side.
    let ((store_near, mut placements), batch_near) = rayon::join(
        || near_in_store(state, &items, &folded, &proposing, write),
        || batch_neighbours(&items, &folded, write.similar_threshold, dim),
    );
    let mut records = Vec::with_capacity(items.len());
    // Each record's placement (memory rows only), in record order.
    let mut record_placements = Vec::with_capacity(items.len());
    let mut outcomes = Vec::with_capacity(items.len());
    let mut audit = Vec::with_capacity(items.len());
    let now_ms = to_ms(now);
    // The id and title each item was stored under, by batch index.
    let mut stored: Vec<Option<(Uuid, Option<String>)>> = vec![None; items.len()];
    let mut batch_titles: HashSet<(String, String)> = HashSet::new();
    for (((index, mut item), mut near), mut guard) in
        items.into_iter().enumerate().zip(store_near).zip(guarded)
    {
        let tenant = state.tenant(&item.tenant);
        let observed = item.observed_at.unwrap_or(now);
        let superseded = match (&item.supersedes, tenant) {
            (None, _) => None,
            (Some(key), Some(t)) => {
                let index = t
                    .resolve(key)
                    .ok_or_else(|| Error::not_found(&item.tenant, key))?;
                let old = &t.memories[index];
                if !old.is_active() {
                    return Err(Error::Conflict {
                        id: old.id,
                        reason: "is not active and cannot be superseded".into(),
                    });
                }
                Some(old)
            }
            (Some(key), None) => return Err(Error::not_found(&item.tenant, key)),
        };
        // Provenance names memories of the tenant, in any state.
        if let Some(missing) = item
            .derived_from
            .iter()
            .find(|id| tenant.and_then(|t| t.get(id)).is_none())
        {
            return Err(Error::not_found(&item.tenant, missing));
        }
        if let Some(title) = &item.title {
            if let Some(holder) = tenant.and_then(|t| t.titles.get(title).map(|i| &t.memories[*i]))
                && superseded.map(|s| s.id) != Some(holder.id)
            {
                return Err(Error::TitleTaken {
                    title: title.clone(),
                    id: holder.id,
                });
            }
            if !batch_titles.insert((item.tenant.clone(), title.clone())) {
                return Err(Error::invalid(
                    "title",
                    format!("`{title}` appears twice in the batch"),
                ));
            }
        }
        let proposal = proposing[index];
        for (earlier, cos) in &batch_near[index] {
            // A served write does not confirm a proposal of the batch.
            if let Some((id, title)) = &stored[*earlier]
                && (proposal || !proposing[*earlier])
            {
                near.push((*id, title.clone(), *cos));
            }
        }
        // A memory made from others is not a copy of them.
        near.retain(|n| !item.derived_from.contains(&n.0));
        near.sort_by(|a, b| b.2.total_cmp(&a.2));

        // Held-back text never confirms a memory that is served.
        if superseded.is_none()
            && guard.quarantined.is_none()
            && let Some((id, _, cos)) = near.first().filter(|n| write.band(n.2) == Band::NearCopy)
        {
            audit.push(
                AuditEntry::new(now_ms, &item.tenant, AuditOp::Remember)
                    .id(id.to_string())
                    .actor(item.agent.clone())
                    .content_sha256(guard.content_sha256)
                    .detail(Some("deduplicated into the existing memory".into())),
            );
            records.push(Event::Confirm.record(&item.tenant, Some(*id), to_ms(observed)));
            record_placements.push(None);
            outcomes.push(Remembered::Deduplicated {
                id: *id,
                cosine: *cos,
            });
            continue;
        }
        let similar_to: Vec<Similar> = near
            .iter()
            .filter(|n| write.band(n.2) == Band::Similar)
            .filter(|n| superseded.map(|s| s.id) != Some(n.0))
            .take(write.max_similar)
            .map(|(id, title, cos)| Similar {
                id: *id,
                title: title.clone(),
                cosine: *cos,
            })
            .collect();
        let id = Uuid::now_v7();
        let elements = match superseded {
            Some(old) if item.elements.is_empty() => old.row.owned_elements(),
            _ => item.elements.clone(),
        };
        records.push(Record::Memory(MemoryRow {
            seq: 0,
            id: id.to_string(),
            tenant: item.tenant.clone(),
            bank: item.bank.clone(),
            kind: item.kind.as_str().to_string(),
            title: item.title.clone(),
            content: std::mem::take(&mut item.content),
            elements,
            source: item.source.as_str().to_string(),
            trust: if guard.quarantined.is_some() {
                Trust::Quarantined.as_str().to_string()
            } else {
                item.trust.as_str().to_string()
            },
            agent: item.agent.clone(),
            session_id: item.session_id.clone(),
            confidence: item.confidence,
            observed_at_ms: to_ms(observed),
            created_at_ms: to_ms(now),
            expires_at_ms: item.expires_at.map(to_ms),
            // A proposal supersedes when it is accepted (`Event::Proposed`).
            supersedes: superseded.filter(|_| !proposal).map(|s| s.id.to_string()),
            vector: item.vector.take(),
            sentences: std::mem::take(&mut guard.sentences),
        }));
        record_placements.push(placements[index].take());
        if !guard.redactions.is_empty() {
            let event = Event::Redacted(guard.redactions.clone());
            records.push(event.record(&item.tenant, Some(id), now_ms));
            record_placements.push(None);
        }
        if let Some(hit) = &guard.quarantined {
            let event = Event::Quarantined {
                rule: hit.rule.clone(),
                trust: item.trust,
            };
            records.push(event.record(&item.tenant, Some(id), now_ms));
            record_placements.push(None);
        }
        if !item.derived_from.is_empty() {
            let event = Event::DerivedFrom(item.derived_from.clone());
            records.push(event.record(&item.tenant, Some(id), now_ms));
            record_placements.push(None);
        }
        if proposal {
            let event = Event::Proposed {
                held: true,
                supersedes: superseded.map(|s| s.id).into_iter().collect(),
            };
            records.push(event.record(&item.tenant, Some(id), now_ms));
            record_placements.push(None);
        }
        let mut detail = Vec::new();
        if proposal {
            detail.push("proposed: held from recall until accepted".to_string());
        }
        if !guard.redactions.is_empty() {
            detail.push(format!("redacted {}", encode_counts(&guard.redactions)));
        }
        if let Some(hit) = &guard.quarantined {
            detail.push(format!("quarantined by rule {}", hit.rule));
        }
        if !item.derived_from.is_empty() {
            detail.push(format!(
                "derived from {}",
                item.derived_from
                    .iter()
                    .map(Uuid::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            ));
        }
        audit.push(
            AuditEntry::new(now_ms, &item.tenant, AuditOp::Remember)
                .id(id.to_string())
                .actor(item.agent.clone())
                .content_sha256(guard.content_sha256)
                .detail((!detail.is_empty()).then(|| detail.join("; "))),
        );
        if let Some(old) = superseded.filter(|_| !proposal) {
            audit.push(
                AuditEntry::new(now_ms, &item.tenant, AuditOp::Supersede)
                    .id(old.id.to_string())
                    .id(id.to_string())
                    .actor(item.agent.clone()),
            );
        }
        stored[index] = Some((id, item.title));
        outcomes.push(if proposal {
            Remembered::Proposed {
                id,
                supersedes: superseded.map(|s| s.id),
                similar_to,
                redactions: guard.redactions,
                quarantined: guard.quarantined.map(|q| q.rule),
            }
        } else {
            Remembered::Stored {
                id,
                similar_to,
                redactions: guard.redactions,
                quarantined: guard.quarantined.map(|q| q.rule),
            }
        });
    }
    Ok(Decided {
        records,
        placements: record_placements,
        outcomes,
        audit,
    })
}

/// Batches at least this long are validated, redacted and screened in parallel.
pub(crate) const PARALLEL_PREPARE_FROM: usize = 32;

/// What the write policy made of a batch: the records to log (and, per
/// record, the list a probe found for its vector), the caller's outcomes
/// and the audit entries.
pub(crate) struct Decided {
    pub(crate) records: Vec<Record>,
    pub(crate) placements: Vec<Option<Placement>>,
    pub(crate) outcomes: Vec<Remembered>,
    pub(crate) audit: Vec<AuditEntry>,
}

/// A batch past steps 1–3 of the write path (see `Engine::prepare_many`).
pub(crate) struct Prepared {
    pub(crate) items: Vec<NewMemory>,
    pub(crate) guarded: Vec<Guarded>,
}

impl Prepared {
    /// Whether the batch holds no items.
    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// What the write path's safety steps did to one item, and what the
/// policy needs of its final text (computed beside the safety steps, in
/// parallel for a batch, rather than under the store lock).
pub(crate) struct Guarded {
    redactions: BTreeMap<String, u32>,
    quarantined: Option<ScreenMatch>,
    /// The content as dedup compares it without vectors.
    folded: String,
    /// For the audit log.
    content_sha256: String,
    /// The content's sentence vectors ([`crate::sentences`]), when the
    /// engine embedded the content itself.
    pub(crate) sentences: Vec<Vec<f32>>,
}

/// Hex SHA-256 of stored content, for the audit log.
pub(crate) fn content_sha256(content: &str) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut hex = String::with_capacity(64);
    for byte in Sha256::digest(content.as_bytes()) {
        hex.push(char::from(DIGITS[usize::from(byte >> 4)]));
        hex.push(char::from(DIGITS[usize::from(byte & 0xf)]));
    }
    hex
}

/// The one near-copy probe (§3): for each of `queries`, the tenant's
/// memories closest to it in vector that `keep(query, memory)` accepts, at
/// most [`WriteConfig::near_candidates`], each at or above the similar
/// threshold, and the list the query's vector would be placed in. The write
/// path asks it for a write's near copies ([`near_in_store`]); the review
/// queue asks it the same question of stored memories, after the fact.
///
/// The scan is [`WriteConfig::near_scan`]: a near copy (cosine ≥ 0.82)
/// differs from the query in far fewer sign bits than unrelated memories
/// do, so it is among the closest codes, and in a partitioned tenant it
/// sits in the query's own list or a neighbouring one. Only rows whose sign
/// codes are close enough to reach the similar band get a dot product. The
/// queries are searched as one batch, so their distances to the partitions'
/// centroids are one matrix product and each probed list is read once for
/// all the queries that probe it; each query's nearest list comes back with
/// its neighbours, so storing a write costs no second pass over the
/// centroids.
pub(crate) fn near_copies<F>(
    t: &TenantState,
    queries: &[&[f32]],
    write: &WriteConfig,
    keep: F,
) -> Vec<(Hits, Option<Placement>)>
where
    F: Fn(usize, usize) -> bool + Sync,
{
    let scan = ScanConfig {
        min_cosine: Some(write.similar_threshold),
        ..write.near_scan
    };
    t.vectors
        .nearest_many_placed(queries, write.near_candidates, scan, keep)
}

/// The write path's search of the store: for each item, the active
/// memories of its tenant and bank closest to it, by vector
/// ([`near_copies`]), and by folded text for memories without vectors.
/// A proposal (`proposing[i]`) also finds the bank's pending proposals.
#[allow(clippy::type_complexity)]
fn near_in_store(
    state: &State,
    items: &[NewMemory],
    folded: &[String],
    proposing: &[bool],
    write: &WriteConfig,
) -> (
    Vec<Vec<(Uuid, Option<String>, f32)>>,
    Vec<Option<Placement>>,
) {
    let mut near = vec![Vec::new(); items.len()];
    let mut placements = vec![None; items.len()];
    let mut by_tenant: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, item) in items.iter().enumerate() {
        by_tenant.entry(&item.tenant).or_default().push(i);
    }
    for (tenant, members) in by_tenant {
        let Some(t) = state.tenant(tenant) else {
            continue;
        };
        // (batch index, bank) of the members whose bank the tenant has.
        let scoped: Vec<(usize, u32)> = members
            .iter()
            .filter_map(|i| t.bank_id(&items[*i].bank).map(|bank| (*i, bank)))
            .collect();
        let same_scope = |i: usize, bank: u32, proposal: bool| {
            let meta = &t.meta[i];
            meta.bank_id == bank
                && (meta.active || (proposal && t.memories[i].pending().is_some_and(|p| p.held)))
        };
        let with_vector: Vec<(usize, u32, &[f32])> = scoped
            .iter()
            .filter_map(|(i, bank)| items[*i].vector.as_deref().map(|v| (*i, *bank, v)))
            .collect();
        let queries: Vec<&[f32]> = with_vector.iter().map(|(_, _, v)| *v).collect();
        let found = near_copies(t, &queries, write, |q, owner| {
            let (i, bank, _) = with_vector[q];
            same_scope(owner, bank, proposing[i])
        });
        for ((i, _, _), (hits, placement)) in with_vector.iter().zip(found) {
            placements[*i] = placement;
            near[*i] = hits
                .into_iter()
                .map(|(m, cos)| (t.memories[m].id, t.memories[m].row.owned_title(), cos))
                .collect();
        }
        for (i, bank) in scoped {
            let vectorless = items[i].vector.is_none();
            if !vectorless && t.without_vector == 0 {
                continue;
            }
            let hash = validate::folded_hash(&folded[i]);
            near[i].extend(
                t.memories
                    .iter()
                    .enumerate()
                    .filter(|(m, memory)| {
                        (vectorless || memory.vector_row().is_none())
                            && same_scope(*m, bank, proposing[i])
                            && memory.folded_hash == hash
                            && validate::normalized_text(&memory.row.content) == folded[i]
                    })
                    .map(|(_, memory)| (memory.id, memory.row.owned_title(), 1.0)),
            );
        }
    }
    (near, placements)
}

/// For each item, the earlier items of the batch in the same tenant and
/// bank that may be near copies: cosine ≥ `threshold` when both have
/// vectors (pairs ruled out by their sign codes first, see
/// [`recall_indexer::near_pairs`]), identical folded text when either has
/// none.
fn batch_neighbours(
    items: &[NewMemory],
    folded: &[String],
    threshold: f32,
    dim: usize,
) -> Vec<Vec<(usize, f32)>> {
    let mut near = vec![Vec::new(); items.len()];
    let mut scopes: HashMap<(&str, &str), Vec<usize>> = HashMap::new();
    for (i, m) in items.iter().enumerate() {
        scopes.entry((&m.tenant, &m.bank)).or_default().push(i);
    }
    for members in scopes.values().filter(|m| m.len() > 1) {
        let embedded: Vec<(usize, &[f32])> = members
            .iter()
            .filter_map(|i| items[*i].vector.as_deref().map(|v| (*i, v)))
            .filter(|(_, v)| v.len() == dim)
            .collect();
        let vectors: Vec<&[f32]> = embedded.iter().map(|(_, v)| *v).collect();
        for (r, pairs) in near_pairs(&vectors, threshold).into_iter().enumerate() {
            near[embedded[r].0].extend(pairs.into_iter().map(|(c, cos)| (embedded[c].0, cos)));
        }
        if embedded.len() < members.len() {
            for (pos, &i) in members.iter().enumerate() {
                for &j in &members[..pos] {
                    let vectorless = items[i].vector.is_none() || items[j].vector.is_none();
                    if vectorless && folded[i] == folded[j] {
                        near[i].push((j, 1.0));
                    }
                }
            }
        }
    }
    near
}
