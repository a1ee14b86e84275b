//! Lifecycle (§4.5–§4.7, §5, §6, §8): usage feedback, drift, links, outcomes,
//! briefing, expiry, persistence of counters, backfill.

use std::sync::Arc;

use chrono::Duration;
use recall::{
    BRIEFING_HEADER, Engine, FixedClock, Kind, ModelSource, NewMemory, ScanConfig, ScoringConfig,
    Source,
};
use recall_datasets::{near_copy, synthetic_corpus};
use uuid::Uuid;

use super::{BANK, TENANT, model, note, open, open_at, t0};

/// The same text in two banks: equally relevant, stored twice.
async fn twins(engine: &Engine, text: &str) -> (Uuid, Uuid) {
    let a = engine
        .remember(NewMemory::new(TENANT, "bank:a", Kind::Note, text))
        .await
        .unwrap()
        .id();
    let b = engine
        .remember(NewMemory::new(TENANT, "bank:b", Kind::Note, text))
        .await
        .unwrap()
        .id();
    (a, b)
}

#[tokio::test]
async fn citations_lift_a_memory_and_the_boost_is_capped() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open_at(dir.path(), Arc::new(FixedClock::new(t0()))).await;
    let (cited, plain) = twins(
        &engine,
        "The search index is rebuilt nightly at two in the morning.",
    )
    .await;
    let query = "when is the search index rebuilt";
    for s in 0..3 {
        let session = format!("s{s}");
        engine
            .recall(TENANT, query)
            .read(["bank:a", "bank:b"])
            .session(&session)
            .execute()
            .await
            .unwrap();
        let ended = engine
            .end_session(TENANT, &session)
            .used([cited])
            .execute()
            .await
            .unwrap();
        assert_eq!(ended.cited, vec![cited]);
    }
    let result = engine
        .recall(TENANT, query)
        .read(["bank:a", "bank:b"])
        .execute()
        .await
        .unwrap();
    assert_eq!(result.hits[0].memory.id, cited);
    assert_eq!(result.hits[1].memory.id, plain);
    let usage = result.hits[0].breakdown.usage();
    assert!((usage - (1.0 + 0.4 * 4f32.ln())).abs() < 1e-6, "{usage}");
    // The two memories score alike but for usage: the ratio is the usage
    // factor itself (a bound like `<= 1.8` could not fail here).
    let ratio = result.hits[0].score / result.hits[1].score;
    assert!((ratio - usage).abs() < 1e-5, "{ratio} vs usage {usage}");
    assert_eq!(result.hits[0].memory.citations, 3);

    // Seven more citing sessions: the boost stops at 1.8.
    for s in 3..10 {
        let session = format!("s{s}");
        engine
            .recall(TENANT, query)
            .read(["bank:a"])
            .session(&session)
            .execute()
            .await
            .unwrap();
        engine
            .end_session(TENANT, &session)
            .used([cited])
            .execute()
            .await
            .unwrap();
    }
    let result = engine
        .recall(TENANT, query)
        .read(["bank:a", "bank:b"])
        .execute()
        .await
        .unwrap();
    assert_eq!(result.hits[0].breakdown.usage(), 1.8);
    assert!((result.hits[0].score / result.hits[1].score - 1.8).abs() < 1e-5);
}

#[tokio::test]
async fn dealt_but_never_used_sinks_and_is_queued_for_review() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open_at(dir.path(), Arc::new(FixedClock::new(t0()))).await;
    let (ignored, fresh) = twins(
        &engine,
        "Invoices are generated on the first business day of the month.",
    )
    .await;
    let query = "when are invoices generated";
    for s in 0..5 {
        engine
            .recall(TENANT, query)
            .read(["bank:a"])
            .session(format!("s{s}"))
            .execute()
            .await
            .unwrap();
        // The same session recalling again deals nothing new.
        engine
            .recall(TENANT, query)
            .read(["bank:a"])
            .session(format!("s{s}"))
            .execute()
            .await
            .unwrap();
    }
    let result = engine
        .recall(TENANT, query)
        .read(["bank:a", "bank:b"])
        .execute()
        .await
        .unwrap();
    assert_eq!(
        result.hits.iter().map(|h| h.memory.id).collect::<Vec<_>>(),
        vec![fresh, ignored]
    );
    assert_eq!(result.hits[1].breakdown.usage(), 0.75);
    let queue = engine.review_queue(TENANT).await.unwrap();
    assert_eq!(queue.ignored.len(), 1);
    assert_eq!(
        (queue.ignored[0].memory.id, queue.ignored[0].impressions),
        (ignored, 5)
    );

    // Citing a memory the session was never dealt changes nothing.
    let before = engine.get(TENANT, fresh).await.unwrap();
    let ended = engine
        .end_session(TENANT, "s0")
        .used([fresh])
        .execute()
        .await
        .unwrap();
    assert_eq!(
        (ended.cited.len(), ended.not_dealt.clone()),
        (0, vec![fresh])
    );
    assert_eq!(engine.get(TENANT, fresh).await.unwrap(), before);
}

#[tokio::test]
async fn drift_demotes_exactly_and_flags_verify_until_confirmed() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(FixedClock::new(t0()));
    let engine = open_at(dir.path(), clock.clone()).await;
    let id = engine
        .remember(
            note(
                Kind::Pitfall,
                "The gateway strips custom headers longer than 8 KB.",
            )
            .element("ApiGateway")
            .agent("agent/sarah"),
        )
        .await
        .unwrap()
        .id();
    let query = "gateway drops large headers";
    let before = engine
        .recall(TENANT, query)
        .read([BANK])
        .execute()
        .await
        .unwrap();
    clock.advance(Duration::seconds(1));
    let flagged = engine.mark_drift(TENANT, "ApiGateway", None).await.unwrap();
    assert_eq!(flagged, vec![id]);
    clock.set(t0());
    let after = engine
        .recall(TENANT, query)
        .read([BANK])
        .execute()
        .await
        .unwrap();
    assert_eq!(after.hits[0].breakdown.drift(), 0.6);
    assert!((after.hits[0].score / before.hits[0].score - 0.6).abs() < 1e-6);
    let text = engine.briefing(&after.hits, 500);
    assert!(
        text.contains("- **ApiGateway** [PITFALL] [VERIFY — the element drifted since this was written] (agent/sarah, 0 days ago): The gateway strips"),
        "{text}"
    );
    engine.confirm(TENANT, id).await.unwrap();
    let confirmed = engine
        .recall(TENANT, query)
        .read([BANK])
        .execute()
        .await
        .unwrap();
    assert_eq!(confirmed.hits[0].breakdown.drift(), 1.0);
    assert!(!engine.briefing(&confirmed.hits, 500).contains("VERIFY"));
}

#[tokio::test]
async fn a_pending_link_resolves_and_recall_brings_the_neighbour() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path()).await;
    let parent = engine
        .remember(
            note(
                Kind::Convention,
                "Before every production deploy, go through [[Deploy checklist]].",
            )
            .title("Deploy rule"),
        )
        .await
        .unwrap()
        .id();
    let links = engine.get(TENANT, parent).await.unwrap().links;
    assert_eq!(
        (links[0].title.as_str(), links[0].id),
        ("Deploy checklist", None)
    );
    let target = engine
        .remember(
            note(
                Kind::Note,
                "Announce in #releases, freeze merges, then page the on-call.",
            )
            .title("Deploy checklist"),
        )
        .await
        .unwrap()
        .id();
    assert_eq!(
        engine.get(TENANT, parent).await.unwrap().links[0].id,
        Some(target)
    );
    let result = engine
        .recall(TENANT, "what do I do before a production deploy")
        .read([BANK])
        .limit(1)
        .execute()
        .await
        .unwrap();
    assert_eq!(result.hits[0].memory.id, parent);
    let neighbour = result
        .hits
        .iter()
        .find(|h| h.memory.id == target)
        .expect("the linked memory comes along");
    assert_eq!(neighbour.via.as_deref(), Some("Deploy rule"));
    assert!((neighbour.score - result.hits[0].score * 0.5).abs() < 1e-6);
}

#[tokio::test]
async fn one_outcome_across_eight_elements_is_one_memory_returned_once() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path()).await;
    let elements: Vec<String> = (0..8).map(|i| format!("Service{i}")).collect();
    let mut end = engine
        .end_session(TENANT, "s1")
        .bank(BANK)
        .outcome("Moved all eight services to the new logging pipeline.");
    for e in &elements {
        end = end.element(e);
    }
    let ended = end.execute().await.unwrap();
    let id = ended.outcome.unwrap().id();
    let outcomes: Vec<_> = engine
        .list(TENANT, None)
        .await
        .unwrap()
        .into_iter()
        .filter(|m| m.kind == Kind::SessionOutcome)
        .collect();
    assert_eq!(outcomes.len(), 1);
    assert_eq!(outcomes[0].elements, elements);
    let result = engine
        .recall(TENANT, "logging pipeline migration")
        .read([BANK])
        .elements(elements.clone())
        .execute()
        .await
        .unwrap();
    assert_eq!(result.hits.iter().filter(|h| h.memory.id == id).count(), 1);
}

#[tokio::test]
async fn briefing_keeps_its_line_shape_and_token_budget() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(FixedClock::new(t0()));
    let engine = open_at(dir.path(), clock.clone()).await;
    engine
        .remember(
            note(
                Kind::Pitfall,
                "Cache keys must include the locale or users see other languages.",
            )
            .element("Cache")
            .observed_at(t0() - Duration::days(96)),
        )
        .await
        .unwrap();
    engine
        .remember(
            note(Kind::Fact, "The cache cluster has three shards.")
                .source(Source::Inferred, 0.9)
                .agent("agent/bob"),
        )
        .await
        .unwrap();
    let result = engine
        .recall(TENANT, "cache keys locale and the cache cluster shards")
        .read([BANK])
        .execute()
        .await
        .unwrap();
    assert_eq!(result.hits.len(), 2);
    let full = engine.briefing(&result.hits, 10_000);
    let lines: Vec<&str> = full.lines().collect();
    assert_eq!(lines[0], BRIEFING_HEADER);
    assert!(lines.contains(&"- **Cache** [PITFALL] (explicit, 96 days ago): Cache keys must include the locale or users see other languages."), "{full}");
    assert!(lines.contains(&"- **repo:api** [FACT] (agent/bob, 0 days ago): observed, not confirmed (confidence 0.90): The cache cluster has three shards."), "{full}");

    let embedder = match model() {
        ModelSource::Custom(e) => e,
        _ => unreachable!(),
    };
    let tokens = |text: &str| -> usize {
        let lines: Vec<&str> = text.lines().collect();
        let counts = embedder.count_tokens(&lines).unwrap();
        counts.iter().sum::<usize>() + lines.len().saturating_sub(1)
    };
    let budget_for_two = tokens(&lines[..2].join("\n"));
    let cut = engine.briefing(&result.hits, budget_for_two + 1);
    assert_eq!(cut.lines().count(), 2);
    assert!(tokens(&cut) <= budget_for_two + 1);
    assert_eq!(engine.briefing(&result.hits, 3), "");
}

#[tokio::test]
async fn expired_session_ended_and_unconfident_memories_leave_recall() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(FixedClock::new(t0()));
    let engine = open_at(dir.path(), clock.clone()).await;
    let expiring = engine
        .remember(
            note(Kind::Note, "The staging certificate is valid until Friday.")
                .expires_at(t0() + Duration::days(2)),
        )
        .await
        .unwrap()
        .id();
    let scratch = engine
        .remember(NewMemory::new(
            TENANT,
            "session:s9",
            Kind::Note,
            "The staging certificate was renewed by hand today.",
        ))
        .await
        .unwrap()
        .id();
    let guess = engine
        .remember(
            note(
                Kind::Fact,
                "The staging certificate is probably issued by Let's Encrypt.",
            )
            .source(Source::Inferred, 0.5),
        )
        .await
        .unwrap()
        .id();
    let recall = |session: Option<&str>| {
        let mut b = engine
            .recall(TENANT, "staging certificate")
            .read([BANK, "session:s9"]);
        if let Some(s) = session {
            b = b.session(s);
        }
        b.execute()
    };
    let ids = |r: recall::RecallResult| r.hits.iter().map(|h| h.memory.id).collect::<Vec<_>>();
    let now = ids(recall(Some("s9")).await.unwrap());
    assert!(
        now.contains(&expiring) && now.contains(&scratch) && now.contains(&guess),
        "{now:?}"
    );
    assert!(
        !ids(recall(Some("other")).await.unwrap()).contains(&scratch),
        "a session bank needs its session"
    );

    engine.end_session(TENANT, "s9").execute().await.unwrap();
    clock.advance(Duration::days(3));
    let later = ids(recall(Some("s9")).await.unwrap());
    assert!(
        !later.contains(&expiring) && !later.contains(&scratch),
        "{later:?}"
    );
    assert!(
        later.contains(&guess),
        "confidence 0.5 × 0.5^(3/30) is still above 0.3"
    );
    clock.advance(Duration::days(30));
    assert!(!ids(recall(Some("s9")).await.unwrap()).contains(&guess));

    let queue = engine.review_queue(TENANT).await.unwrap();
    assert_eq!(
        queue
            .low_confidence
            .iter()
            .map(|m| m.id)
            .collect::<Vec<_>>(),
        vec![guess]
    );
    assert_eq!(
        queue.session_ended.iter().map(|m| m.id).collect::<Vec<_>>(),
        vec![scratch]
    );
    // Promotion takes it out of the session bank, into recall again.
    let promoted = engine.promote(TENANT, scratch, BANK).await.unwrap();
    assert!(
        ids(engine
            .recall(TENANT, "staging certificate")
            .read([BANK])
            .execute()
            .await
            .unwrap())
        .contains(&promoted.id)
    );
}

/// The hit on `id` when `query` is recalled from `bank`, with `vector` as
/// the query vector when given.
async fn hit_on(
    engine: &Engine,
    bank: &str,
    query: &str,
    vector: Option<Vec<f32>>,
    id: Uuid,
) -> Option<recall::Hit> {
    let mut recall = engine.recall(TENANT, query).read([bank]);
    if let Some(v) = vector {
        recall = recall.query_vector(v);
    }
    let hits = recall.execute().await.unwrap().hits;
    hits.into_iter().find(|h| h.memory.id == id)
}

#[tokio::test]
async fn a_promoted_copy_keeps_its_sentence_vectors() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path()).await;
    let scratch = engine
        .remember(NewMemory::new(
            TENANT,
            "repo:scratch",
            Kind::Episode,
            TWO_SENTENCES,
        ))
        .await
        .unwrap()
        .id();
    let boss = "Who is my current boss?";
    let sentence_cosine = |bank: &'static str, id: Uuid| {
        let engine = engine.clone();
        async move {
            hit_on(&engine, bank, boss, None, id)
                .await
                .and_then(|h| h.breakdown.sentence_cosine())
        }
    };
    let before = sentence_cosine("repo:scratch", scratch).await;
    assert!(before.is_some());
    let promoted = engine.promote(TENANT, scratch, BANK).await.unwrap();
    assert_eq!(sentence_cosine(BANK, promoted.id).await, before);
}

#[tokio::test]
async fn sentence_vectors_a_caller_gives_are_scored_and_durable() {
    let dir = tempfile::tempdir().unwrap();
    let axis = |k: usize| {
        let mut v = vec![0.0; 384];
        v[k] = 1.0;
        v
    };
    let content = "Deploys run at noon. Freezes start Friday.";
    // (cosine, closest sentence's cosine) of `id`'s hit.
    let cosines = |engine: Engine, bank: &'static str, query: Vec<f32>, id: Uuid| async move {
        let hit = hit_on(&engine, bank, "freezes", Some(query), id)
            .await
            .unwrap();
        (
            hit.breakdown.cosine().unwrap(),
            hit.breakdown.sentence_cosine(),
        )
    };
    let with = {
        let engine = open(dir.path()).await;
        let with = engine
            .remember(
                note(Kind::Note, content)
                    .vector(axis(0))
                    .sentence_vectors(vec![axis(1), axis(2)]),
            )
            .await
            .unwrap()
            .id();
        let without = engine
            .remember(NewMemory::new(TENANT, "repo:web", Kind::Note, content).vector(axis(0)))
            .await
            .unwrap()
            .id();
        // Far from the whole vector, equal to the second sentence's.
        let (cosine, sentence) = cosines(engine.clone(), BANK, axis(2), with).await;
        assert!((cosine - 1.0).abs() < 1e-4 && (sentence.unwrap() - 1.0).abs() < 1e-4);
        assert_eq!(cosines(engine, "repo:web", axis(0), without).await.1, None);
        with
    };
    // Reopened: the sentence vectors came back from the store.
    let engine = open(dir.path()).await;
    let (cosine, sentence) = cosines(engine, BANK, axis(1), with).await;
    assert!((cosine - 1.0).abs() < 1e-4 && (sentence.unwrap() - 1.0).abs() < 1e-4);
}

#[tokio::test]
async fn counters_drift_and_links_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (id, linked);
    let clock = Arc::new(FixedClock::new(t0()));
    {
        let engine = open_at(dir.path(), clock.clone()).await;
        id = engine
            .remember(
                note(
                    Kind::Pitfall,
                    "Payments retries must reuse the idempotency key, see [[Retry policy]].",
                )
                .element("Payments"),
            )
            .await
            .unwrap()
            .id();
        for s in ["a", "b"] {
            engine
                .recall(TENANT, "payment retries")
                .read([BANK])
                .session(s)
                .execute()
                .await
                .unwrap();
        }
        engine
            .end_session(TENANT, "a")
            .used([id])
            .execute()
            .await
            .unwrap();
        clock.advance(Duration::seconds(1));
        engine.mark_drift(TENANT, "Payments", None).await.unwrap();
        linked = engine
            .remember(
                note(Kind::Convention, "Retry at most three times with jitter.")
                    .title("Retry policy"),
            )
            .await
            .unwrap()
            .id();
    }
    let engine = open_at(dir.path(), clock).await;
    let m = engine.get(TENANT, id).await.unwrap();
    assert_eq!((m.impressions, m.citations, m.verify), (2, 1, true));
    assert_eq!(m.links[0].id, Some(linked));
}

/// Helper process: lifecycle operations forever, printing each memory id
/// once its write, impression, citation and drift stamp were all
/// acknowledged, and a second session's recall dealt it.
#[tokio::test]
#[ignore = "helper process for lifecycle_state_survives_sigkill"]
async fn lifecycle_child() {
    let Ok(dir) = std::env::var("RECALL_CRASH_DIR") else {
        return;
    };
    let engine = open(std::path::Path::new(&dir)).await;
    for i in 0.. {
        let element = format!("Element{i}");
        // One bank per memory: near-identical texts must not deduplicate here.
        let bank = format!("bank:{i}");
        let id = engine
            .remember(
                NewMemory::new(
                    TENANT,
                    &bank,
                    Kind::Note,
                    format!("Lifecycle crash memory {i}"),
                )
                .element(&element),
            )
            .await
            .unwrap()
            .id();
        let session = format!("crash-{i}");
        let text = engine.get(TENANT, id).await.unwrap().content;
        engine
            .recall(TENANT, text)
            .read([bank])
            .limit(1)
            .session(&session)
            .execute()
            .await
            .unwrap();
        engine
            .end_session(TENANT, &session)
            .used([id])
            .execute()
            .await
            .unwrap();
        engine
            .mark_drift(
                TENANT,
                &element,
                Some(chrono::Utc::now() + Duration::seconds(5)),
            )
            .await
            .unwrap();
        // Last, an impression alone: logged without an fsync of its own
        // (`Durability::Logged`), which a killed process must keep too.
        engine
            .recall(TENANT, format!("Lifecycle crash memory {i}"))
            .read([format!("bank:{i}")])
            .limit(1)
            .session(format!("seen-{i}"))
            .execute()
            .await
            .unwrap();
        println!("ACK {id}");
    }
}

#[tokio::test]
async fn lifecycle_state_survives_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let acked = super::run_and_kill("lifecycle::lifecycle_child", dir.path(), 15);

    let engine = open(dir.path()).await;
    for id in acked {
        let m = engine.get(TENANT, id).await.unwrap();
        assert_eq!(
            (m.impressions, m.citations, m.verify),
            (2, 1, true),
            "{m:?}"
        );
    }
}

#[tokio::test]
async fn a_store_written_without_a_model_is_backfilled_and_then_semantic() {
    let dir = tempfile::tempdir().unwrap();
    {
        let engine = Engine::open(super::config(dir.path()).model(ModelSource::None))
            .await
            .unwrap();
        super::seed_engineering(&engine).await;
        engine
            .remember(NewMemory::new(TENANT, BANK, Kind::Episode, TWO_SENTENCES))
            .await
            .unwrap();
        assert_eq!(engine.status().await.unwrap().without_vector, 16);
    }
    let engine = open(dir.path()).await;
    engine.backfill().await.unwrap();
    assert_eq!(engine.status().await.unwrap().without_vector, 0);
    // The backfill embeds sentences as a write does.
    let by_sentence = |result: recall::RecallResult| {
        result
            .hits
            .iter()
            .find(|h| h.memory.content == TWO_SENTENCES)
            .and_then(|h| h.breakdown.sentence_cosine())
    };
    let boss = || {
        engine
            .recall(TENANT, "Who is my current boss?")
            .read([BANK])
            .execute()
    };
    assert!(by_sentence(boss().await.unwrap()).is_some());
    let result = engine
        .recall(TENANT, "How do I throttle API requests?")
        .read([BANK])
        .execute()
        .await
        .unwrap();
    assert!(
        result.hits[0].memory.content.contains("Rate limiting"),
        "{result:#?}"
    );
    assert!(result.hits[0].breakdown.cosine().unwrap() > 0.4);
    drop(engine);
    let engine = open(dir.path()).await;
    assert_eq!(
        engine.status().await.unwrap().without_vector,
        0,
        "backfilled vectors are durable"
    );
    let result = engine
        .recall(TENANT, "Who is my current boss?")
        .read([BANK])
        .execute()
        .await
        .unwrap();
    assert!(by_sentence(result).is_some(), "and so are their sentences'");
}

const TWO_SENTENCES: &str =
    "My new manager, Marcus, wants weekly one-on-ones. How should I prepare for an interview?";

#[tokio::test]
async fn similar_pairs_in_one_bank_are_queued_for_review_whatever_the_scan() {
    // The exact scan, and the sign-code pass over every row in a batch.
    for exact_limit in [10_000, 0] {
        let dir = tempfile::tempdir().unwrap();
        let scoring = ScoringConfig {
            scan: ScanConfig {
                exact_limit,
                ..ScanConfig::default()
            },
            ..ScoringConfig::default()
        };
        let config = super::config(dir.path()).model(model()).scoring(scoring);
        let engine = Engine::open(config).await.unwrap();
        let base = synthetic_corpus(1, 1, 384, 1).remove(0).vector;
        let write = |bank: &str, text: &str, vector: Vec<f32>| {
            let memory = NewMemory::new(TENANT, bank, Kind::Note, text).vector(vector);
            let engine = engine.clone();
            async move { engine.remember(memory).await.unwrap().id() }
        };
        let older = write(BANK, "the original", base.clone()).await;
        let newer = write(BANK, "a near rewording", near_copy(2, &base, 0.88)).await;
        // Near, but in another bank; too far; forgotten.
        write("repo:web", "near, elsewhere", near_copy(3, &base, 0.88)).await;
        write(BANK, "only related", near_copy(4, &base, 0.6)).await;
        let gone = write(BANK, "near, forgotten", near_copy(5, &base, 0.9)).await;
        engine.forget(TENANT, gone).await.unwrap();
        for seed in 10..60 {
            write(
                BANK,
                &format!("unrelated {seed}"),
                near_copy(seed, &base, 0.0),
            )
            .await;
        }
        let queue = engine.review_queue(TENANT).await.unwrap();
        let pairs: Vec<(Uuid, Uuid, f32)> = queue
            .similar
            .iter()
            .map(|p| (p.older.id, p.newer.id, (p.cosine * 100.0).round()))
            .collect();
        assert_eq!(
            pairs,
            vec![(older, newer, 88.0)],
            "exact_limit {exact_limit}"
        );
    }
}

#[tokio::test]
async fn knowledge_map_counts_active_memories_per_element_in_one_tenant() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open_at(dir.path(), Arc::new(FixedClock::new(t0()))).await;
    let write = |memory: NewMemory| {
        let engine = engine.clone();
        async move { engine.remember(memory).await.unwrap().id() }
    };
    // (kind, content, elements, days ago); the last names its element twice,
    // which counts once.
    let written: [(Kind, &str, &[&str], i64); 3] = [
        (
            Kind::Pitfall,
            "The gateway strips custom headers longer than 8 KB.",
            &["ApiGateway"],
            10,
        ),
        (
            Kind::Note,
            "Refunds are routed through the gateway to billing.",
            &["ApiGateway", "Billing"],
            3,
        ),
        (
            Kind::Pitfall,
            "Invoices over 17 MB are rejected by the PDF renderer.",
            &["Billing", "Billing"],
            40,
        ),
    ];
    for (kind, content, elements, days_ago) in written {
        let memory = elements
            .iter()
            .fold(note(kind, content), |m, e| m.element(*e))
            .observed_at(t0() - Duration::days(days_ago));
        write(memory).await;
    }
    let gone = write(
        note(
            Kind::Convention,
            "Every change to the ledger needs a second reviewer.",
        )
        .element("Billing"),
    )
    .await;
    engine.forget(TENANT, gone).await.unwrap();
    // Another tenant's memory is not this tenant's documentation.
    write(
        NewMemory::new("globex", BANK, Kind::Note, "Search reindexes every night.")
            .element("Search"),
    )
    .await;

    let asked: Vec<String> = ["ApiGateway", "Billing", "Search", "ApiGateway"]
        .map(String::from)
        .to_vec();
    let map = engine.knowledge_map(TENANT, &asked).await.unwrap();
    let rows: Vec<(&str, usize, Option<i64>, usize)> = map
        .elements
        .iter()
        .map(|e| (e.element.as_str(), e.memories, e.freshest_days, e.pitfalls))
        .collect();
    assert_eq!(
        rows,
        vec![
            ("ApiGateway", 2, Some(3), 1),
            ("Billing", 2, Some(3), 1),
            ("Search", 0, None, 0),
            ("ApiGateway", 2, Some(3), 1),
        ]
    );
    assert_eq!(map.documented, 3);
    assert_eq!(map.headline, "3 of 4 elements documented");

    let other = engine.knowledge_map("globex", &asked[2..3]).await.unwrap();
    assert_eq!(other.headline, "1 of 1 elements documented");
    assert!(matches!(
        engine.knowledge_map(TENANT, &[String::new()]).await,
        Err(recall::Error::InvalidInput { .. })
    ));
}

/// A store large enough for vector partitions (16,384 rows) saves them
/// when an import ends; the first open extends them (the rows after the
/// import's last batch assignment) instead of training new ones, and saves
/// them; the next open takes them as they are (the file is left as it
/// was), the write path's 2 % probe still finds a near copy through them,
/// a later open adds the new row to them, an erasure in the tenant deletes
/// them, and a close saves the ones trained after it. The first full
/// block of vector rows goes to its file while importing and is mapped
/// from it; later opens find the file as it is; after an erasure no file
/// holds the erased vector. An open after writes that no save counted
/// folds them within the room it made for the saved rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn derived_files_are_taken_at_the_next_open_and_erased_with_the_tenant() {
    // Vector files from one full block on (the default waits for 16).
    let config = |dir: &std::path::Path| {
        let mut config = super::config(dir).model(ModelSource::Custom(Arc::new(
            recall::HashEmbedder::new(384),
        )));
        config.write.vector_files_from = 16_384;
        config
    };
    let corpus = synthetic_corpus(7, 17_000, 384, 340);
    let dir = tempfile::tempdir().unwrap();
    let saved = || -> Vec<std::path::PathBuf> {
        match std::fs::read_dir(dir.path().join("derived").join("partitions")) {
            Ok(entries) => entries.map(|e| e.unwrap().path()).collect(),
            Err(_) => Vec::new(),
        }
    };
    let mut ids = Vec::new();
    {
        let engine = Engine::open(config(dir.path())).await.unwrap();
        let items = corpus.iter().enumerate().map(|(i, m)| {
            NewMemory::new(TENANT, BANK, Kind::Note, format!("memory {i}")).vector(m.vector.clone())
        });
        engine
            .import(items, recall::IMPORT_BATCH, |o| {
                ids.extend(o.iter().map(|r| r.id()))
            })
            .await
            .unwrap();
        engine.flush().await.unwrap();
        assert_eq!(saved().len(), 1, "saved when the import ended");
        assert_eq!(
            engine.memory_use().unwrap().mapped_vectors,
            16_384 * 384 * 4,
            "one full block mapped while importing"
        );
    }
    let block_files = || -> Vec<std::path::PathBuf> {
        let mut found = Vec::new();
        if let Ok(sets) = std::fs::read_dir(dir.path().join("derived").join("vectors")) {
            for set in sets {
                for file in std::fs::read_dir(set.unwrap().path()).unwrap() {
                    found.push(file.unwrap().path());
                }
            }
        }
        found
    };
    let blocks = block_files();
    assert_eq!(blocks.len(), 1, "{blocks:?}");
    let block_written_at = std::fs::metadata(&blocks[0]).unwrap().modified().unwrap();
    // A row as stored: the caller's vector made unit length.
    let in_block_files = |v: &[f32]| {
        let needle: Vec<u8> = recall_indexer::normalized(v.to_vec(), 384)
            .unwrap()
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        block_files().iter().any(|f| {
            std::fs::read(f)
                .unwrap()
                .windows(needle.len())
                .any(|w| w == needle)
        })
    };
    assert!(
        in_block_files(&corpus[5].vector),
        "control: the row is in its block's file"
    );
    let imported = std::fs::read(&saved()[0]).unwrap();
    // The first open of the full store extends and saves them. Its
    // centroids are the import's (header: 48 bytes, the centroid count at
    // 16..20), not a new training's.
    drop(Engine::open(config(dir.path())).await.unwrap());
    let files = saved();
    assert_eq!(files.len(), 1, "the whole vectors' partitions: {files:?}");
    let (file, first) = (&files[0], std::fs::read(&files[0]).unwrap());
    let centroids = |saved: &[u8]| {
        let k = u32::from_le_bytes(saved[16..20].try_into().unwrap()) as usize;
        saved[48..48 + k * 384 * 4].to_vec()
    };
    assert_eq!(
        centroids(&first),
        centroids(&imported),
        "extended, not trained"
    );
    assert!(
        first.len() > imported.len(),
        "the rows after the import's last assignment"
    );
    let modified = || std::fs::metadata(file).unwrap().modified().unwrap();
    let written_at = modified();

    let engine = Engine::open(config(dir.path())).await.unwrap();
    let folded = engine.memory_use().unwrap();
    assert_eq!(folded.mapped_vectors, 16_384 * 384 * 4);
    assert_eq!(block_files(), blocks);
    assert_eq!(
        std::fs::metadata(&blocks[0]).unwrap().modified().unwrap(),
        block_written_at,
        "the block's file found holding its rows, not written again"
    );
    assert_eq!(std::fs::read(file).unwrap(), first);
    assert_eq!(
        modified(),
        written_at,
        "taken as saved, not trained and written again"
    );
    let copy = near_copy(99, &corpus[1234].vector, 0.97);
    let outcome = engine
        .remember(NewMemory::new(TENANT, BANK, Kind::Note, "a near copy").vector(copy))
        .await
        .unwrap();
    assert!(
        matches!(outcome, recall::Remembered::Deduplicated { id, .. } if id == ids[1234]),
        "{outcome:?}"
    );
    let fresh = engine
        .remember(
            NewMemory::new(TENANT, BANK, Kind::Note, "new")
                .vector(corpus[0].vector.iter().rev().copied().collect()),
        )
        .await
        .unwrap();
    assert!(
        matches!(fresh, recall::Remembered::Stored { .. }),
        "{fresh:?}"
    );
    drop(engine);

    // Below the default's rows, the rows stay on the heap.
    let mut default_config = config(dir.path());
    default_config.write.vector_files_from = recall::WriteConfig::default().vector_files_from;
    let engine = Engine::open(default_config).await.unwrap();
    let use_ = engine.memory_use().unwrap();
    assert_eq!(use_.mapped_vectors, 0);
    // One memory more than the saved partitions count (written after
    // their last save, dropped without a close): folded within the room
    // the open made, not into a tenant grown to twice its rows.
    assert!(
        use_.memories < folded.memories * 5 / 4,
        "{} against {} bytes",
        use_.memories,
        folded.memories
    );
    drop(engine);

    let engine = Engine::open(config(dir.path())).await.unwrap();
    assert_eq!(
        std::fs::read(file).unwrap().len(),
        first.len() + 4,
        "the new row's list added"
    );
    engine
        .erase(TENANT, recall::EraseScope::Memory(ids[5]), "test")
        .await
        .unwrap();
    assert!(
        saved().is_empty(),
        "an erasure deletes its tenant's partitions"
    );
    assert!(
        !in_block_files(&corpus[5].vector),
        "the erased vector is in no block file"
    );
    assert!(in_block_files(&corpus[6].vector), "control: a kept one is");
    let hit = engine
        .recall(TENANT, "memory 6")
        .read([BANK])
        .query_vector(corpus[6].vector.clone())
        .execute()
        .await
        .unwrap();
    assert_eq!(hit.hits[0].memory.id, ids[6]);
    engine.close().await.unwrap();
    assert_eq!(
        saved().len(),
        1,
        "close saves the partitions trained after the erasure"
    );
}
