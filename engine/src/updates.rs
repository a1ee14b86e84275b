//! Newer versions first.
//!
//! People restate facts as they change: "our rent is $1,800 a month" in March,
//! "the landlord raised our rent, it's $1,950 now" in May. Both answer "how
//! much is our rent?", and nothing in §4's score says which one is current:
//! a few weeks apart, decay hardly separates them, and the older one is as
//! likely to have the higher cosine to the question. A writer who knows can
//! say so with `supersedes` (§3.6). When nobody did, recall treats a memory
//! that states something (a fact, preference or convention by default)
//! confirmed later than such a hit, and similar to it, as a likely update,
//! and lifts it to rank just above that hit. Episodes and notes are not
//! versions of each other: a later, similar turn of a conversation is
//! usually a different event. The older memory is not hidden or
//! demoted; it moves one place down, and the lifted hit's breakdown names it
//! (`update`, `updates`).
//!
//! The rule reorders the top `k` hits and never changes which memories are
//! returned: both memories of a pair must be among them. Lifting newer
//! versions from anywhere in the candidates was measured first and rejected:
//! in a long conversation nearly every hit has later, similar turns, and
//! LoCoMo's recall_any@10 fell from .637 to .28. Memories written at the same time (one conversation turn,
//! one batch) are never reordered.
//!
//! This is an addition to the spec. The similarity cut-off
//! ([`crate::ScoringConfig::update_similarity`]) was set with `recall-bench
//! sweep`; see that field for the numbers.

use uuid::Uuid;

use crate::score::Breakdown;

/// Within the first `k` of `scored` (best first), lifts every hit that
/// `may_update` a hit above it and has at least `threshold` cosine with it
/// to the place just above that hit. `may_update(a, b)`: memory
/// `a` was confirmed after `b` and both are of kinds that state something;
/// `similarity(a, b)`: the cosine of their vectors, if both have one.
///
/// A lifted memory is checked in turn for a newer version of itself, so a
/// chain of updates ends with the newest first. `may_update` must imply
/// "confirmed later": then every lift makes the memory at that place
/// strictly newer, and the loop ends.
pub(crate) fn lift_newer_versions<N, S, I>(
    scored: &mut Vec<(usize, Breakdown)>,
    k: usize,
    threshold: f32,
    may_update: N,
    similarity: S,
    id: I,
) where
    N: Fn(usize, usize) -> bool,
    S: Fn(usize, usize) -> Option<f32>,
    I: Fn(usize) -> Uuid,
{
    let mut at = 0;
    while at < k.min(scored.len()) {
        let older = scored[at].0;
        let update = (at + 1..k.min(scored.len())).find(|&j| {
            let candidate = scored[j].0;
            may_update(candidate, older)
                && similarity(candidate, older).is_some_and(|s| s >= threshold)
        });
        let Some(j) = update else {
            at += 1;
            continue;
        };
        let (memory, mut breakdown) = scored.remove(j);
        let lifted = scored[at].1.score.next_up();
        if breakdown.score > 0.0 {
            breakdown.update *= lifted / breakdown.score;
        }
        breakdown.score = lifted;
        breakdown.updates = Some(id(older));
        scored.insert(at, (memory, breakdown));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(score: f32) -> Breakdown {
        Breakdown {
            cosine: Some(score),
            sentence_cosine: None,
            v: score,
            bm25: None,
            b: 0.0,
            rel: score,
            kind_weight: 1.0,
            decay: 1.0,
            usage: 1.0,
            drift: 1.0,
            confidence: 1.0,
            update: 1.0,
            updates: None,
            score,
        }
    }

    /// Memories 0..n, written at `times[i]`, with a similarity matrix.
    fn lift(scores: &[f32], times: &[i64], sims: &[&[f32]], k: usize) -> Vec<(usize, Breakdown)> {
        let mut scored: Vec<(usize, Breakdown)> = scores
            .iter()
            .enumerate()
            .map(|(i, s)| (i, hit(*s)))
            .collect();
        lift_newer_versions(
            &mut scored,
            k,
            0.5,
            |a, b| times[a] > times[b],
            |a, b| Some(sims[a][b]),
            |i| Uuid::from_u128(i as u128),
        );
        scored
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
        assert_eq!(scored[1].1, hit(0.9), "the older hit keeps its score");
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
}
