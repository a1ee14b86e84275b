//! Integration tests: the real all-MiniLM-L6-v2 model (missing model files
//! fail loudly: run scripts/setup.sh), real LanceDB and tantivy files in temp
//! directories.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, OnceLock};

use chrono::{DateTime, Duration, Utc};
use recall::{
    Config, Engine, Error, FastEmbedder, FixedClock, Kind, LexicalSupport, ModelSource, NewMemory,
    Remembered, ScoringConfig,
};
use uuid::Uuid;

#[path = "engine/compat.rs"]
mod compat;
#[path = "engine/consolidation.rs"]
mod consolidation;
#[path = "engine/faults.rs"]
mod faults;
#[path = "engine/injected.rs"]
mod injected;
#[path = "engine/lifecycle.rs"]
mod lifecycle;
#[cfg(feature = "s3")]
#[path = "engine/nodes.rs"]
mod nodes;
#[cfg(feature = "s3")]
#[path = "engine/object_storage.rs"]
mod object_storage;
#[path = "engine/properties.rs"]
mod properties;
#[path = "engine/proposals.rs"]
mod proposals;
#[path = "engine/reopen.rs"]
mod reopen;
#[path = "engine/safety.rs"]
mod safety;
#[path = "engine/stress.rs"]
mod stress;

/// A store of a team's served memory: no bank holds the tests' agent
/// writes for review (`engine/proposals.rs` tests the default policy).
fn config(dir: impl Into<std::path::PathBuf>) -> Config {
    Config::new(dir).proposals(recall::ProposalPolicy::direct())
}

fn model() -> ModelSource {
    static MODEL: OnceLock<Arc<FastEmbedder>> = OnceLock::new();
    let embedder = MODEL.get_or_init(|| {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../models");
        Arc::new(FastEmbedder::from_dir(&dir).unwrap_or_else(|e| {
            panic!("the integration tests need the real model ({e}); run scripts/setup.sh")
        }))
    });
    ModelSource::Custom(embedder.clone())
}

async fn open(dir: &std::path::Path) -> Engine {
    Engine::open(config(dir).model(model())).await.unwrap()
}

/// An engine on the real model whose clock the test holds.
async fn open_at(dir: &std::path::Path, clock: Arc<FixedClock>) -> Engine {
    Engine::open(config(dir).model(model()).clock(clock))
        .await
        .unwrap()
}

fn t0() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-06-01T12:00:00Z")
        .unwrap()
        .to_utc()
}

const TENANT: &str = "acme";
const BANK: &str = "repo:api";

fn note(kind: Kind, text: &str) -> NewMemory {
    NewMemory::new(TENANT, BANK, kind, text)
}

async fn seed_engineering(engine: &Engine) {
    let texts = [
        "Rate limiting caps the number of calls a client can make to the API each minute.",
        "The staging database is refreshed from a production snapshot every Sunday.",
        "Use the feature flag service for gradual rollouts instead of long-lived branches.",
        "Frontend bundles are served from the CDN with a one-year cache header.",
        "The on-call rotation changes every Monday at 10:00.",
        "Kubernetes pods are evicted when the node runs out of ephemeral storage.",
        "Deploy error E4012 means the registry credentials in the image pull secret expired.",
        "When a deploy fails, first check the pipeline logs for the failing step.",
        "The finance platform team owns ledger_sync_worker.rs; its alerts go to the #fin-alerts channel.",
        "The payments worker crashes when the database connection pool is exhausted.",
        "Background workers crash on malformed JSON messages from the queue.",
        "The sync worker crashes with a panic when the upstream API returns a 502.",
        "Deploys fail when the readiness probe times out after a slow database migration.",
        "A failed deploy can be rolled back with the previous release tag.",
        "Deployment errors are reported to the #deploys channel by the pipeline bot.",
    ];
    let batch = texts.iter().map(|t| note(Kind::Note, t)).collect();
    engine.remember_many(batch).await.unwrap();
}

fn rank_of(result: &recall::RecallResult, needle: &str) -> Option<usize> {
    result
        .hits
        .iter()
        .position(|h| h.memory.content.contains(needle))
}

#[tokio::test]
async fn semantic_recall_bridges_vocabulary_mismatch() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path()).await;
    seed_engineering(&engine).await;
    let result = engine
        .recall(TENANT, "How do I throttle API requests?")
        .read([BANK])
        .execute()
        .await
        .unwrap();
    assert_eq!(rank_of(&result, "Rate limiting"), Some(0), "{result:#?}");
    let top = &result.hits[0].breakdown;
    assert!(top.cosine().unwrap() > 0.4, "cosine {top:?}");
}

/// The cosine of `text` to `query` by the model alone.
fn model_cosine(text: &str, query: &str) -> f32 {
    let ModelSource::Custom(embedder) = model() else {
        unreachable!("model() is a custom source")
    };
    let v = unit_embeddings(embedder.as_ref(), &[text, query]);
    v[0].iter().zip(&v[1]).map(|(a, b)| a * b).sum()
}

fn unit_embeddings(embedder: &dyn recall::Embedder, texts: &[&str]) -> Vec<Vec<f32>> {
    embedder
        .embed(texts)
        .unwrap()
        .into_iter()
        .map(|v| {
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.into_iter().map(|x| x / norm).collect()
        })
        .collect()
}

#[tokio::test]
async fn a_memory_is_found_by_its_closest_sentence_also_after_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let turn = "Before I forget, my new manager, Marcus, wants weekly one-on-ones. \
                How should I prepare for a job interview in marketing?";
    let query = "Who is my current boss?";
    let whole = model_cosine(turn, query);
    let sentence = model_cosine(
        "Before I forget, my new manager, Marcus, wants weekly one-on-ones.",
        query,
    );
    // The blur this guards against: the request dilutes the statement.
    assert!(
        sentence > whole + 0.05,
        "sentence {sentence}, whole {whole}"
    );
    // The memory is served with its first sentence's cosine.
    let check = async |engine: &Engine| {
        let result = engine
            .recall(TENANT, query)
            .read([BANK])
            .execute()
            .await
            .unwrap();
        let hit = result
            .hits
            .iter()
            .find(|h| h.memory.content == turn)
            .unwrap_or_else(|| panic!("{result:#?}"));
        let b = &hit.breakdown;
        let got = b.sentence_cosine().unwrap();
        assert!((got - sentence).abs() < 1e-4, "{b:?} against {sentence}");
        assert_eq!(b.cosine(), Some(got));
        assert!(
            b.explain().contains("from its closest sentence"),
            "{}",
            b.explain()
        );
    };
    {
        let engine = open(dir.path()).await;
        seed_engineering(&engine).await;
        engine.remember(note(Kind::Episode, turn)).await.unwrap();
        // A one-sentence memory gets no sentence vectors.
        let r = engine
            .recall(TENANT, "rate limiting")
            .read([BANK])
            .execute()
            .await
            .unwrap();
        assert!(
            r.hits
                .iter()
                .all(|h| h.breakdown.sentence_cosine().is_none()),
            "{r:#?}"
        );
        check(&engine).await;
    }
    // Replayed from the log at the next open.
    let engine = open(dir.path()).await;
    check(&engine).await;
    engine.flush().await.unwrap();
    drop(engine);
    // Read back from the tables once the log is flushed.
    check(&open(dir.path()).await).await;
}

#[tokio::test]
async fn lexical_stage_finds_a_rare_identifier_the_vector_ranks_low() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path()).await;
    seed_engineering(&engine).await;
    // A catalogue of look-alike error codes: the vector barely tells E4012
    // from E4013, BM25 matches the exact token.
    let causes = [
        "the deploy manifest failed schema validation",
        "the target namespace does not exist",
        "the service account lacks permission to create pods",
        "the container image tag was not found",
        "the readiness probe never succeeded",
        "the node pool has no free capacity",
        "the config map is larger than 1 MB",
        "the rollout exceeded its progress deadline",
    ];
    let batch = causes
        .iter()
        .enumerate()
        .map(|(i, cause)| {
            note(
                Kind::Note,
                &format!("Deploy error E40{:02} means {cause}.", 20 + i),
            )
        })
        .collect();
    engine.remember_many(batch).await.unwrap();
    let query = "What does deploy error E4012 mean?";
    let hybrid = engine
        .recall(TENANT, query)
        .read([BANK])
        .execute()
        .await
        .unwrap();
    assert_eq!(rank_of(&hybrid, "E4012"), Some(0), "{hybrid:#?}");
    assert!(hybrid.hits[0].breakdown.bm25().is_some());

    let vector_only = ScoringConfig {
        vector_weight: 1.0,
        lexical_weight: 0.0,
        min_relevance: 0.0,
        ..ScoringConfig::default()
    };
    drop(engine);
    let engine = Engine::open(config(dir.path()).model(model()).scoring(vector_only))
        .await
        .unwrap();
    let dense = engine
        .recall(TENANT, query)
        .read([BANK])
        .execute()
        .await
        .unwrap();
    let dense_rank = rank_of(&dense, "E4012").unwrap_or(usize::MAX);
    assert!(
        dense_rank > 0,
        "the vector alone already ranks it first: {dense:#?}"
    );
}

/// An engine on the real model holding `turns` as episodes (its directory
/// lives as long as the first element).
async fn with_episodes(turns: &[&str]) -> (tempfile::TempDir, Engine) {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path()).await;
    engine
        .remember_many(turns.iter().map(|t| note(Kind::Episode, t)).collect())
        .await
        .unwrap();
    (dir, engine)
}

#[tokio::test]
async fn a_word_shared_by_chance_does_not_outrank_a_paraphrase() {
    // A generated probe the hybrid lost to the vector alone: the question
    // shares only "new" with a request about Git (cosine ≈ 0), and nothing
    // with the turn that answers it.
    let (_dir, engine) = with_episodes(&[
        "Oh, and moving boxes everywhere since we relocated to Ballard last weekend.",
        "Explain error handling to me like I'm new to Git.",
        "What are some cheap date ideas in Montreal?",
        "Give me three stretches for my lower back after sitting all day.",
        "Can you recommend podcasts about the ocean?",
        "What's a reasonable weekly schedule for practicing chess?",
    ])
    .await;
    let query = "Where is our new place?";
    let recall = |scoring: ScoringConfig| {
        engine
            .recall(TENANT, query)
            .read([BANK])
            .scoring(scoring)
            .execute()
    };

    // With only its cosine left, the chance match falls under the hit floor.
    let supported = recall(ScoringConfig::default()).await.unwrap();
    assert_eq!(rank_of(&supported, "Ballard"), Some(0), "{supported:#?}");
    assert_eq!(rank_of(&supported, "Git"), None, "{supported:#?}");

    // The spec's relevance, every lexical match counted in full, puts the
    // chance match first.
    let whole_lexical = recall(ScoringConfig {
        lexical_support: None,
        ..ScoringConfig::default()
    })
    .await
    .unwrap();
    assert_eq!(
        rank_of(&whole_lexical, "Git"),
        Some(0),
        "{whole_lexical:#?}"
    );
}

#[tokio::test]
async fn a_request_sharing_the_questions_words_does_not_outrank_the_preference() {
    // A generated probe the hybrid lost to the vector alone: the request
    // shares "recommend" with the question, the preference that answers it
    // shares nothing, and the two are about as close in meaning.
    let (_dir, engine) = with_episodes(&[
        "Oh, and I love slow-burn psychological thrillers, but jump-scare horror is not for me.",
        "Can you recommend podcasts about rain?",
        "Can you suggest a catchy name for a podcast about autumn?",
        "What are some cheap date ideas in Chicago?",
        "Write a short haiku about friendship.",
        "How do I fix a merge conflict in Git projects?",
    ])
    .await;
    let recall = |question_offset: f32| {
        engine
            .recall(TENANT, "Can you recommend a film for Friday night?")
            .read([BANK])
            .scoring(ScoringConfig {
                lexical_support: Some(LexicalSupport {
                    question_offset,
                    ..LexicalSupport::default()
                }),
                // The offset alone: requests weigh what statements do.
                question_weight: 1.0,
                ..ScoringConfig::default()
            })
            .execute()
    };

    let default = LexicalSupport::default().question_offset;
    let asked_more = recall(default).await.unwrap();
    assert_eq!(
        rank_of(&asked_more, "thrillers"),
        Some(0),
        "{asked_more:#?}"
    );
    let request = &asked_more.hits[rank_of(&asked_more, "rain").unwrap()];
    assert!(request.breakdown.b() > 0.0 && request.breakdown.lexical_share() < 1.0);

    // Judged like a statement, the request's shared word puts it first.
    let alike = recall(0.0).await.unwrap();
    assert_eq!(rank_of(&alike, "rain"), Some(0), "{alike:#?}");
}

#[tokio::test]
async fn near_copies_deduplicate_and_the_similar_band_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path()).await;
    let first = engine
        .remember(note(
            Kind::Pitfall,
            "The API gateway strips custom headers longer than 8 KB.",
        ))
        .await
        .unwrap();
    let again = engine
        .remember(note(
            Kind::Pitfall,
            "the API gateway strips custom headers longer than 8 KB",
        ))
        .await
        .unwrap();
    match again {
        Remembered::Deduplicated { id, cosine } => {
            assert_eq!(id, first.id());
            assert!(cosine >= 0.94);
        }
        other => panic!("expected a dedup, got {other:?}"),
    }
    let m = engine.get(TENANT, first.id()).await.unwrap();
    assert_eq!(m.confirmations, 1);

    let near = engine
        .remember(note(
            Kind::Pitfall,
            "Custom headers over 8 KB are silently dropped by the API gateway.",
        ))
        .await
        .unwrap();
    match &near {
        Remembered::Stored { similar_to, .. } => {
            let s = similar_to
                .iter()
                .find(|s| s.id == first.id())
                .unwrap_or_else(|| panic!("no similar_to for the reworded copy: {near:?}"));
            assert!((0.82..0.94).contains(&s.cosine), "cosine {}", s.cosine);
        }
        other => panic!("expected stored with similar_to, got {other:?}"),
    }
    assert_eq!(engine.list(TENANT, None).await.unwrap().len(), 2);
}

#[tokio::test]
async fn supersede_hides_the_old_memory_and_keeps_it_in_history() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path()).await;
    let old = engine
        .remember(
            note(
                Kind::Convention,
                "Releases are cut from the develop branch every two weeks.",
            )
            .title("Release cadence")
            .element("Release"),
        )
        .await
        .unwrap()
        .id();
    let new = engine
        .remember(
            note(
                Kind::Convention,
                "Releases are cut from main every Thursday.",
            )
            .title("Release cadence")
            .supersedes("Release cadence"),
        )
        .await
        .unwrap()
        .id();
    let result = engine
        .recall(TENANT, "when are releases cut")
        .read([BANK])
        .execute()
        .await
        .unwrap();
    let ids: Vec<Uuid> = result.hits.iter().map(|h| h.memory.id).collect();
    assert!(ids.contains(&new) && !ids.contains(&old), "{ids:?}");
    let history = engine.history(TENANT, new).await.unwrap();
    assert_eq!(
        history.iter().map(|m| m.id).collect::<Vec<_>>(),
        vec![old, new]
    );
    assert_eq!(history[0].superseded_by, Some(new));
    assert_eq!(
        history[1].elements,
        vec!["Release".to_string()],
        "elements are inherited"
    );

    // And the explicit form, between two stored memories.
    let a = engine
        .remember(note(Kind::Fact, "The API runs on Python 3.11."))
        .await
        .unwrap()
        .id();
    let b = engine
        .remember(note(Kind::Fact, "The API was ported to Rust in 2026."))
        .await
        .unwrap()
        .id();
    engine.supersede(TENANT, a, b).await.unwrap();
    let result = engine
        .recall(TENANT, "what language is the API written in")
        .read([BANK])
        .execute()
        .await
        .unwrap();
    assert!(result.hits.iter().all(|h| h.memory.id != a));
    assert_eq!(engine.get(TENANT, a).await.unwrap().superseded_by, Some(b));
}

/// A unit vector of the model's width: `weights` on the first axes.
fn direction(weights: &[(usize, f32)]) -> Vec<f32> {
    let mut v = vec![0.0; 384];
    for &(axis, w) in weights {
        v[axis] = w;
    }
    v
}

#[tokio::test]
async fn abstention_is_decided_per_query_and_weak_hits_fill_an_answer() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path()).await;
    let config = ScoringConfig::default();
    let write = async |text: &str, v: Vec<f32>| {
        let written = engine.remember(note(Kind::Note, text).vector(v)).await;
        written.unwrap().id()
    };
    // `weak` has cosine 0.2 to `strong`.
    let strong = write(
        "Deploy windows open at noon on weekdays.",
        direction(&[(0, 1.0)]),
    )
    .await;
    let weak_v = direction(&[(0, 0.2), (1, (1.0f32 - 0.04).sqrt())]);
    let weak = write("The cafeteria serves soup on Fridays.", weak_v).await;
    let unrelated = write(
        "Parking permits renew every January.",
        direction(&[(2, 1.0)]),
    )
    .await;
    let ask = |v: Vec<f32>| {
        engine
            .recall(TENANT, "zebra quokka")
            .read([BANK])
            .query_vector(v)
            .execute()
    };
    let ids = |r: &recall::RecallResult| r.hits.iter().map(|h| h.memory.id).collect::<Vec<_>>();
    let rel = |cos: f32| config.vector_weight * cos;

    // Every hit is weak (cosine 0.3 and 0.15): the best passes the gate, so
    // the one below it is returned too, although it would not pass the gate
    // alone; the unrelated one (relevance 0) is not.
    assert!(0.3 >= config.min_evidence_cosine && 0.15 < config.min_evidence_cosine);
    assert!(
        rel(0.15)
            >= config
                .min_hit_relevance
                .max(config.min_hit_share * rel(0.3))
    );
    let b = (0.15 - 0.2 * 0.3) / (1.0f32 - 0.04).sqrt();
    let rest = (1.0 - 0.09 - b * b).sqrt();
    let answered = ask(direction(&[(0, 0.3), (1, b), (4, rest)]))
        .await
        .unwrap();
    assert_eq!(ids(&answered), vec![strong, weak]);
    assert!(!answered.abstained);

    // A clear answer (relevance 0.55) does not bring the weak one along.
    assert!(rel(0.2) < config.min_hit_share * rel(1.0));
    let clear = ask(direction(&[(0, 1.0)])).await.unwrap();
    assert_eq!(ids(&clear), vec![strong]);
    assert!(!ids(&clear).contains(&unrelated));

    // Nothing reaches the gate: the engine abstains, although the best
    // candidate is above the hit floor.
    let below = config.min_evidence_cosine - 0.02;
    assert!(rel(below) >= config.min_hit_relevance);
    let near_miss = (1.0f32 - below * below).sqrt();
    let abstained = ask(direction(&[(0, below), (5, near_miss)])).await.unwrap();
    assert!(abstained.abstained);
    assert!(abstained.hits.is_empty());

    // A memory matching the query's words answers it, whatever its cosine.
    let named = write(
        "Zebra quokka is the staging cluster.",
        direction(&[(6, 1.0)]),
    )
    .await;
    let by_words = ask(direction(&[(0, below), (5, near_miss)])).await.unwrap();
    assert!(!by_words.abstained);
    assert_eq!(by_words.hits[0].memory.id, named);
    assert!(by_words.hits[0].breakdown.b() >= config.min_evidence_lexical);
    assert!(by_words.hits[0].breakdown.cosine() < Some(config.min_evidence_cosine));
}

#[tokio::test]
async fn a_question_about_someone_the_memory_never_heard_of_abstains() {
    // Every turn names its speaker, as in LoCoMo: a question about another
    // person's weekend sits close to these turns in meaning.
    let (_dir, engine) = with_episodes(&[
        "Ana: we went hiking in the mountains last weekend and camped by a lake.",
        "Ana: my sister just adopted a puppy from the shelter.",
        "Ana: work has been busy, we ship the new release on Thursday.",
    ])
    .await;
    engine
        .remember(NewMemory::new(
            TENANT,
            "user:bob",
            Kind::Note,
            "Carlos runs the Tuesday climbing group.",
        ))
        .await
        .unwrap();
    let ask = |query: &'static str, banks: &'static [&'static str], scoring: ScoringConfig| {
        engine
            .recall(TENANT, query)
            .read(banks.iter().copied())
            .scoring(scoring)
            .execute()
    };
    let other = "What did Carlos do last weekend?";
    let unheard = ask(other, &[BANK], ScoringConfig::default()).await.unwrap();
    assert!(unheard.abstained && unheard.hits.is_empty(), "{unheard:#?}");
    assert_eq!(unheard.unknown_names, ["Carlos"]);
    // Without the rule the same question is answered: it is close enough.
    let off = ScoringConfig {
        unknown_names: false,
        ..ScoringConfig::default()
    };
    let answered = ask(other, &[BANK], off.clone()).await.unwrap();
    assert!(!answered.abstained, "{answered:#?}");
    // The memory's own person, and a name in a bank the caller may read.
    let own = ask(
        "What did Ana do last weekend?",
        &[BANK],
        ScoringConfig::default(),
    )
    .await
    .unwrap();
    assert_eq!(rank_of(&own, "hiking"), Some(0), "{own:#?}");
    assert!(own.unknown_names.is_empty());
    let readable = ask(other, &[BANK, "user:bob"], ScoringConfig::default())
        .await
        .unwrap();
    assert!(
        !readable.abstained && readable.unknown_names.is_empty(),
        "{readable:#?}"
    );
    // A request for advice draws on what the store holds whatever it names.
    let advice = "Any tips for a weekend hike with Carlos?";
    let with_rule = ask(advice, &[BANK], ScoringConfig::default())
        .await
        .unwrap();
    assert_eq!(with_rule.unknown_names, ["Carlos"]);
    let without = ask(advice, &[BANK], off).await.unwrap();
    assert_eq!(with_rule.hits.len(), without.hits.len());
    assert!(!with_rule.abstained, "{with_rule:#?}");
}

#[tokio::test]
async fn a_memory_that_only_asks_needs_more_to_open_the_gate() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path()).await;
    let config = ScoringConfig::default();
    let question = config.question_evidence.unwrap();
    let write = async |text: &str, v: Vec<f32>| {
        let written = engine.remember(note(Kind::Note, text).vector(v)).await;
        written.unwrap().id()
    };
    let request = write(
        "What are some cheap date ideas in Montreal?",
        direction(&[(0, 1.0)]),
    )
    .await;
    // One sentence each, so a memory's only vector is the one given. A
    // cosine between the statements' threshold and the questions'.
    let cosine = (config.min_evidence_cosine + question.min_cosine) / 2.0;
    let query = direction(&[(0, cosine), (1, (1.0 - cosine * cosine).sqrt())]);
    let ask = |scoring: ScoringConfig| {
        engine
            .recall(TENANT, "zebra quokka")
            .read([BANK])
            .query_vector(query.clone())
            .scoring(scoring)
            .execute()
    };
    let ids = |r: &recall::RecallResult| r.hits.iter().map(|h| h.memory.id).collect::<Vec<_>>();

    // The request alone: close enough for a statement, not for a question.
    let alone = ask(config.clone()).await.unwrap();
    assert!(alone.abstained);
    assert!(alone.hits.is_empty());
    // Judged like any memory, it answers.
    let as_any = ScoringConfig {
        question_evidence: None,
        ..config.clone()
    };
    let answered = ask(as_any.clone()).await.unwrap();
    assert!(!answered.abstained);
    assert_eq!(ids(&answered), vec![request]);

    // A turn that states something and asks something: only its question
    // is that close, so it is judged as a question too.
    let turn = "We moved to Ballard last month. Which cafés there open early?";
    assert_eq!(recall::sentences(turn).len(), 2);
    let mixed = engine
        .remember(
            note(Kind::Note, turn)
                .vector(direction(&[(3, 1.0)]))
                .sentence_vectors(vec![direction(&[(4, 1.0)]), direction(&[(0, 1.0)])]),
        )
        .await
        .unwrap()
        .id();
    assert!(ask(config.clone()).await.unwrap().abstained);
    let mut answered = ids(&ask(as_any).await.unwrap());
    answered.sort();
    let mut both = vec![request, mixed];
    both.sort();
    assert_eq!(answered, both);

    // A statement at the same cosine answers, and the request comes along
    // as a hit once the query has an answer.
    let statement = write(
        "We celebrated at a cheap restaurant in Montreal.",
        direction(&[(2, 1.0)]),
    )
    .await;
    let both = direction(&[
        (0, cosine),
        (2, cosine),
        (1, (1.0 - 2.0 * cosine * cosine).sqrt()),
    ]);
    let with_statement = engine
        .recall(TENANT, "zebra quokka")
        .read([BANK])
        .query_vector(both)
        .execute()
        .await
        .unwrap();
    assert!(!with_statement.abstained);
    let mut got = ids(&with_statement);
    got.sort();
    let mut want = vec![request, mixed, statement];
    want.sort();
    assert_eq!(got, want);
}

#[tokio::test]
async fn a_request_closer_in_meaning_ranks_below_a_statement_that_answers() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path()).await;
    let write = async |text: &str, axis: usize| {
        let written = engine
            .remember(note(Kind::Note, text).vector(direction(&[(axis, 1.0)])))
            .await;
        written.unwrap().id()
    };
    let request = write("Can you recommend podcasts about rain?", 0).await;
    let statement = write("I love slow-burn psychological thrillers.", 1).await;
    // Both clear the gate; the request is the closer of the two.
    let (closer, farther) = (0.5f32, 0.4f32);
    let query = direction(&[
        (0, closer),
        (1, farther),
        (2, (1.0 - closer * closer - farther * farther).sqrt()),
    ]);
    let ask = |question_weight: f32| {
        engine
            .recall(TENANT, "zebra quokka")
            .read([BANK])
            .query_vector(query.clone())
            .scoring(ScoringConfig {
                question_weight,
                ..ScoringConfig::default()
            })
            .execute()
    };
    let ids = |r: &recall::RecallResult| r.hits.iter().map(|h| h.memory.id).collect::<Vec<_>>();

    let weight = ScoringConfig::default().question_weight;
    let ranked = ask(weight).await.unwrap();
    assert_eq!(ids(&ranked), vec![statement, request]);
    let (answer, asked) = (&ranked.hits[0].breakdown, &ranked.hits[1].breakdown);
    assert_eq!((answer.question(), asked.question()), (1.0, weight));
    // The factor is the score's, not the relevance's: the request is
    // still the more relevant of the two.
    assert!(asked.rel() > answer.rel());
    assert!(asked.explain().contains("question 0.60 (it only asks)"));
    assert!(!answer.explain().contains("it only asks"));

    // Weighed like a statement, the closer request ranks first.
    assert_eq!(ids(&ask(1.0).await.unwrap()), vec![request, statement]);
}

#[tokio::test]
async fn decay_kind_weight_and_abstention_under_an_injected_clock() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open_at(dir.path(), Arc::new(FixedClock::new(t0()))).await;
    let text = "Background jobs retry three times with exponential backoff before alerting.";
    let old = engine
        .remember(
            NewMemory::new(TENANT, "bank:old", Kind::Note, text)
                .observed_at(t0() - Duration::days(200)),
        )
        .await
        .unwrap()
        .id();
    let new = engine
        .remember(
            NewMemory::new(TENANT, "bank:new", Kind::Note, text)
                .observed_at(t0() - Duration::days(5)),
        )
        .await
        .unwrap()
        .id();
    let result = engine
        .recall(TENANT, "how many times do background jobs retry")
        .read(["bank:old", "bank:new"])
        .execute()
        .await
        .unwrap();
    let ids: Vec<Uuid> = result.hits.iter().map(|h| h.memory.id).collect();
    assert_eq!(ids, vec![new, old]);
    assert!(result.hits[0].breakdown.decay() > result.hits[1].breakdown.decay());
    assert_eq!(
        result.hits[0].breakdown.rel(),
        result.hits[1].breakdown.rel()
    );

    let pitfall_text = "Never run the schema migration while the nightly export is running.";
    let as_note = engine
        .remember(NewMemory::new(TENANT, "bank:a", Kind::Note, pitfall_text))
        .await
        .unwrap()
        .id();
    let as_pitfall = engine
        .remember(NewMemory::new(
            TENANT,
            "bank:b",
            Kind::Pitfall,
            pitfall_text,
        ))
        .await
        .unwrap()
        .id();
    let result = engine
        .recall(TENANT, "can I migrate the schema during the export")
        .read(["bank:a", "bank:b"])
        .execute()
        .await
        .unwrap();
    let ids: Vec<Uuid> = result.hits.iter().map(|h| h.memory.id).collect();
    assert_eq!(ids, vec![as_pitfall, as_note]);
    assert_eq!(result.hits[0].breakdown.kind_weight(), 3.0);

    // Lowercase, so that it names nothing: the cosine gate decides, not the
    // unknown-name rule (`a_question_about_someone_the_memory_never_heard_of_abstains`).
    let result = engine
        .recall(TENANT, "what is the capital of mongolia?")
        .read(["bank:old", "bank:new", "bank:a", "bank:b"])
        .execute()
        .await
        .unwrap();
    assert!(result.abstained && result.hits.is_empty(), "{result:#?}");
}

#[tokio::test]
async fn a_newer_version_of_a_fact_ranks_above_the_older_one() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open_at(dir.path(), Arc::new(FixedClock::new(t0()))).await;
    let at = |days: i64, kind: Kind, text: &str| {
        NewMemory::new(TENANT, BANK, kind, text).observed_at(t0() - Duration::days(days))
    };
    let old = engine
        .remember(at(
            40,
            Kind::Fact,
            "Our rent for the apartment is $1,600 a month.",
        ))
        .await
        .unwrap()
        .id();
    let new = engine
        .remember(at(
            10,
            Kind::Fact,
            "The landlord raised our rent, it's $2,400 a month starting now.",
        ))
        .await
        .unwrap()
        .id();
    for (days, text) in [
        (
            12,
            "We adopted a rescue puppy and the kids named him Biscuit.",
        ),
        (30, "My commute to the office is a 25-minute bike ride."),
    ] {
        engine.remember(at(days, Kind::Fact, text)).await.unwrap();
    }
    let question = "How much do I pay for housing each month?";
    let ranked = |result: &recall::RecallResult| -> Vec<Uuid> {
        result
            .hits
            .iter()
            .map(|h| h.memory.id)
            .filter(|id| *id == old || *id == new)
            .collect()
    };

    // The older statement is the closer match: by score alone it ranks first.
    let by_score = engine
        .recall(TENANT, question)
        .read([BANK])
        .scoring(ScoringConfig {
            update_similarity: None,
            ..ScoringConfig::default()
        })
        .execute()
        .await
        .unwrap();
    assert_eq!(ranked(&by_score), vec![old, new], "{by_score:#?}");

    let result = engine
        .recall(TENANT, question)
        .read([BANK])
        .execute()
        .await
        .unwrap();
    assert_eq!(ranked(&result), vec![new, old], "{result:#?}");
    let lifted = &result.hits[0].breakdown;
    assert_eq!(lifted.updates(), Some(old));
    assert!(lifted.update() > 1.0 && lifted.score() > result.hits[1].score);
    assert!(lifted.explain().contains(&old.to_string()));
}

/// Conversation turns (episodes): a statement restated once later, standing
/// apart from the other hits, is lifted as an update; a thread of similar
/// turns about one topic is left in score order unless the turns are facts.
#[tokio::test]
async fn a_restated_episode_is_lifted_only_when_it_stands_apart() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open_at(dir.path(), Arc::new(FixedClock::new(t0()))).await;
    let write = |days: i64, kind: Kind, text: &str| {
        let engine = &engine;
        let m = NewMemory::new(TENANT, BANK, kind, text).observed_at(t0() - Duration::days(days));
        async move { engine.remember(m).await.unwrap().id() }
    };
    let order_of = |result: &recall::RecallResult, ids: &[Uuid]| -> Vec<Uuid> {
        result
            .hits
            .iter()
            .map(|h| h.memory.id)
            .filter(|id| ids.contains(id))
            .collect()
    };
    let recall = |question: &'static str, scoring: ScoringConfig| {
        let engine = &engine;
        async move {
            engine
                .recall(TENANT, question)
                .read([BANK])
                .scoring(scoring)
                .execute()
                .await
                .unwrap()
        }
    };
    let no_lift = || ScoringConfig {
        update_similarity: None,
        ..ScoringConfig::default()
    };

    let old = write(
        40,
        Kind::Episode,
        "Our rent for the apartment is $1,600 a month.",
    )
    .await;
    let new = write(
        10,
        Kind::Episode,
        "The landlord raised our rent, it's $2,400 a month starting now. Any tips for a cheap weekend in Chicago?",
    )
    .await;
    for (days, text) in [
        (
            12,
            "We adopted a rescue puppy and the kids named him Biscuit.",
        ),
        (30, "My commute to the office is a 25-minute bike ride."),
        (
            20,
            "How would I say 'where is the train station' in German?",
        ),
    ] {
        write(days, Kind::Episode, text).await;
    }
    let question = "How much do I pay for housing each month?";
    let by_score = recall(question, no_lift()).await;
    assert_eq!(
        order_of(&by_score, &[old, new]),
        vec![old, new],
        "{by_score:#?}"
    );
    let result = recall(question, ScoringConfig::default()).await;
    assert_eq!(
        order_of(&result, &[old, new]),
        vec![new, old],
        "{result:#?}"
    );
    assert_eq!(result.hits[0].breakdown.updates(), Some(old));
    // With no isolation cut-off, episodes are never versions.
    let off = recall(
        question,
        ScoringConfig {
            update_isolation: None,
            ..ScoringConfig::default()
        },
    )
    .await;
    assert_eq!(order_of(&off, &[old, new]), vec![old, new], "{off:#?}");

    // A thread: the first telling and two later turns about the same group.
    let thread = [
        (
            60,
            "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
        ),
        (
            45,
            "Caroline: The support group had a new member today, and she shared her story.",
        ),
        (
            30,
            "Caroline: At the support group today we talked about coming out to family.",
        ),
    ];
    let mut episodes = Vec::new();
    let mut facts = Vec::new();
    for (days, text) in thread {
        episodes.push(write(days, Kind::Episode, text).await);
    }
    let question = "When did Caroline go to the LGBTQ support group?";
    let by_score = order_of(&recall(question, no_lift()).await, &episodes);
    let result = recall(question, ScoringConfig::default()).await;
    assert_eq!(order_of(&result, &episodes), by_score, "{result:#?}");
    assert!(result.hits.iter().all(|h| h.breakdown.updates().is_none()));
    // It is the thread that keeps them in place: if no third hit counted
    // as close, they would be lifted as versions.
    let apart = recall(
        question,
        ScoringConfig {
            update_isolation: Some(1.5),
            ..ScoringConfig::default()
        },
    )
    .await;
    assert_ne!(order_of(&apart, &episodes), by_score, "{apart:#?}");

    // The same turns as facts, in a tenant of their own: versions, but a
    // later one is lifted above the first telling only if it answers about
    // as well (the two later turns answer "when did she go" far less well).
    let facts_tenant = "facts";
    for (days, text) in thread {
        let m = NewMemory::new(facts_tenant, BANK, Kind::Fact, text)
            .observed_at(t0() - Duration::days(days));
        facts.push(engine.remember(m).await.unwrap().id());
    }
    let facts_recall = |scoring: ScoringConfig| {
        let engine = &engine;
        async move {
            let recall = engine.recall(facts_tenant, question).read([BANK]);
            recall.scoring(scoring).execute().await.unwrap()
        }
    };
    let result = facts_recall(ScoringConfig::default()).await;
    assert!(
        result.hits.iter().any(|h| h.breakdown.updates().is_some()),
        "{result:#?}"
    );
    assert_eq!(result.hits[0].memory.id, facts[0], "{result:#?}");
    let any_share = facts_recall(ScoringConfig {
        update_relevance_share: None,
        ..ScoringConfig::default()
    })
    .await;
    assert_eq!(any_share.hits[0].memory.id, facts[2], "{any_share:#?}");
}

/// Facts about neighbouring things cluster (one service, one pattern): a
/// later fact about a neighbour is not taken for an update of the hit that
/// answers, and a later restatement of the answer itself comes first.
#[tokio::test]
async fn a_later_request_is_never_taken_for_an_update() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open_at(dir.path(), Arc::new(FixedClock::new(t0()))).await;
    // One sentence each, so a memory's only vector is the one given: the
    // newer one is evidence (cosine 0.34), similar to the older (0.43) and
    // alone with it among the hits, so it is lifted unless it only asks.
    let older_v = direction(&[(0, 0.5), (1, 0.75f32.sqrt())]);
    let newer_v = direction(&[
        (0, 0.34),
        (1, 0.3),
        (2, (1.0f32 - 0.34 * 0.34 - 0.09).sqrt()),
    ]);
    // Each pair in a tenant of its own: the two older memories are copies.
    let first_two = async |tenant: &str, newer: &str| {
        let write = |days: i64, text: &str, v: &[f32]| {
            NewMemory::new(tenant, BANK, Kind::Episode, text)
                .observed_at(t0() - Duration::days(days))
                .vector(v.to_vec())
        };
        let older = write(
            40,
            "We booked flights to Lisbon for our anniversary.",
            &older_v,
        );
        let older = engine.remember(older).await.unwrap().id();
        let newer = write(10, newer, &newer_v);
        let newer = engine.remember(newer).await.unwrap().id();
        let result = engine
            .recall(tenant, "zebra quokka")
            .read([BANK])
            .query_vector(direction(&[(0, 1.0)]))
            .execute()
            .await
            .unwrap();
        let ids: Vec<Uuid> = result.hits.iter().map(|h| h.memory.id).collect();
        (ids, older, newer)
    };

    let (ids, older, newer) = first_two("stated", "We moved the trip to Melbourne instead.").await;
    assert_eq!(ids, vec![newer, older], "a later statement is lifted");
    let (ids, older, newer) =
        first_two("asked", "What are some cheap date ideas in Melbourne?").await;
    assert_eq!(ids, vec![older, newer], "a later request is not");
}

#[tokio::test]
async fn a_later_neighbouring_fact_is_not_taken_for_an_update() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open_at(dir.path(), Arc::new(FixedClock::new(t0()))).await;
    let write = |days: i64, text: &'static str| {
        let engine = &engine;
        let m =
            NewMemory::new(TENANT, BANK, Kind::Fact, text).observed_at(t0() - Duration::days(days));
        async move { engine.remember(m).await.unwrap() }
    };
    let recall = |scoring: ScoringConfig| {
        let engine = &engine;
        async move {
            engine
                .recall(
                    TENANT,
                    "How many times does Billing retry a failed refund call?",
                )
                .read([BANK])
                .scoring(scoring)
                .execute()
                .await
                .unwrap()
        }
    };
    let answer = write(
        60,
        "Billing retries a failed refund call 8 times before giving up.",
    )
    .await
    .id();
    for (days, text) in [
        (
            30,
            "Billing retries a failed session call 4 times before giving up.",
        ),
        (
            25,
            "Checkout retries a failed refund call 2 times before giving up.",
        ),
        (
            20,
            "AuthService retries a failed refund call 10 times before giving up.",
        ),
    ] {
        assert!(matches!(write(days, text).await, Remembered::Stored { .. }));
    }
    let result = recall(ScoringConfig::default()).await;
    assert_eq!(result.hits[0].memory.id, answer, "{result:#?}");
    assert_eq!(result.hits[0].breakdown.updates(), None);
    // Similarity alone would have taken a neighbour for the newer version.
    let any_share = recall(ScoringConfig {
        update_relevance_share: None,
        ..ScoringConfig::default()
    })
    .await;
    assert_ne!(any_share.hits[0].memory.id, answer, "{any_share:#?}");

    let update = write(
        10,
        "We cut Billing's refund retries: a failed refund call is now tried 5 times.",
    )
    .await;
    assert!(matches!(update, Remembered::Stored { .. }), "{update:?}");
    // The restatement of the answer is first (here its own score puts it there).
    let result = recall(ScoringConfig::default()).await;
    assert_eq!(result.hits[0].memory.id, update.id(), "{result:#?}");
}

#[tokio::test]
async fn a_store_opened_with_a_model_of_another_width_is_refused_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let with = |dim: usize| {
        config(dir.path()).model(ModelSource::Custom(Arc::new(recall::HashEmbedder::new(
            dim,
        ))))
    };
    {
        let engine = Engine::open(with(8)).await.unwrap();
        engine
            .remember(note(Kind::Fact, "The gateway retries twice."))
            .await
            .unwrap();
        engine.close().await.unwrap();
    }
    let refused = Engine::open(with(16))
        .await
        .err()
        .expect("another width is refused");
    assert!(
        matches!(
            &refused,
            Error::Storage(recall_indexer::IndexerError::ModelMismatch {
                store: 8,
                model: 16
            })
        ),
        "{refused}"
    );
    assert!(refused.to_string().contains("another model"), "{refused}");
    let engine = Engine::open(with(8)).await.unwrap();
    assert_eq!(engine.list(TENANT, None).await.unwrap().len(), 1);
}

#[tokio::test]
async fn everything_survives_close_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (kept, forgotten, confirmed);
    {
        let engine = open(dir.path()).await;
        seed_engineering(&engine).await;
        kept = engine
            .remember(note(
                Kind::Pitfall,
                "Timeouts on the billing API are 3 seconds, not 30.",
            ))
            .await
            .unwrap()
            .id();
        forgotten = engine
            .remember(note(
                Kind::Note,
                "The old VPN endpoint is vpn1.example.internal.",
            ))
            .await
            .unwrap()
            .id();
        confirmed = kept;
        engine.forget(TENANT, forgotten).await.unwrap();
        engine.confirm(TENANT, confirmed).await.unwrap();
        // No flush: the log alone must carry these across.
    }
    let engine = open(dir.path()).await;
    assert_eq!(engine.list(TENANT, None).await.unwrap().len(), 16);
    assert!(engine.get(TENANT, forgotten).await.unwrap().forgotten);
    assert_eq!(
        engine.get(TENANT, confirmed).await.unwrap().confirmations,
        1
    );
    let result = engine
        .recall(TENANT, "billing API timeout")
        .read([BANK])
        .execute()
        .await
        .unwrap();
    assert_eq!(result.hits[0].memory.id, kept);
    engine.flush().await.unwrap();
    drop(engine);
    let engine = open(dir.path()).await;
    assert_eq!(engine.status().await.unwrap().memories, 17);
}

/// Helper process for the SIGKILL test: writes memories forever, printing
/// each id once `remember` has returned. Runs only when the parent asks.
#[tokio::test]
#[ignore = "helper process for acknowledged_writes_survive_sigkill"]
async fn crash_writer_child() {
    let Ok(dir) = std::env::var("RECALL_CRASH_DIR") else {
        return;
    };
    let engine = open(std::path::Path::new(&dir)).await;
    for i in 0.. {
        // One bank per memory: near-identical texts must not deduplicate here.
        let outcome = engine
            .remember(NewMemory::new(
                TENANT,
                format!("bank:{i}"),
                Kind::Note,
                format!("Crash test memory number {i}"),
            ))
            .await
            .unwrap();
        assert!(matches!(outcome, Remembered::Stored { .. }));
        println!("ACK {}", outcome.id());
    }
}

/// Runs the ignored helper test `child` in a child process with `dir` in
/// `RECALL_CRASH_DIR`, collects what it prints as `ACK <what>` once each
/// operation was acknowledged, and SIGKILLs it after `n` of them.
fn run_and_kill_lines(child: &str, dir: &std::path::Path, n: usize) -> Vec<String> {
    run_and_kill_begun(child, dir, n).acked
}

/// What a killed child printed: `ACK <what>` lines (acknowledged) and
/// `BEGIN <what>` lines (started, maybe done, never acknowledged).
struct Printed {
    acked: Vec<String>,
    begun: Vec<String>,
}

/// How long a child may go without printing before the test gives up on
/// it (a hung child must fail the test, not hang CI).
const CHILD_SILENCE: std::time::Duration = std::time::Duration::from_secs(120);

/// [`run_and_kill_lines`], also keeping the `BEGIN` lines. The child's
/// output is read on a thread, so a silent child fails after
/// [`CHILD_SILENCE`] instead of blocking forever.
fn run_and_kill_begun(child: &str, dir: &std::path::Path, n: usize) -> Printed {
    let mut process = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            child,
            "--nocapture",
            "--test-threads=1",
        ])
        .env("RECALL_CRASH_DIR", dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = process.stdout.take().unwrap();
    let (lines, received) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let mut printed = Printed {
        acked: Vec::new(),
        begun: Vec::new(),
    };
    while printed.acked.len() < n {
        match received.recv_timeout(CHILD_SILENCE) {
            Ok(line) => {
                if let Some(what) = line.strip_prefix("ACK ") {
                    printed.acked.push(what.trim().to_string());
                } else if let Some(what) = line.strip_prefix("BEGIN ") {
                    printed.begun.push(what.trim().to_string());
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                let _ = process.kill();
                panic!("the child printed nothing for {CHILD_SILENCE:?}");
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let _ = process.kill(); // SIGKILL on Unix
    process.wait().unwrap();
    // Drain what the child wrote before it died, so the reader ends.
    drop(received);
    reader.join().unwrap();
    assert_eq!(
        printed.acked.len(),
        n,
        "the child died before {n} acknowledged operations"
    );
    printed
}

/// [`run_and_kill_lines`] for children that acknowledge with `ACK <id>`.
fn run_and_kill(child: &str, dir: &std::path::Path, n: usize) -> Vec<Uuid> {
    run_and_kill_lines(child, dir, n)
        .iter()
        .map(|id| Uuid::parse_str(id).unwrap())
        .collect()
}

#[tokio::test]
async fn acknowledged_writes_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let acked = run_and_kill("crash_writer_child", dir.path(), 40);

    let engine = open(dir.path()).await;
    for id in &acked {
        engine.get(TENANT, *id).await.unwrap();
    }
    assert_eq!(
        engine.status().await.unwrap().memories,
        engine.list(TENANT, None).await.unwrap().len()
    );
    let last = engine.get(TENANT, *acked.last().unwrap()).await.unwrap();
    let result = engine
        .recall(TENANT, &last.content)
        .read([last.bank.clone()])
        .limit(1)
        .execute()
        .await
        .unwrap();
    assert_eq!(
        result.hits[0].memory.id, last.id,
        "the last acknowledged write is searchable"
    );
}

#[tokio::test]
async fn tenants_never_see_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path()).await;
    let a = engine
        .remember(NewMemory::new(
            "tenant-a",
            "org",
            Kind::Fact,
            "Project Falcon launches on May 4.",
        ))
        .await
        .unwrap()
        .id();
    engine
        .remember(NewMemory::new(
            "tenant-b",
            "org",
            Kind::Fact,
            "Project Heron launches in June.",
        ))
        .await
        .unwrap();
    let from_b = engine
        .recall("tenant-b", "When does Project Falcon launch?")
        .read(["org"])
        .execute()
        .await
        .unwrap();
    assert!(
        from_b.hits.iter().all(|h| h.memory.tenant == "tenant-b"),
        "{from_b:#?}"
    );
    assert!(matches!(
        engine.get("tenant-b", a).await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        engine.history("tenant-b", a).await,
        Err(Error::NotFound { .. })
    ));
    assert!(
        engine
            .list("tenant-b", None)
            .await
            .unwrap()
            .iter()
            .all(|m| m.id != a)
    );
    assert!(
        engine
            .export("tenant-b")
            .await
            .unwrap()
            .iter()
            .all(|m| m.id != a && m.tenant == "tenant-b")
    );
    assert!(matches!(
        engine.forget("tenant-b", a).await,
        Err(Error::NotFound { .. })
    ));
    assert!(!engine.get("tenant-a", a).await.unwrap().forgotten);
}

#[tokio::test]
async fn bad_input_is_a_typed_error_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path()).await;
    let ok = || note(Kind::Note, "A perfectly fine memory.");
    let two_sentences = || note(Kind::Note, "Deploys run at noon. Freezes start Friday.");
    type Expect = fn(&Error) -> bool;
    let cases: Vec<(NewMemory, Expect)> = vec![
        (note(Kind::Note, "   "), |e| {
            matches!(
                e,
                Error::InvalidInput {
                    field: "content",
                    ..
                }
            )
        }),
        (note(Kind::Note, &"x".repeat(17 * 1024)), |e| {
            matches!(e, Error::ContentTooLong { .. })
        }),
        (
            NewMemory {
                tenant: "../x".into(),
                ..ok()
            },
            |e| {
                matches!(
                    e,
                    Error::InvalidInput {
                        field: "tenant",
                        ..
                    }
                )
            },
        ),
        (
            NewMemory {
                bank: "".into(),
                ..ok()
            },
            |e| matches!(e, Error::InvalidInput { field: "bank", .. }),
        ),
        (ok().source(recall::Source::Inferred, 1.5), |e| {
            matches!(
                e,
                Error::InvalidInput {
                    field: "confidence",
                    ..
                }
            )
        }),
        (ok().vector(vec![f32::NAN; 384]), |e| {
            matches!(
                e,
                Error::InvalidInput {
                    field: "vector",
                    ..
                }
            )
        }),
        (ok().vector(vec![0.1; 12]), |e| {
            matches!(
                e,
                Error::InvalidInput {
                    field: "vector",
                    ..
                }
            )
        }),
        (ok().supersedes("no such title"), |e| {
            matches!(e, Error::NotFound { .. })
        }),
        // Sentence vectors: without the whole vector, a count other than
        // the content's sentences, a wrong width.
        (
            two_sentences().sentence_vectors(vec![vec![0.1; 384]; 2]),
            |e| matches!(e, Error::InvalidInput { field: "sentence_vectors", reason } if reason.contains("without")),
        ),
        (
            two_sentences()
                .vector(vec![0.1; 384])
                .sentence_vectors(vec![vec![0.1; 384]; 3]),
            |e| matches!(e, Error::InvalidInput { field: "sentence_vectors", reason } if reason.contains("3 given") && reason.contains("into 2")),
        ),
        (
            ok().vector(vec![0.1; 384])
                .sentence_vectors(vec![vec![0.1; 384]]),
            |e| matches!(e, Error::InvalidInput { field: "sentence_vectors", reason } if reason.contains("into 0")),
        ),
        (
            two_sentences()
                .vector(vec![0.1; 384])
                .sentence_vectors(vec![vec![0.1; 384], vec![0.1; 12]]),
            |e| {
                matches!(
                    e,
                    Error::InvalidInput {
                        field: "sentence_vectors",
                        ..
                    }
                )
            },
        ),
    ];
    for (input, expected) in cases {
        let err = engine.remember(input.clone()).await.unwrap_err();
        assert!(expected(&err), "{input:?} gave {err:?}");
        // A bad item fails its whole batch.
        let err = engine.remember_many(vec![ok(), input]).await.unwrap_err();
        assert!(expected(&err), "{err:?}");
    }
    let unknown: Result<Kind, _> = "opinion".parse();
    assert!(matches!(unknown, Err(Error::UnknownKind(k)) if k == "opinion"));
    let status = engine.status().await.unwrap();
    assert_eq!((status.memories, status.pending_in_log), (0, 0));
    drop(engine);
    let engine = open(dir.path()).await;
    assert_eq!(engine.status().await.unwrap().memories, 0);
}

/// The contents of a tenant's memories, sorted.
async fn contents(engine: &Engine) -> Vec<String> {
    let mut all: Vec<String> = engine
        .list(TENANT, None)
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.content)
        .collect();
    all.sort();
    all
}

#[tokio::test]
async fn an_import_writes_in_calls_that_see_the_calls_before_them() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path()).await;
    let texts = [
        "Deploys go out at noon on weekdays.",
        "The session cache keeps entries for 30 seconds.",
        // Call 2 repeats call 1's first memory, call 3 its second.
        "Deploys go out at noon on weekdays.",
        "Error E4012 means the upstream token expired.",
        "Use rustls rather than openssl in new services.",
        "The session cache keeps entries for 30 seconds.",
        "Integration tests need the docker daemon running.",
    ];
    let mut calls: Vec<Vec<Remembered>> = Vec::new();
    engine
        .import(texts.iter().map(|t| note(Kind::Note, t)), 2, |outcomes| {
            calls.push(outcomes.to_vec())
        })
        .await
        .unwrap();
    assert_eq!(calls.iter().map(Vec::len).collect::<Vec<_>>(), [2, 2, 2, 1]);
    let flat: Vec<Remembered> = calls.into_iter().flatten().collect();
    assert!(matches!(&flat[2], Remembered::Deduplicated { id, .. } if *id == flat[0].id()));
    assert!(matches!(&flat[5], Remembered::Deduplicated { id, .. } if *id == flat[1].id()));
    let mut distinct: Vec<String> = texts.iter().map(|t| t.to_string()).collect();
    distinct.sort();
    distinct.dedup();
    assert_eq!(contents(&engine).await, distinct);

    let err = engine
        .import(vec![note(Kind::Note, "Never written.")], 0, |_| {})
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::InvalidInput { field: "batch", .. }),
        "{err:?}"
    );
    assert_eq!(contents(&engine).await, distinct);
}

#[tokio::test]
async fn an_import_stops_at_a_bad_call_and_keeps_the_calls_before_it() {
    // A bad item found while the call before it is applied (empty content),
    // and one found only under the write lock (an unknown supersedes key).
    let bad = [
        note(Kind::Note, "   "),
        note(Kind::Note, "Replaces nothing.").supersedes("no such title"),
    ];
    for bad in bad {
        let dir = tempfile::tempdir().unwrap();
        let engine = open(dir.path()).await;
        let items = vec![
            note(Kind::Note, "Deploys go out at noon on weekdays."),
            note(Kind::Note, "Error E4012 means the upstream token expired."),
            note(
                Kind::Note,
                "Use rustls rather than openssl in new services.",
            ),
            bad,
            note(
                Kind::Note,
                "Integration tests need the docker daemon running.",
            ),
        ];
        let mut seen = Vec::new();
        let err = engine
            .import(items, 2, |outcomes| seen.push(outcomes.len()))
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::InvalidInput { .. } | Error::NotFound { .. }),
            "{err:?}"
        );
        assert_eq!(seen, [2], "only the first call was committed");
        let written = [
            "Deploys go out at noon on weekdays.",
            "Error E4012 means the upstream token expired.",
        ];
        assert_eq!(contents(&engine).await, written);
        drop(engine);
        let engine = open(dir.path()).await;
        assert_eq!(contents(&engine).await, written, "after reopening");
    }
}

/// A unit vector from a seed (splitmix64 draws, centred).
fn seeded_unit(seed: u64, dim: usize) -> Vec<f32> {
    let mut state = seed;
    let v: Vec<f32> = (0..dim)
        .map(|_| {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            ((z ^ (z >> 31)) >> 11) as f32 / (1u64 << 53) as f32 - 0.5
        })
        .collect();
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.into_iter().map(|x| x / norm).collect()
}

/// `v` moved towards noise by `by`, renormalized.
fn nudged(v: &[f32], seed: u64, by: f32) -> Vec<f32> {
    let noise = seeded_unit(seed, v.len());
    let w: Vec<f32> = v.iter().zip(&noise).map(|(a, b)| a + by * b).collect();
    let norm = w.iter().map(|x| x * x).sum::<f32>().sqrt();
    w.into_iter().map(|x| x / norm).collect()
}

/// Each outcome with ids replaced by the index of the item that stored
/// them: comparable across engines.
fn by_item(outcomes: &[Remembered]) -> Vec<(Option<usize>, Vec<usize>)> {
    let mut stored_by = std::collections::HashMap::new();
    for (i, o) in outcomes.iter().enumerate() {
        if let Remembered::Stored { id, .. } | Remembered::Proposed { id, .. } = o {
            stored_by.insert(*id, i);
        }
    }
    outcomes
        .iter()
        .map(|o| match o {
            Remembered::Stored { similar_to, .. } | Remembered::Proposed { similar_to, .. } => {
                let mut near: Vec<usize> = similar_to.iter().map(|s| stored_by[&s.id]).collect();
                near.sort_unstable();
                (None, near)
            }
            Remembered::Deduplicated { id, .. } => (Some(stored_by[id]), Vec::new()),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_into_a_partitioned_tenant_decides_as_single_calls_do() {
    // Past 16,384 rows a tenant's vectors are partitioned and the write
    // path probes a few lists for near copies; an import prepares each call
    // while the call before is applied. Its decisions must be those of
    // `remember_many` with the same calls: near copies across calls and
    // within one, and memories in the similar band.
    const DIM: usize = 384;
    const CALL: usize = 2_500;
    let centres: Vec<Vec<f32>> = (0..300).map(|c| seeded_unit(c, DIM)).collect();
    let mut vectors: Vec<Vec<f32>> = Vec::new();
    for i in 0..26_000u64 {
        let at = vectors.len();
        let v = match (at >= 17_500, i % 3) {
            // Before the tenant is partitioned, and a third after: new
            // memories around 300 topics.
            (false, _) | (true, 0) => nudged(&centres[(i % 300) as usize], 1_000 + i, 0.7),
            // Near copies (cosine ≈ .995) of an earlier memory, some in
            // the same call.
            (true, 1) => nudged(&vectors[(at * 7919) % at.min(at - at % CALL + 40)], i, 0.1),
            // In the similar band (≈ .89).
            _ => nudged(&vectors[(at * 104_729) % at], i, 0.5),
        };
        vectors.push(v);
    }
    let items = || {
        vectors
            .iter()
            .enumerate()
            .map(|(i, v)| note(Kind::Fact, &format!("memory {i}")).vector(v.clone()))
    };
    let config = |dir: &std::path::Path| {
        config(dir).model(ModelSource::Custom(Arc::new(recall::HashEmbedder::new(
            DIM,
        ))))
    };

    let dir = tempfile::tempdir().unwrap();
    let importer = Engine::open(config(dir.path())).await.unwrap();
    let mut imported = Vec::new();
    importer
        .import(items(), CALL, |o| imported.extend_from_slice(o))
        .await
        .unwrap();

    let dir = tempfile::tempdir().unwrap();
    let single = Engine::open(config(dir.path())).await.unwrap();
    let mut called = Vec::new();
    let all: Vec<NewMemory> = items().collect();
    for call in all.chunks(CALL) {
        called.extend(single.remember_many(call.to_vec()).await.unwrap());
    }

    let (imported, called) = (by_item(&imported), by_item(&called));
    let deduplicated = imported.iter().filter(|(d, _)| d.is_some()).count();
    let similar = imported.iter().filter(|(_, s)| !s.is_empty()).count();
    assert!(deduplicated > 1_000, "near copies found ({deduplicated})");
    assert!(similar > 1_000, "similar memories found ({similar})");
    let differ = (0..imported.len()).find(|&i| imported[i] != called[i]);
    assert_eq!(
        differ,
        None,
        "{:?}",
        differ.map(|i| (&imported[i], &called[i]))
    );
}

#[tokio::test]
async fn without_a_model_the_engine_serves_lexical_recall() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(config(dir.path()).model(ModelSource::None))
        .await
        .unwrap();
    let id = engine
        .remember(note(
            Kind::Pitfall,
            "The nightly invoice export times out on the 31st.",
        ))
        .await
        .unwrap()
        .id();
    let again = engine
        .remember(note(
            Kind::Pitfall,
            "the nightly invoice export  times out on the 31st",
        ))
        .await
        .unwrap();
    assert_eq!(again, Remembered::Deduplicated { id, cosine: 1.0 });
    let result = engine
        .recall(TENANT, "invoice export timeout")
        .read([BANK])
        .execute()
        .await
        .unwrap();
    assert_eq!(result.hits[0].memory.id, id);
    assert_eq!(result.hits[0].breakdown.cosine(), None);
    assert!(!result.hits[0].memory.has_vector);
}

/// The write path's bands turn exactly at `dedup_threshold` (0.94) and
/// `similar_threshold` (0.82), pinned here as documented, measured on the
/// caller's own vectors so the cosines are exact.
#[tokio::test]
async fn near_copy_and_similar_bands_turn_at_the_documented_cosines() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path()).await;
    let write = engine.config().write.clone();
    assert_eq!(
        (write.dedup_threshold, write.similar_threshold),
        (0.94, 0.82)
    );
    let base = direction(&[(0, 1.0)]);
    for (cosine, expect) in [
        (0.941, "dedup"),
        (0.939, "similar"),
        (0.821, "similar"),
        (0.819, "apart"),
    ] {
        // One bank per case: each new memory meets only its own base.
        let bank = format!("band:{cosine}");
        let first = engine
            .remember(
                NewMemory::new(TENANT, &bank, Kind::Note, format!("Base memory {cosine}"))
                    .vector(base.clone()),
            )
            .await
            .unwrap()
            .id();
        let other = direction(&[(0, cosine), (1, (1.0 - cosine * cosine).sqrt())]);
        let outcome = engine
            .remember(
                NewMemory::new(TENANT, &bank, Kind::Note, format!("Second memory {cosine}"))
                    .vector(other),
            )
            .await
            .unwrap();
        match (expect, &outcome) {
            ("dedup", Remembered::Deduplicated { id, .. }) => assert_eq!(*id, first),
            ("similar", Remembered::Stored { similar_to, .. }) => {
                assert_eq!(similar_to.iter().map(|s| s.id).collect::<Vec<_>>(), [first]);
                assert!((similar_to[0].cosine - cosine).abs() < 1e-4);
            }
            ("apart", Remembered::Stored { similar_to, .. }) => {
                assert!(similar_to.is_empty(), "{outcome:?}")
            }
            _ => panic!("cosine {cosine}: expected {expect}, got {outcome:?}"),
        }
    }
}

/// One writer per data directory: a second engine gets `Locked` (after
/// waiting out the lock's grace period) and writes nothing; once the first
/// is dropped, it opens and sees the first one's writes.
#[tokio::test]
async fn a_second_engine_on_one_directory_is_locked_out_until_the_first_closes() {
    let dir = tempfile::tempdir().unwrap();
    let first = open(dir.path()).await;
    let id = first
        .remember(note(Kind::Fact, "The build cache lives in /var/cache/ci."))
        .await
        .unwrap()
        .id();
    let second = Engine::open(config(dir.path()).model(model())).await;
    assert!(
        matches!(
            second,
            Err(Error::Storage(recall::IndexerError::Locked { .. }))
        ),
        "{:?}",
        second.err()
    );
    drop(first);
    let reopened = open(dir.path()).await;
    assert_eq!(reopened.list(TENANT, None).await.unwrap().len(), 1);
    assert!(reopened.get(TENANT, id).await.is_ok());
}
