//! The default consolidation pass on a small corpus with known groups (the
//! `recall-bench consolidation` run, 6 groups): its proposals match the
//! groups (precision >= .95, recall >= .80), a second pass proposes
//! nothing, recall is not lower afterwards and the briefing shows a folded
//! pitfall and an accepted update once.

use recall_bench::consolidation_eval::{ConsolidationArgs, consolidation};

#[tokio::test(flavor = "multi_thread")]
async fn the_default_pass_matches_the_known_groups() {
    let dir = tempfile::tempdir().unwrap();
    let args = ConsolidationArgs {
        groups: 6,
        unrelated: 300,
        seed: 3,
        json: dir.path().join("consolidation.json"),
    };
    let r = consolidation(&args).await.unwrap();
    assert!(r.precision >= 0.95 && r.recall >= 0.80, "{r:#?}");
    assert_eq!(
        (r.touched_others, r.second_pass_proposals),
        (0, 0),
        "{r:#?}"
    );
    for query in ["lesson", "copies", "update"] {
        let (before, after) = (r.before[query], r.after[query]);
        assert!(
            after.recall_any_at_10 >= before.recall_any_at_10,
            "{query}: {r:#?}"
        );
    }
    assert_eq!(r.after["copies"].group_lines_in_briefing, 1.0, "{r:#?}");
    assert_eq!(r.after["update"].group_lines_in_briefing, 1.0, "{r:#?}");
    // What the cue list misses is counted, not hidden.
    assert_eq!(r.uncued_expected, 12);
}
