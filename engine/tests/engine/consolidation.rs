//! Consolidation: the default pass folds near copies that slipped past
//! write-time dedup, turns an episode repeated across sessions into a
//! fact and proposes the updates of a value changed three times for
//! review, leaves everything else alone, changes nothing in a dry run,
//! proposes nothing the second time, and refuses proposals that reach
//! outside their batch.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use recall::{
    AuditOp, Config, ConsolidationBatch, Consolidator, Engine, FixedClock, Kind, LanguageModel,
    ModelConsolidator, ModelFuture, ModelRequest, NewMemory, Proposal, ProposalPolicy, WriteConfig,
};
use recall_datasets::{near_copy, synthetic_corpus};
use uuid::Uuid;

use super::{TENANT, model, t0};

const DIM: usize = 384;

/// What the corpus holds, by id.
struct Known {
    /// The same lesson in five wordings, written as episodes in three sessions.
    lesson: Vec<Uuid>,
    /// A pitfall and two near copies of it (cosine 0.97), oldest first.
    copies: Vec<Uuid>,
    /// A value updated three times, oldest first: each update reads as a
    /// change of the one before.
    updates: Vec<Uuid>,
    /// Everything that must be left alone.
    others: Vec<Uuid>,
}

async fn open(dir: &Path, write: WriteConfig) -> Engine {
    open_at(dir, write, Arc::new(FixedClock::new(t0()))).await
}

async fn open_at(dir: &Path, write: WriteConfig, clock: Arc<FixedClock>) -> Engine {
    // The corpus stands for a team's served memory: no bank holds its
    // writes for review (tests/engine/proposals.rs covers that).
    let config = Config::new(dir)
        .model(model())
        .clock(clock)
        .write(write)
        .proposals(ProposalPolicy::direct());
    Engine::open(config).await.unwrap()
}

fn memory(bank: &str, kind: Kind, content: String, vector: Vec<f32>) -> NewMemory {
    NewMemory::new(TENANT, bank, kind, content).vector(vector)
}

/// Writes the corpus. Dedup is raised to 0.99 while it is written, as if
/// the copies had been written before a model was configured: they are
/// stored apart and only a consolidation finds them.
async fn write_corpus(engine: &Engine) -> Known {
    let base = synthetic_corpus(5, 40, DIM, 40);
    let mut others = Vec::new();
    let put = |m: NewMemory| async move { engine.remember(m).await.unwrap().id() };

    let lesson_vector = &base[0].vector;
    let mut lesson = Vec::new();
    for (i, session) in ["s1", "s1", "s2", "s3", "s3"].into_iter().enumerate() {
        let mut m = memory(
            "repo:api",
            Kind::Episode,
            format!("Retrying the billing export twice fixed the timeout (wording {i})."),
            near_copy(100 + i as u64, lesson_vector, 0.92),
        )
        .element("Billing");
        m.session_id = Some(session.into());
        lesson.push(put(m).await);
    }

    let pitfall = &base[1].vector;
    let mut copies = vec![
        put(memory(
            "repo:api",
            Kind::Pitfall,
            "The gateway drops headers over 8 KB.".into(),
            pitfall.clone(),
        ))
        .await,
    ];
    for i in 0..2 {
        copies.push(
            put(memory(
                "repo:api",
                Kind::Pitfall,
                format!("Headers above 8 KB are dropped by the gateway ({i})."),
                near_copy(200 + i, pitfall, 0.97),
            ))
            .await,
        );
    }

    // Three episodes that say the same thing in one session only.
    let one_session = &base[2].vector;
    for i in 0..3 {
        let mut m = memory(
            "repo:api",
            Kind::Episode,
            format!("The nightly build was slow again ({i})."),
            near_copy(300 + i, one_session, 0.92),
        )
        .element("Build");
        m.session_id = Some("s9".into());
        others.push(put(m).await);
    }
    // Two that say the same thing across sessions: too few.
    let pair = &base[3].vector;
    for (i, session) in ["s1", "s2"].into_iter().enumerate() {
        let mut m = memory(
            "repo:api",
            Kind::Episode,
            format!("The staging deploy needed a manual restart ({i})."),
            near_copy(400 + i as u64, pair, 0.92),
        )
        .element("Staging");
        m.session_id = Some(session.into());
        others.push(put(m).await);
    }
    // A value updated three times (facts, not episodes): not folded, each
    // update proposed to supersede the one before.
    let value = &base[4].vector;
    let mut updates = Vec::new();
    for (i, text) in [
        "The export API allows 600 requests a minute.",
        "The export API now allows 900 requests a minute.",
        "The export API switched to 1,200 requests a minute.",
    ]
    .into_iter()
    .enumerate()
    {
        updates.push(
            put(memory(
                "repo:api",
                Kind::Fact,
                text.into(),
                near_copy(500 + i as u64, value, 0.92),
            )
            .element("ExportApi"))
            .await,
        );
    }
    // A copy of the pitfall in another bank: not folded.
    others.push(
        put(memory(
            "repo:web",
            Kind::Pitfall,
            "The gateway drops headers over 8 KB (web).".into(),
            near_copy(600, pitfall, 0.97),
        ))
        .await,
    );
    // Three that say the same thing across sessions about no element.
    let chatter = &base[5].vector;
    for (i, session) in ["s1", "s2", "s3"].into_iter().enumerate() {
        let mut m = memory(
            "repo:api",
            Kind::Episode,
            format!("Thanks, that was a great chat ({i})!"),
            near_copy(700 + i as u64, chatter, 0.92),
        );
        m.session_id = Some(session.into());
        others.push(put(m).await);
    }
    // Unrelated memories.
    for (i, m) in base[6..].iter().enumerate() {
        let mut episode = memory(
            "repo:api",
            Kind::Episode,
            format!("Unrelated event number {i}."),
            m.vector.clone(),
        );
        episode.session_id = Some(format!("u{i}"));
        others.push(put(episode).await);
    }
    Known {
        lesson,
        copies,
        updates,
        others,
    }
}

/// Every file under `dir`, with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let name = path.strip_prefix(dir).unwrap().display().to_string();
                files.insert(name, std::fs::read(&path).unwrap());
            }
        }
    }
    files
}

#[tokio::test]
async fn the_default_pass_folds_copies_and_makes_a_fact_of_a_repeated_episode() {
    let dir = tempfile::tempdir().unwrap();
    let lenient = WriteConfig {
        dedup_threshold: 0.99,
        ..WriteConfig::default()
    };
    let known = {
        let engine = open(dir.path(), lenient).await;
        write_corpus(&engine).await
    };
    let engine = open(dir.path(), WriteConfig::default()).await;
    engine.flush().await.unwrap();
    engine.wait_for_maintenance().await.unwrap();

    // A dry run proposes and writes nothing.
    let before = snapshot(dir.path());
    let preview = engine
        .consolidate(TENANT)
        .dry_run(true)
        .execute()
        .await
        .unwrap();
    assert_eq!(
        snapshot(dir.path()),
        before,
        "a dry run changed the data directory"
    );
    assert!(
        preview
            .proposals
            .iter()
            .all(|p| !p.applied && p.refused.is_none())
    );

    // Precision and recall against the known groups: exactly the fold and
    // the fact, nothing that touches the others.
    let expected_fold = Proposal::Fold {
        into: known.copies[0],
        copies: known.copies[1..].to_vec(),
    };
    let touched: HashSet<Uuid> = preview
        .proposals
        .iter()
        .flat_map(|p| p.ids.clone())
        .collect();
    assert!(
        known.others.iter().all(|id| !touched.contains(id)),
        "{:#?}",
        preview.proposals
    );
    assert_eq!(preview.proposals.len(), 4, "{:#?}", preview.proposals);
    assert_eq!(preview.proposals[0].proposal, expected_fold);
    let Proposal::Add {
        derived_from,
        memory_kind,
        content,
        elements,
    } = &preview.proposals[1].proposal
    else {
        panic!("expected an add: {:#?}", preview.proposals[1]);
    };
    let mut lesson = known.lesson.clone();
    lesson.sort();
    assert_eq!(derived_from, &lesson);
    assert_eq!(*memory_kind, Kind::Fact);
    assert!(content.starts_with("Retrying the billing export twice"));
    assert_eq!(elements, &vec!["Billing".to_string()]);
    let expected_updates: Vec<Proposal> = known
        .updates
        .windows(2)
        .map(|w| Proposal::Supersede {
            old: w[0],
            by: w[1],
        })
        .collect();
    let found_updates: Vec<Proposal> = preview.proposals[2..]
        .iter()
        .map(|p| p.proposal.clone())
        .collect();
    assert_eq!(found_updates, expected_updates);

    // Applied.
    let pass = engine.consolidate(TENANT).execute().await.unwrap();
    assert!(
        pass.proposals.iter().all(|p| p.applied),
        "{:#?}",
        pass.proposals
    );
    let kept = engine.get(TENANT, known.copies[0]).await.unwrap();
    assert!(kept.is_active());
    assert_eq!(kept.confirmations, 2);
    for copy in &known.copies[1..] {
        let gone = engine.get(TENANT, *copy).await.unwrap();
        assert_eq!(gone.superseded_by, Some(known.copies[0]));
        let chain: Vec<Uuid> = engine
            .history(TENANT, *copy)
            .await
            .unwrap()
            .iter()
            .map(|m| m.id)
            .collect();
        assert_eq!(chain, vec![*copy, known.copies[0]]);
    }
    assert_eq!(
        pass.proposals.iter().map(|p| p.pending).collect::<Vec<_>>(),
        [false, false, true, true],
        "the supersessions wait for review"
    );
    let fact_id = pass.proposals[1].memory.expect("the add stored a memory");
    let fact = engine.get(TENANT, fact_id).await.unwrap();
    assert_eq!((fact.kind, fact.bank.as_str()), (Kind::Fact, "repo:api"));
    assert_eq!(fact.derived_from, lesson);
    for id in &known.lesson {
        assert!(
            engine.get(TENANT, *id).await.unwrap().is_active(),
            "episodes stay"
        );
    }
    for id in &known.others {
        let m = engine.get(TENANT, *id).await.unwrap();
        assert!(m.is_active() && m.confirmations == 0, "{m:?}");
    }

    // Every applied proposal is in the audit log.
    let audit = engine.audit(TENANT).await.unwrap();
    let folds: Vec<_> = audit
        .iter()
        .filter(|e| e.op == AuditOp::Consolidate)
        .collect();
    // Two folds and two proposed supersessions.
    assert_eq!(folds.len(), 4);
    assert_eq!(
        folds
            .iter()
            .filter(|e| e
                .detail
                .as_deref()
                .is_some_and(|d| d.contains("waits for review")))
            .count(),
        2
    );
    assert!(audit.iter().any(|e| {
        e.op == AuditOp::Remember
            && e.ids == vec![fact_id.to_string()]
            && e.detail
                .as_deref()
                .is_some_and(|d| d.contains("derived from"))
    }));

    // The updates wait: every version is served until someone accepts.
    for id in &known.updates {
        assert!(engine.get(TENANT, *id).await.unwrap().is_active());
    }
    assert_eq!(engine.proposals(TENANT).await.unwrap().len(), 2);

    // A second pass, and one after a reopen, propose nothing.
    let again = engine.consolidate(TENANT).execute().await.unwrap();
    assert!(again.proposals.is_empty(), "{:#?}", again.proposals);
    drop(engine);
    let engine = open(dir.path(), WriteConfig::default()).await;
    assert_eq!(
        engine.get(TENANT, fact_id).await.unwrap().derived_from,
        lesson
    );
    let reopened = engine.consolidate(TENANT).execute().await.unwrap();
    assert!(reopened.proposals.is_empty(), "{:#?}", reopened.proposals);

    // Accepted in turn, the updates make one chain, newest served.
    for id in &known.updates[1..] {
        engine.accept(TENANT, *id, "ann").await.unwrap();
    }
    let chain: Vec<Uuid> = engine
        .history(TENANT, known.updates[0])
        .await
        .unwrap()
        .iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(chain, known.updates);
    let served: Vec<bool> = {
        let mut served = Vec::new();
        for id in &known.updates {
            served.push(engine.get(TENANT, *id).await.unwrap().is_active());
        }
        served
    };
    assert_eq!(served, [false, false, true]);
    let audit = engine.audit(TENANT).await.unwrap();
    assert_eq!(audit.iter().filter(|e| e.op == AuditOp::Accept).count(), 2);

    // A recall near the lesson shows the fact's text once: the episode it
    // quotes gives way to it; the other wordings stay.
    let lesson_vector = synthetic_corpus(5, 40, DIM, 40)[0].vector.clone();
    let hits = engine
        .recall(TENANT, "billing export timeout")
        .read(["repo:api"])
        .query_vector(lesson_vector)
        .execute()
        .await
        .unwrap()
        .hits;
    let shown: Vec<Uuid> = hits.iter().map(|h| h.memory.id).collect();
    assert_eq!(shown.first(), Some(&fact_id), "{shown:?}");
    assert_eq!(
        hits.iter()
            .filter(|h| h.memory.content == fact.content)
            .count(),
        1,
        "{shown:?}"
    );
    let wordings = known.lesson.iter().filter(|id| shown.contains(id)).count();
    assert_eq!(wordings, known.lesson.len() - 1, "{shown:?}");

    // A new wording of the lesson does not make a second fact.
    let mut late = memory(
        "repo:api",
        Kind::Episode,
        "Retrying the billing export twice fixed the timeout (late).".into(),
        near_copy(109, &synthetic_corpus(5, 40, DIM, 40)[0].vector, 0.92),
    )
    .element("Billing");
    late.session_id = Some("s4".into());
    engine.remember(late).await.unwrap();
    let late_pass = engine.consolidate(TENANT).execute().await.unwrap();
    assert!(
        late_pass
            .proposals
            .iter()
            .all(|p| !matches!(p.proposal, Proposal::Add { .. })),
        "{:#?}",
        late_pass.proposals
    );
}

/// A note of another tenant, which no proposal about `TENANT` may name.
async fn other_tenants_note(engine: &Engine) -> Uuid {
    let note = NewMemory::new("globex", "repo:api", Kind::Note, "Another tenant's note.");
    engine.remember(note).await.unwrap().id()
}

/// Proposes what it is told to, whatever the batch holds.
struct Scripted(Vec<Proposal>);

impl Consolidator for Scripted {
    fn propose(&self, _batch: &ConsolidationBatch) -> Vec<Proposal> {
        self.0.clone()
    }
}

#[tokio::test]
async fn proposals_outside_their_batch_are_refused_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), WriteConfig::default()).await;
    let vectors = synthetic_corpus(8, 3, DIM, 3);
    let mut ids = Vec::new();
    for (bank, v) in ["repo:api", "repo:api", "repo:web"]
        .into_iter()
        .zip(&vectors)
    {
        ids.push(
            engine
                .remember(memory(
                    bank,
                    Kind::Note,
                    format!("A note in {bank}."),
                    v.vector.clone(),
                ))
                .await
                .unwrap()
                .id(),
        );
    }
    let other_tenant = other_tenants_note(&engine).await;
    let before = engine.export(TENANT).await.unwrap();
    let scripted = Scripted(vec![
        // Invented and cross-tenant ids.
        Proposal::Fold {
            into: ids[0],
            copies: vec![Uuid::now_v7()],
        },
        Proposal::Add {
            derived_from: vec![other_tenant],
            memory_kind: Kind::Fact,
            content: "Stolen.".into(),
            elements: Vec::new(),
        },
        // Across banks, twice the same id, empty.
        Proposal::Fold {
            into: ids[0],
            copies: vec![ids[2]],
        },
        Proposal::Fold {
            into: ids[0],
            copies: vec![ids[1], ids[1]],
        },
        Proposal::Add {
            derived_from: Vec::new(),
            memory_kind: Kind::Fact,
            content: "From nothing.".into(),
            elements: Vec::new(),
        },
    ]);
    let pass = engine
        .consolidate(TENANT)
        .consolidator(scripted)
        .execute()
        .await
        .unwrap();
    assert_eq!(pass.proposals.len(), 5);
    for p in &pass.proposals {
        assert!(!p.applied && p.refused.is_some(), "{p:#?}");
    }
    assert_eq!(engine.export(TENANT).await.unwrap(), before);
    assert_eq!(engine.export("globex").await.unwrap().len(), 1);
}

/// A language model that answers with what `answer` makes of the request.
struct ScriptedModel<F>(F);

impl<F> LanguageModel for ScriptedModel<F>
where
    F: Fn(&ModelRequest) -> Result<String, String> + Send + Sync,
{
    fn complete<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a> {
        let answer = (self.0)(request);
        Box::pin(async move { answer })
    }
}

#[tokio::test]
async fn a_models_answer_is_checked_like_any_proposal() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), WriteConfig::default()).await;
    let vectors = synthetic_corpus(9, 3, DIM, 3);
    let mut ids = Vec::new();
    for (i, (bank, v)) in ["repo:api", "repo:api", "repo:web"]
        .into_iter()
        .zip(&vectors)
        .enumerate()
    {
        let m = memory(
            bank,
            Kind::Episode,
            format!("Episode {i} in {bank}."),
            v.vector.clone(),
        );
        ids.push(engine.remember(m).await.unwrap().id());
    }
    let other_tenant = other_tenants_note(&engine).await;
    let audit_before = engine.audit(TENANT).await.unwrap().len();

    // Not JSON, JSON of another shape, and a model that fails: the pass
    // fails with a typed error, applies nothing and keeps its cursor.
    for answer in [
        Ok("Sure! Here are my proposals: fold everything.".to_string()),
        Ok(r#"{"proposals": [{"kind": "delete", "id": "x"}]}"#.to_string()),
        Err("the endpoint refused the request".to_string()),
    ] {
        let failed = engine
            .consolidate(TENANT)
            .model(ScriptedModel(move |_: &ModelRequest| answer.clone()))
            .execute()
            .await;
        assert!(
            matches!(failed, Err(recall::Error::Model { .. })),
            "{failed:?}"
        );
    }
    assert_eq!(engine.audit(TENANT).await.unwrap().len(), audit_before);

    // A well-formed answer: invented, cross-tenant and cross-bank ids are
    // refused one by one; the valid proposal is applied.
    let (a, b, web) = (ids[0], ids[1], ids[2]);
    let seen = Arc::new(std::sync::Mutex::new(None));
    let asked = Arc::clone(&seen);
    let model = ScriptedModel(move |request: &ModelRequest| {
        *asked.lock().unwrap() = Some(request.clone());
        Ok(serde_json::json!({"proposals": [
            {"kind": "fold", "into": a, "copies": [Uuid::now_v7()]},
            {"kind": "supersede", "old": other_tenant, "by": a},
            {"kind": "add", "derived_from": [a, web], "memory_kind": "fact", "content": "Across banks."},
            {"kind": "add", "derived_from": [a, b], "memory_kind": "fact", "content": "Episodes 0 and 1 happened in the api.", "elements": ["Api"]},
            {"kind": "nothing", "reason": "the rest is unrelated"},
            {"kind": "link", "a": a, "b": b},
            {"kind": "confirm", "id": a, "evidence": [b]},
            {"kind": "replace", "old": [a, b], "memory_kind": "note", "content": "The api had one incident, told twice."},
        ]})
        .to_string())
    });
    let pass = engine
        .consolidate(TENANT)
        .model(model)
        .execute()
        .await
        .unwrap();
    let applied: Vec<bool> = pass.proposals.iter().map(|p| p.applied).collect();
    assert_eq!(
        applied,
        [false, false, false, true, true, true, true, true],
        "{:#?}",
        pass.proposals
    );
    let request = seen.lock().unwrap().clone().expect("the model was asked");
    assert_eq!(request.system, ModelConsolidator::SYSTEM);
    assert_eq!(request.schema, ModelConsolidator::schema());
    for id in &ids {
        assert!(
            request.prompt.contains(&id.to_string()),
            "{}",
            request.prompt
        );
    }
    assert!(!request.prompt.contains(&other_tenant.to_string()));
    let fact = engine
        .get(TENANT, pass.proposals[3].memory.expect("stored"))
        .await
        .unwrap();
    assert_eq!(
        (fact.kind, fact.derived_from.clone()),
        (Kind::Fact, vec![a, b])
    );
    // Linked to the other, confirmed by it, then replaced with it by one note.
    let merged = pass.proposals[7].memory.expect("the replacement");
    let first = engine.get(TENANT, a).await.unwrap();
    assert_eq!(
        first.links.iter().map(|l| l.id).collect::<Vec<_>>(),
        vec![Some(b)]
    );
    assert_eq!(
        (first.confirmations, first.superseded_by),
        (1, Some(merged))
    );
    assert_eq!(
        engine.get(TENANT, b).await.unwrap().superseded_by,
        Some(merged)
    );
    let note = engine.get(TENANT, merged).await.unwrap();
    assert!(
        note.is_active() && note.derived_from == vec![a, b],
        "{note:?}"
    );
    assert!(engine.get(TENANT, web).await.unwrap().is_active());
    assert_eq!(engine.export("globex").await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_narrowed_pass_looks_only_at_its_banks_and_kinds_and_keeps_the_cursor() {
    let dir = tempfile::tempdir().unwrap();
    let lenient = WriteConfig {
        dedup_threshold: 0.99,
        ..WriteConfig::default()
    };
    let base = synthetic_corpus(12, 2, DIM, 2);
    let mut pairs = Vec::new();
    {
        let engine = open(dir.path(), lenient).await;
        for (bank, v) in ["repo:api", "repo:web"].into_iter().zip(&base) {
            let mut pair = Vec::new();
            for (i, vector) in [v.vector.clone(), near_copy(5, &v.vector, 0.97)]
                .into_iter()
                .enumerate()
            {
                let m = memory(
                    bank,
                    Kind::Pitfall,
                    format!("A pitfall of {bank} ({i})."),
                    vector,
                );
                pair.push(engine.remember(m).await.unwrap().id());
            }
            pairs.push(pair);
        }
    }
    let engine = open(dir.path(), WriteConfig::default()).await;
    let folds = |pass: &recall::Consolidation| -> Vec<Vec<Uuid>> {
        pass.proposals
            .iter()
            .filter(|p| p.applied)
            .map(|p| p.ids.clone())
            .collect()
    };
    // Other kinds, or nothing changed since a later time: nothing to do.
    let notes = engine
        .consolidate(TENANT)
        .kinds([Kind::Note])
        .execute()
        .await
        .unwrap();
    assert_eq!((notes.looked_at, notes.proposals.len()), (0, 0));
    let later = t0() + chrono::Duration::days(1);
    let since = engine
        .consolidate(TENANT)
        .since(later)
        .execute()
        .await
        .unwrap();
    assert_eq!(since.looked_at, 0);
    // One bank: only its copy is folded, and the cursor stays.
    let web = engine
        .consolidate(TENANT)
        .banks(["repo:web"])
        .execute()
        .await
        .unwrap();
    assert_eq!(folds(&web), vec![pairs[1].clone()]);
    let all = engine.consolidate(TENANT).execute().await.unwrap();
    assert_eq!(folds(&all), vec![pairs[0].clone()], "{:#?}", all.proposals);
    let again = engine.consolidate(TENANT).execute().await.unwrap();
    assert!(
        again.proposals.is_empty() && again.looked_at == 0,
        "{again:#?}"
    );
}

#[tokio::test]
async fn a_budgeted_pass_goes_on_where_the_last_one_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(FixedClock::new(t0()));
    let lenient = WriteConfig {
        dedup_threshold: 0.99,
        ..WriteConfig::default()
    };
    let engine = open_at(dir.path(), lenient, clock.clone()).await;
    // Twelve unrelated notes, then a pitfall and its near copy, a second apart.
    let base = synthetic_corpus(11, 13, DIM, 13);
    for (i, m) in base.iter().enumerate() {
        clock.advance(chrono::Duration::seconds(1));
        let kind = if i == 12 { Kind::Pitfall } else { Kind::Note };
        engine
            .remember(memory(
                "repo:api",
                kind,
                format!("Memory {i}."),
                m.vector.clone(),
            ))
            .await
            .unwrap();
    }
    clock.advance(chrono::Duration::seconds(1));
    engine
        .remember(memory(
            "repo:api",
            Kind::Pitfall,
            "Memory 12, again.".into(),
            near_copy(3, &base[12].vector, 0.97),
        ))
        .await
        .unwrap();

    // Consolidated with the default dedup threshold, which the copy is above.
    drop(engine);
    let engine = open_at(dir.path(), WriteConfig::default(), clock).await;
    assert!(
        engine
            .consolidate(TENANT)
            .budget(0)
            .execute()
            .await
            .is_err()
    );
    let mut lefts = Vec::new();
    let mut proposals = Vec::new();
    loop {
        let pass = engine
            .consolidate(TENANT)
            .budget(5)
            .execute()
            .await
            .unwrap();
        lefts.push(pass.left);
        proposals.extend(pass.proposals);
        if pass.left == 0 {
            break;
        }
    }
    assert_eq!(lefts, vec![9, 4, 0]);
    assert_eq!(proposals.len(), 1, "{proposals:#?}");
    assert!(proposals[0].applied && matches!(proposals[0].proposal, Proposal::Fold { .. }));
    let after = engine
        .consolidate(TENANT)
        .budget(5)
        .execute()
        .await
        .unwrap();
    assert_eq!((after.looked_at, after.left), (0, 0));
}
