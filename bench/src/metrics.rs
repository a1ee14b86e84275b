//! Retrieval metrics with binary relevance (SPEC §9).
//!
//! A ranked list is one entry per recalled memory, best first; each entry
//! lists the evaluation units (turns or sessions) written into that memory —
//! the original and every repeat that deduplicated into it — so a hit on a
//! memory credits all of them. `k` counts memories, not units.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;
use uuid::Uuid;

/// The cut-offs reported unless asked otherwise.
pub const DEFAULT_KS: [usize; 3] = [1, 5, 10];

/// What one question scored.
#[derive(Debug, Clone, PartialEq)]
pub struct QuestionScores {
    /// Metric name (`recall_any@5`, `ndcg@10`, `mrr` …) → value in [0, 1].
    pub values: BTreeMap<String, f64>,
}

/// Scores one ranked list against the gold units.
///
/// `ideal` is how many memories hold at least one gold unit (the best
/// attainable number of relevant entries), used by nDCG's ideal ranking.
///
/// ```
/// use recall_bench::metrics::score_question;
/// let ranked = vec![vec!["a"], vec!["g1", "g2"], vec!["b"]];
/// let s = score_question(&ranked, &["g1", "g2"], 1, &[1, 2]);
/// assert_eq!(s.values["recall_any@1"], 0.0);
/// assert_eq!(s.values["recall_all@2"], 1.0);
/// assert_eq!(s.values["mrr"], 0.5);
/// ```
pub fn score_question<S: AsRef<str>>(
    ranked: &[Vec<S>],
    gold: &[S],
    ideal: usize,
    ks: &[usize],
) -> QuestionScores {
    let gold: HashSet<&str> = gold.iter().map(AsRef::as_ref).collect();
    let relevant: Vec<bool> = ranked
        .iter()
        .map(|units| units.iter().any(|u| gold.contains(u.as_ref())))
        .collect();
    let mut values = BTreeMap::new();
    for &k in ks {
        let top = &ranked[..k.min(ranked.len())];
        let any = relevant.iter().take(k).any(|r| *r);
        let covered: HashSet<&str> = top.iter().flatten().map(AsRef::as_ref).collect();
        let all = !gold.is_empty() && gold.iter().all(|g| covered.contains(g));
        values.insert(format!("recall_any@{k}"), f64::from(u8::from(any)));
        values.insert(format!("recall_all@{k}"), f64::from(u8::from(all)));
        values.insert(format!("ndcg@{k}"), ndcg(&relevant, ideal, k));
    }
    let first = relevant.iter().position(|r| *r);
    values.insert("mrr".into(), first.map_or(0.0, |i| 1.0 / (i + 1) as f64));
    QuestionScores { values }
}

/// A recall's hits as the evaluation units each memory holds (`units`:
/// memory → the units written into it), best first, and how many distinct
/// memories hold a `gold` unit (`memory_of`: unit → its memory): the
/// `ranked` and `ideal` of [`score_question`].
pub fn ranked_units<'a>(
    hits: &[recall::Hit],
    units: &'a HashMap<Uuid, Vec<String>>,
    gold: &[&str],
    memory_of: &HashMap<String, Uuid>,
) -> (Vec<Vec<&'a str>>, usize) {
    let ranked = hits
        .iter()
        .map(|h| {
            units
                .get(&h.memory.id)
                .map(|u| u.iter().map(String::as_str).collect())
                .unwrap_or_default()
        })
        .collect();
    let holding: HashSet<Uuid> = gold
        .iter()
        .filter_map(|g| memory_of.get(*g).copied())
        .collect();
    (ranked, holding.len())
}

/// nDCG@k with binary gains: DCG over the ranking, divided by the DCG of
/// `ideal` relevant entries at the top.
fn ndcg(relevant: &[bool], ideal: usize, k: usize) -> f64 {
    let gain = |i: usize| 1.0 / ((i + 2) as f64).log2();
    let dcg: f64 = relevant
        .iter()
        .take(k)
        .enumerate()
        .filter(|(_, r)| **r)
        .map(|(i, _)| gain(i))
        .sum();
    let idcg: f64 = (0..ideal.min(k)).map(gain).sum();
    if idcg > 0.0 { dcg / idcg } else { 0.0 }
}

/// Means of per-question scores, overall and per group (question type or
/// LoCoMo category).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    /// Questions scored.
    pub n: usize,
    /// Metric → mean.
    pub means: BTreeMap<String, f64>,
}

/// Accumulates question scores into group and overall means.
#[derive(Debug, Default)]
pub struct Tally {
    sums: BTreeMap<String, (usize, BTreeMap<String, f64>)>,
}

/// The group name of the overall summary.
pub const OVERALL: &str = "overall";

impl Tally {
    /// Adds one question to its group and to [`OVERALL`].
    pub fn add(&mut self, group: &str, scores: &QuestionScores) {
        for g in [group, OVERALL] {
            let (n, sums) = self.sums.entry(g.to_string()).or_default();
            *n += 1;
            for (name, v) in &scores.values {
                *sums.entry(name.clone()).or_default() += v;
            }
        }
    }

    /// Group → summary (`overall` included).
    pub fn summaries(&self) -> BTreeMap<String, Summary> {
        self.sums
            .iter()
            .map(|(group, (n, sums))| {
                let means = sums
                    .iter()
                    .map(|(name, s)| (name.clone(), s / *n as f64))
                    .collect();
                (group.clone(), Summary { n: *n, means })
            })
            .collect()
    }
}

/// The metric columns of a quality table at cut-offs `ks`.
pub fn metric_columns(ks: &[usize]) -> Vec<String> {
    let mut cols = Vec::new();
    for k in ks {
        cols.push(format!("recall_any@{k}"));
    }
    for k in ks {
        cols.push(format!("recall_all@{k}"));
    }
    for k in ks {
        cols.push(format!("ndcg@{k}"));
    }
    cols.push("mrr".into());
    cols
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn hand_worked_ranking() {
        // gold g1 (in memory 2, with a repeat r) and g2 (memory 4); 2 ideal.
        let ranked = vec![vec!["x"], vec!["r", "g1"], vec!["y"], vec!["g2"]];
        let s = score_question(&ranked, &["g1", "g2"], 2, &[1, 3, 5]);
        let v = &s.values;
        assert_eq!(v["recall_any@1"], 0.0);
        assert_eq!(v["recall_any@3"], 1.0);
        assert_eq!(v["recall_all@3"], 0.0);
        assert_eq!(v["recall_all@5"], 1.0);
        // DCG@5 = 1/log2(3) + 1/log2(5); IDCG = 1 + 1/log2(3).
        let expected = (1.0 / 3f64.log2() + 1.0 / 5f64.log2()) / (1.0 + 1.0 / 3f64.log2());
        assert!(close(v["ndcg@5"], expected), "{}", v["ndcg@5"]);
        assert!(close(
            v["ndcg@3"],
            (1.0 / 3f64.log2()) / (1.0 + 1.0 / 3f64.log2())
        ));
        assert_eq!(v["mrr"], 0.5);
    }

    #[test]
    fn nothing_found_scores_zero_and_tally_averages() {
        let empty: Vec<Vec<&str>> = Vec::new();
        let miss = score_question(&empty, &["g"], 1, &[10]);
        assert_eq!(miss.values["recall_any@10"], 0.0);
        assert_eq!(miss.values["ndcg@10"], 0.0);
        assert_eq!(miss.values["mrr"], 0.0);
        let hit = score_question(&[vec!["g"]], &["g"], 1, &[10]);
        assert_eq!(hit.values["ndcg@10"], 1.0);
        let mut tally = Tally::default();
        tally.add("a", &miss);
        tally.add("b", &hit);
        let s = tally.summaries();
        assert_eq!(s[OVERALL].n, 2);
        assert!(close(s[OVERALL].means["recall_any@10"], 0.5));
        assert!(close(s["b"].means["mrr"], 1.0));
    }
}
