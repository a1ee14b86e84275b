//! Newer versions first.
//!
//! People restate facts as they change: "our rent is $1,800 a month" in March,
//! "the landlord raised our rent, it's $1,950 now" in May. Both answer "how
//! much is our rent?", and nothing in §4's score says which one is current:
//! a few weeks apart, decay hardly separates them, and the older one is as
//! likely to have the higher cosine to the question. A writer who knows can
//! say so with `supersedes` (§3.6). When nobody did, recall treats a memory
//! confirmed later than a hit above it, whose part that answers the query
//! says much the same as that hit's, as a likely update, and lifts it to
//! rank just above that hit, if it is evidence for the query on its own
//! (the abstention gate's cosine, so a loosely related newer turn is not
//! lifted above the answer). The older memory is not hidden or demoted; it
//! moves one place down, and the lifted hit's breakdown names it (`update`,
//! `updates`).
//!
//! Which pairs count as versions depends on what the memories are:
//! - Two memories that state something (a fact, preference or convention by
//!   default, [`crate::ScoringConfig::update_kinds`]) are versions when they
//!   are that similar and the newer one answers the query about as well as
//!   the older ([`crate::ScoringConfig::update_relevance_share`]), so a
//!   chain of three rents ends newest first. Similarity alone is not
//!   enough: agents write many facts about one service or person from a few
//!   patterns, and a later fact about a neighbouring thing ("… a failed
//!   session call 4 times" below "… a failed refund call 8 times") was
//!   lifted above the answer; on a generated agent corpus (`recall-bench
//!   corpus`) nDCG@10 fell from .64–.68 without the lift to .52–.54. A
//!   pair that stands apart (below) is lifted without the relevance test.
//! - Any other pair (episodes, notes, outcomes) only when it *stands apart*:
//!   no other hit among the top k is close
//!   ([`crate::ScoringConfig::update_isolation`]) to either of the two. A
//!   conversation that keeps coming back to a topic leaves a thread of
//!   similar turns, which are different events ("when did she go to the
//!   support group?" asks about the first one); one statement restated
//!   once, with nothing else like it among the hits, is an update. Lifting
//!   every later similar turn cost LoCoMo nDCG@10 .578 → .346; with the
//!   pair standing apart, LoCoMo does not move and the generated
//!   knowledge-update probes (turns written as episodes) go from .25–.33 to
//!   1.0 newest-first (numbers at `update_isolation`).
//!
//! Only two memories of one kind, neither of which links to the other
//! (`same_thing` in [`crate::rank`]), can be versions: a convention `large
//! tokens go in the body; see [[JWT size]]` and the fact "our JWTs reach
//! 12 KB" written after it share a topic, but one is not an update of the
//! other, and the fact was lifted above the convention that answers "where
//! should large tokens be sent?" (relevance .200 above .558) when the two
//! were alone in a store (a pair of two always stands apart).
//!
//! Similar means the cosine of the two memories' vectors closest to the
//! query: each memory's whole vector or one of its sentences'
//! ([`crate::sentences`]), whichever answers the query, so the restated
//! value is compared and not the small talk around it ("Big news, I left
//! my old job and joined Stripe this week. Can you suggest …").
//!
//! A memory that only asks ([`crate::is_question`]: "What are some cheap
//! date ideas in Melbourne?") is never a newer version: it restates no
//! value. In conversation, requests made after the evidence were lifted
//! above it one after another, each "standing apart" among a few hits. On
//! eight generated probe sets (seeds 7–31) nDCG@10 went from .869–.901 to
//! .874–.914 (mean .889 → .900; the vector alone .883–.918), recall,
//! abstention and knowledge-update newest-first unchanged; LoCoMo (.805 /
//! .578) and the agent-memory corpus (.880 / .716) unchanged.
//!
//! The rule reorders the top `k` hits and never changes which memories are
//! returned: both memories of a pair must be among them. Lifting newer
//! versions from anywhere in the candidates was measured first and rejected:
//! in a long conversation nearly every hit has later, similar turns, and
//! LoCoMo's recall_any@10 fell from .637 to .28. Memories written at the
//! same time (one conversation turn, one batch) are never reordered.
//!
//! This is an addition to the spec. The cut-offs
//! ([`crate::ScoringConfig::update_similarity`],
//! [`crate::ScoringConfig::update_isolation`],
//! [`crate::ScoringConfig::update_relevance_share`]) were set with
//! `recall-bench sweep` and `recall-bench corpus`; see those fields for the
//! numbers.

use uuid::Uuid;

use crate::score::Breakdown;

/// Whether a newer memory may be lifted above an older hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Versions {
    /// Never (the newer one is not newer, or the rule is off for the pair).
    Never,
    /// When the two are similar enough and the newer answers the query
    /// about as well as the older (or they stand apart): both state
    /// something.
    WhenSimilar,
    /// Only when, similar enough, the two also stand apart from the other
    /// top hits.
    WhenApart,
}

/// The cut-offs of [`lift_newer_versions`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cutoffs {
    /// Least similarity of a newer version to the hit it updates.
    pub(crate) similarity: f32,
    /// Least cosine of a newer version to the query: only a memory that is
    /// evidence for the query on its own is lifted as its answer.
    pub(crate) evidence: f32,
    /// Similarity to a third top hit at which a [`Versions::WhenApart`]
    /// pair no longer stands apart; `None`: such pairs are never lifted.
    pub(crate) isolation: Option<f32>,
    /// Least relevance of the newer memory of a [`Versions::WhenSimilar`]
    /// pair, as a share of the older hit's, unless the pair stands apart;
    /// `None`: any.
    pub(crate) relevance_share: Option<f32>,
}

/// Within the first `k` of `scored` (best first), lifts every hit that may
/// update a hit above it to the place just above that hit.
/// `versions(a, b)`: whether and how memory `a` may be a newer version of
/// memory `b` (anything but [`Versions::Never`] must imply that `a` was
/// confirmed after `b`); `similarity(a, b)`: the cosine the cut-offs are
/// compared with, if both have vectors.
///
/// A lifted memory is checked in turn for a newer version of itself, so a
/// chain of updates ends with the newest first. Since every lift puts a
/// strictly newer memory at that place, the loop ends.
pub(crate) fn lift_newer_versions<V, S, I>(
    scored: &mut [(usize, Breakdown)],
    k: usize,
    cutoffs: Cutoffs,
    versions: V,
    similarity: S,
    id: I,
) where
    V: Fn(usize, usize) -> Versions,
    S: Fn(usize, usize) -> Option<f32>,
    I: Fn(usize) -> Uuid,
{
    let top = k.min(scored.len());
    let close = |a: usize, b: usize, cut: f32| similarity(a, b).is_some_and(|s| s >= cut);
    let mut lifted_any = false;
    let mut at = 0;
    while at < top {
        let older = scored[at].0;
        let update = (at + 1..top).find(|&j| {
            let newer = scored[j].0;
            let stands_apart = || {
                cutoffs.isolation.is_some_and(|isolation| {
                    scored[..top].iter().all(|&(other, _)| {
                        other == newer
                            || other == older
                            || !(close(other, newer, isolation) || close(other, older, isolation))
                    })
                })
            };
            let answers_as_well = || {
                cutoffs
                    .relevance_share
                    .is_none_or(|share| scored[j].1.rel >= share * scored[at].1.rel)
            };
            let pair = versions(newer, older);
            pair != Versions::Never
                && scored[j].1.cosine.is_some_and(|c| c >= cutoffs.evidence)
                && close(newer, older, cutoffs.similarity)
                && match pair {
                    Versions::WhenSimilar => answers_as_well() || stands_apart(),
                    Versions::WhenApart => stands_apart(),
                    Versions::Never => false,
                }
        });
        let Some(j) = update else {
            at += 1;
            continue;
        };
        let lifted = scored[at].1.score.next_up();
        scored[at..=j].rotate_right(1);
        let breakdown = &mut scored[at].1;
        if breakdown.score > 0.0 {
            breakdown.update *= lifted / breakdown.score;
        }
        breakdown.score = lifted;
        breakdown.updates = Some(id(older));
        lifted_any = true;
    }
    if lifted_any {
        keep_scores_falling(&mut scored[..top]);
    }
}

/// Raises scores from the bottom up until each is above the one after it.
/// Two memories lifted above one hit get the same score, and so may a lift
/// and a hit tied with the older one; the hits are sorted by score again
/// once linked memories join them, and a tie would undo the order.
fn keep_scores_falling(scored: &mut [(usize, Breakdown)]) {
    for i in (0..scored.len().saturating_sub(1)).rev() {
        let below = scored[i + 1].1.score;
        let breakdown = &mut scored[i].1;
        if breakdown.score <= below {
            let raised = below.next_up();
            if breakdown.score > 0.0 {
                breakdown.update *= raised / breakdown.score;
            }
            breakdown.score = raised;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Memories 0..n, written at `times[i]`, with a similarity matrix;
    /// the memories in `apart` are of a kind whose versions must stand apart.
    fn lift_with(
        scores: &[f32],
        times: &[i64],
        sims: &[&[f32]],
        k: usize,
        apart: &[usize],
        isolation: Option<f32>,
        relevance_share: Option<f32>,
    ) -> Vec<(usize, Breakdown)> {
        let mut scored: Vec<(usize, Breakdown)> = scores
            .iter()
            .enumerate()
            .map(|(i, s)| (i, Breakdown::with_relevance(*s)))
            .collect();
        lift_newer_versions(
            &mut scored,
            k,
            Cutoffs {
                similarity: 0.5,
                evidence: 0.25,
                isolation,
                relevance_share,
            },
            |a, b| match times[a] > times[b] {
                false => Versions::Never,
                true if apart.contains(&a) || apart.contains(&b) => Versions::WhenApart,
                true => Versions::WhenSimilar,
            },
            |a, b| Some(sims[a][b]),
            |i| Uuid::from_u128(i as u128),
        );
        scored
    }

    fn lift(scores: &[f32], times: &[i64], sims: &[&[f32]], k: usize) -> Vec<(usize, Breakdown)> {
        lift_with(scores, times, sims, k, &[], None, None)
    }

    fn order(scored: &[(usize, Breakdown)]) -> Vec<usize> {
        scored.iter().map(|(i, _)| *i).collect()
    }

    #[test]
    fn a_newer_similar_memory_ranks_just_above_the_older_hit() {
        // 0: old value (best), 1: unrelated, 2: the update (similar to 0, newer).
        let sims: [&[f32]; 3] = [&[1.0, 0.1, 0.7], &[0.1, 1.0, 0.1], &[0.7, 0.1, 1.0]];
        let scored = lift(&[0.9, 0.8, 0.6], &[10, 10, 20], &sims, 10);
        assert_eq!(order(&scored), vec![2, 0, 1]);
        let (_, lifted) = &scored[0];
        assert!(lifted.score > 0.9);
        assert_eq!(lifted.updates, Some(Uuid::from_u128(0)));
        assert!((lifted.update - lifted.score / 0.6).abs() < 1e-6);
        assert_eq!(
            scored[1].1,
            Breakdown::with_relevance(0.9),
            "the older hit keeps its score"
        );
    }

    #[test]
    fn dissimilar_older_or_simultaneous_memories_stay_in_place() {
        // 1 is newer but not similar; 2 is similar but older; 3 is similar
        // and written at the same time.
        let sims: [&[f32]; 4] = [
            &[1.0, 0.2, 0.8, 0.9],
            &[0.2, 1.0, 0.1, 0.1],
            &[0.8, 0.1, 1.0, 0.1],
            &[0.9, 0.1, 0.1, 1.0],
        ];
        let scored = lift(&[0.9, 0.8, 0.7, 0.6], &[10, 20, 5, 10], &sims, 10);
        assert_eq!(order(&scored), vec![0, 1, 2, 3]);
        assert!(scored.iter().all(|(_, b)| b.updates.is_none()));
    }

    #[test]
    fn a_chain_of_updates_ends_newest_first_and_the_returned_set_stays() {
        // 0 → 1 → 2 are versions of one fact (2 newest); 4 is a newer
        // version of 0 too, but outside the top 3, so it stays out.
        let sims: [&[f32]; 5] = [
            &[1.0, 0.6, 0.3, 0.0, 0.9],
            &[0.6, 1.0, 0.6, 0.0, 0.0],
            &[0.3, 0.6, 1.0, 0.0, 0.0],
            &[0.0, 0.0, 0.0, 1.0, 0.0],
            &[0.9, 0.0, 0.0, 0.0, 1.0],
        ];
        let scored = lift(&[0.9, 0.5, 0.4, 0.3, 0.2], &[1, 2, 3, 1, 5], &sims, 3);
        assert_eq!(order(&scored), vec![2, 1, 0, 3, 4]);
        let scores: Vec<f32> = scored.iter().map(|(_, b)| b.score).collect();
        assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
    }

    #[test]
    fn a_pair_that_must_stand_apart_is_lifted_only_when_no_other_hit_is_close() {
        // Three memories scored .9, .8, .6, none of a kind that states
        // something.
        let lift = |times: &[i64], sims: &[&[f32]], k: usize, isolation: Option<f32>| {
            lift_with(
                &[0.9, 0.8, 0.6],
                times,
                sims,
                k,
                &[0, 1, 2],
                isolation,
                None,
            )
        };
        let lifted = |times: &[i64], sims: &[&[f32]], k: usize, isolation: Option<f32>| {
            order(&lift(times, sims, k, isolation))
        };
        // 0: older statement (best), 1: unrelated, 2: its restatement.
        let pair: [&[f32]; 3] = [&[1.0, 0.1, 0.6], &[0.1, 1.0, 0.2], &[0.6, 0.2, 1.0]];
        assert_eq!(lifted(&[10, 15, 20], &pair, 10, Some(0.5)), vec![2, 0, 1]);
        // Without an isolation cut-off such pairs are never lifted.
        assert_eq!(lifted(&[10, 15, 20], &pair, 10, None), vec![0, 1, 2]);

        // A thread: 1 is close to the newer turn, so the pair does not
        // stand apart and nothing moves, though 2 is as similar to 0 as above.
        let thread: [&[f32]; 3] = [&[1.0, 0.3, 0.6], &[0.3, 1.0, 0.55], &[0.6, 0.55, 1.0]];
        assert_eq!(lifted(&[10, 15, 20], &thread, 10, Some(0.5)), vec![0, 1, 2]);

        // A hit close to the pair counts only within the top k: 1 is the
        // restatement of 0 here, and 2 is close to 1.
        let outside: [&[f32]; 3] = [&[1.0, 0.6, 0.3], &[0.6, 1.0, 0.55], &[0.3, 0.55, 1.0]];
        assert_eq!(lifted(&[10, 20, 15], &outside, 2, Some(0.5)), vec![1, 0, 2]);
        assert_eq!(lifted(&[10, 20, 15], &outside, 3, Some(0.5)), vec![0, 1, 2]);

        let scored = lift(&[10, 15, 20], &pair, 10, Some(0.5));
        assert_eq!(scored[0].1.updates, Some(Uuid::from_u128(0)));
    }

    #[test]
    fn memories_that_state_something_are_versions_without_standing_apart() {
        // The thread above, all of kinds that state something: lifted.
        let thread: [&[f32]; 3] = [&[1.0, 0.3, 0.6], &[0.3, 1.0, 0.55], &[0.6, 0.55, 1.0]];
        let scored = lift_with(
            &[0.9, 0.8, 0.6],
            &[10, 15, 20],
            &thread,
            10,
            &[],
            Some(0.5),
            None,
        );
        assert_eq!(order(&scored)[0], 2);
    }

    #[test]
    fn two_lifts_above_one_hit_keep_the_scores_strictly_falling() {
        // 0: the older statement; 1 and 2 both newer and similar to it,
        // 1 newest. 2 is lifted above 0 after 1 was: both would get 0's
        // score plus one step.
        let sims: [&[f32]; 3] = [&[1.0, 0.7, 0.6], &[0.7, 1.0, 0.2], &[0.6, 0.2, 1.0]];
        let scored = lift(&[0.6, 0.5, 0.4], &[10, 30, 20], &sims, 10);
        assert_eq!(order(&scored), vec![1, 2, 0]);
        let scores: Vec<f32> = scored.iter().map(|(_, b)| b.score).collect();
        assert!(scores.windows(2).all(|w| w[0] > w[1]), "{scores:?}");
        for (_, b) in &scored {
            assert!((b.update - b.score / b.rel).abs() < 1e-5, "{b:?}");
        }
    }

    #[test]
    fn a_newer_memory_far_from_the_query_is_not_lifted() {
        // 2 is newer and similar to 0, but its own cosine to the query is
        // below the evidence cut-off (0.25).
        let sims: [&[f32]; 3] = [&[1.0, 0.1, 0.7], &[0.1, 1.0, 0.1], &[0.7, 0.1, 1.0]];
        let scored = lift(&[0.9, 0.8, 0.2], &[10, 10, 20], &sims, 10);
        assert_eq!(order(&scored), vec![0, 1, 2]);
        let scored = lift(&[0.9, 0.8, 0.25], &[10, 10, 20], &sims, 10);
        assert_eq!(order(&scored), vec![2, 0, 1]);
    }

    #[test]
    fn a_stating_memory_that_answers_less_well_is_not_lifted() {
        // 0: the older statement (relevance .8), 1: unrelated, 2: newer and
        // similar to 0. Relevance .7 is 87.5 % of .8.
        let sims: [&[f32]; 3] = [&[1.0, 0.1, 0.8], &[0.1, 1.0, 0.1], &[0.8, 0.1, 1.0]];
        let with = |share: Option<f32>| {
            order(&lift_with(
                &[0.8, 0.75, 0.7],
                &[10, 10, 20],
                &sims,
                10,
                &[],
                None,
                share,
            ))
        };
        assert_eq!(with(None), vec![2, 0, 1]);
        assert_eq!(with(Some(0.85)), vec![2, 0, 1]);
        assert_eq!(with(Some(0.9)), vec![0, 1, 2]);
        // Standing apart (1 is far from both) is enough on its own.
        let apart_too = lift_with(
            &[0.8, 0.75, 0.7],
            &[10, 10, 20],
            &sims,
            10,
            &[],
            Some(0.5),
            Some(0.9),
        );
        assert_eq!(order(&apart_too), vec![2, 0, 1]);
        // Pairs that must stand apart have their own rule: the share does
        // not apply to them.
        let apart = |share: Option<f32>| {
            order(&lift_with(
                &[0.8, 0.75, 0.7],
                &[10, 10, 20],
                &sims,
                10,
                &[0, 1, 2],
                Some(0.5),
                share,
            ))
        };
        assert_eq!(apart(Some(0.9)), vec![2, 0, 1]);
    }
}
