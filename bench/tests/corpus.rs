//! `recall-bench corpus` end to end: the write path's outcomes on a corpus
//! whose near copies sit at known cosines (synthetic vectors), and the
//! invariants of a model run (isolation, VERIFY on drifted answers).

use std::path::Path;

use recall_bench::corpus_eval::{CorpusArgs, VectorMode, corpus_command};
use serde_json::Value;

fn args(dir: &Path, vectors: VectorMode, facts: usize, queries: usize) -> CorpusArgs {
    CorpusArgs {
        facts,
        tenants: 3,
        queries,
        tasks: 12,
        relearned_per_drift: 2,
        seed: 5,
        repeat_share: 0.2,
        paraphrase_share: 0.2,
        update_share: 0.2,
        drift_share: 0.3,
        vectors,
        ks: vec![1, 5, 10],
        json: dir.join("corpus.json"),
        model_dir: None,
        cache: Some(dir.join("vectors")),
        quiet: true,
        ablations: false,
    }
}

async fn run(args: &CorpusArgs) -> Value {
    corpus_command(args).await.unwrap();
    serde_json::from_slice(&std::fs::read(&args.json).unwrap()).unwrap()
}

#[track_caller]
fn exactly(value: &Value, expected: f64) {
    assert_eq!(value.as_f64(), Some(expected), "{value}");
}

/// With synthetic vectors a repeat has its original's vector, a paraphrase
/// one at cosine 0.95–0.99 (the dedup band) and an update one at 0.84–0.92
/// (the similar band): the write path must sort every one of them right.
#[tokio::test]
async fn near_copies_at_known_cosines_are_deduplicated_or_flagged_as_the_bands_say() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(&args(dir.path(), VectorMode::Synthetic, 600, 60)).await;
    let w = &out["write_path"];
    exactly(&w["repeats_deduplicated"], 1.0);
    exactly(&w["paraphrases_deduplicated"], 1.0);
    exactly(&w["paraphrases_flagged_similar"], 0.0);
    exactly(&w["updates_stored_apart"], 1.0);
    exactly(&w["updates_flagged_similar"], 1.0);
    exactly(&w["facts_merged"], 0.0);
    exactly(&w["cross_tenant_merges"], 0.0);
    exactly(&out["foreign_hits"], 0.0);
    // The markdown summary and the per-question traces are written beside it.
    assert!(dir.path().join("corpus.md").exists());
    let traces = std::fs::read_to_string(dir.path().join("corpus.questions.jsonl")).unwrap();
    // One line per ranker and question: 60 questions, 12 task questions,
    // and those about facts re-learned after a drift.
    let ids: std::collections::BTreeSet<String> = traces
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["id"].to_string())
        .collect();
    assert!(ids.len() > 60 + 12, "{} questions", ids.len());
    assert_eq!(traces.lines().count(), 3 * ids.len());
}

/// A small model run: exact repeats are deduplicated, no tenant sees
/// another's memories, drifted answers carry VERIFY, and every group of
/// questions is scored.
#[tokio::test]
async fn a_model_run_keeps_tenants_apart_and_flags_drifted_answers() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(&args(dir.path(), VectorMode::Model, 240, 60)).await;
    exactly(&out["write_path"]["repeats_deduplicated"], 1.0);
    exactly(&out["write_path"]["cross_tenant_merges"], 0.0);
    exactly(&out["foreign_hits"], 0.0);
    exactly(&out["drift_flagged"], 1.0);
    for group in [
        "plain",
        "repeated",
        "paraphrased",
        "updated",
        "drifted",
        "task",
        "relearned",
    ] {
        let n = out["groups"][group]["n"].as_u64().unwrap_or(0);
        assert!(n > 0, "no {group} questions: {}", out["groups"]);
    }
    let accuracy = out["overall"]["abstention_accuracy"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&accuracy));
    assert!(out["overall"]["ku_newest_first"].as_f64().is_some());
}
