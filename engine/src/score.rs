//! The recall scorer (§4.3–§4.5): each factor of a hit's score as a pure
//! function. The whole formula is written once, on [`Breakdown`].
//!
//! ```
//! use recall::{Breakdown, ScoringConfig};
//! let config = ScoringConfig::default();
//! // A pitfall with cosine 0.8 and raw BM25 10, fresh, unused:
//! let rel = recall::relevance(&config, Some(0.8), 0.5, true, || false);
//! assert!((rel - (0.55 * 0.8 + 0.45 * 0.5)).abs() < 1e-6);
//! // The same words on a memory unrelated in meaning:
//! assert!((recall::relevance(&config, Some(0.1), 0.5, true, || false) - 0.55 * 0.1).abs() < 1e-6);
//! assert_eq!(recall::usage_multiplier(&config, 3, 0), 1.0 + 0.4 * 4f32.ln());
//! assert_eq!(recall::usage_multiplier(&config, 100, 0), 1.8);
//! assert_eq!(recall::usage_multiplier(&config, 0, 5), 0.75);
//! ```

use serde::Serialize;
use uuid::Uuid;

use crate::background::Background;
use crate::config::{Bm25Normalization, ScoringConfig};

const DAY_MS: f64 = 86_400_000.0;

/// Why a hit ranked where it did: every factor of its score (§4.9). This is
/// the one place the formula is written in full:
///
/// ```text
/// rel   = vector_weight · max(0, cosine) + lexical_weight · b · share
///         b = min(1, s / Σ idf(query terms))   (s = raw BM25; query-independent, so rel can gate abstention)
///         share = 1 if b ≥ 0.6, else clamp((cosine − 0.2) / 0.2, 0, 1)   (a chance word match
///                 on a memory unrelated in meaning counts nothing; see `LexicalSupport`),
///                 for a memory that only asks clamp((cosine − 0.4) / 0.2, 0, 1)
/// score = rel × kind_weight × decay × usage × drift × confidence × question
///         then × update for a newer version lifted above an older one (`updates.rs`)
///         kind_weight and usage above 1 are lifts, kept in full only for relevance
///                      near the best candidate's (`lift_share`, `ScoringConfig::lift_band`)
///         question   = question_weight (0.6) for a memory that only asks; else 1
///         decay      = 0.9 + 0.1 · 0.5^(age / (45 d · stability)),  stability = 1 + ln(1 + confirmations)
///                      (the spec's floor is 0.6; see `ScoringConfig::decay_floor`)
///         usage      = min(usage_cap 1.8, 1 + usage_slope 0.4 · ln(1 + citations)) if cited; 0.75 if ≥ 5 impressions and never cited; else 1
///         drift      = 0.6 if an element drifted after the last confirmation; else 1
///         confidence = as written; inferred: × 0.5^(age / 30 d), and below 0.3 the memory leaves recall
/// ```
/// With no embedder, `rel = b`, and any BM25 match passes the abstention
/// gate (the gate is calibrated for the embedder; raw BM25 scales with
/// corpus size). The numbers are the defaults of [`ScoringConfig`].
///
/// The fields are read through accessors; [`Breakdown::explanation`] gives
/// the same as a tree and [`Breakdown::explain`] as text.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use std::sync::Arc;
/// use recall::{Config, Engine, HashEmbedder, Kind, ModelSource, NewMemory, Trust};
/// let dir = tempfile::tempdir().unwrap();
/// let engine = Engine::open(
///     Config::new(dir.path()).model(ModelSource::Custom(Arc::new(HashEmbedder::new(64)))),
/// ).await.unwrap();
/// engine.remember(NewMemory::new("acme", "org", Kind::Pitfall, "The gateway drops idle sockets after 60 s.").trust(Trust::User))
///     .await.unwrap();
/// let found = engine.recall("acme", "gateway idle sockets").read(["org"]).execute().await.unwrap();
/// let b = &found.hits[0].breakdown;
/// let product = b.rel() * b.kind_weight() * b.decay() * b.usage() * b.drift() * b.confidence() * b.question();
/// assert!((b.score() - product).abs() < 1e-6);
/// assert_eq!(b.kind_weight(), 3.0); // a pitfall, the only candidate
/// assert_eq!(b.explanation().value(), b.score());
/// assert!(b.explain().starts_with(&format!("score {:.3}", b.score())));
/// # });
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Breakdown {
    pub(crate) cosine: Option<f32>,
    pub(crate) sentence_cosine: Option<f32>,
    pub(crate) v: f32,
    pub(crate) bm25: Option<f32>,
    pub(crate) b: f32,
    pub(crate) lexical_share: f32,
    pub(crate) rel: f32,
    pub(crate) kind_weight: f32,
    pub(crate) decay: f32,
    pub(crate) usage: f32,
    pub(crate) drift: f32,
    pub(crate) confidence: f32,
    pub(crate) question: f32,
    pub(crate) lift_share: f32,
    pub(crate) update: f32,
    pub(crate) updates: Option<Uuid>,
    pub(crate) score: f32,
}

impl Breakdown {
    /// Cosine to the query (None without vectors): the larger of the whole
    /// content's and [`Breakdown::sentence_cosine`].
    pub fn cosine(&self) -> Option<f32> {
        self.cosine
    }

    /// Cosine of the memory's closest sentence to the query, for a memory
    /// whose sentences were embedded apart ([`crate::sentences`]).
    pub fn sentence_cosine(&self) -> Option<f32> {
        self.sentence_cosine
    }

    /// `max(0, cosine)`.
    pub fn v(&self) -> f32 {
        self.v
    }

    /// Raw BM25 score (None when BM25 did not return the memory).
    pub fn bm25(&self) -> Option<f32> {
        self.bm25
    }

    /// Normalized BM25 in [0, 1].
    pub fn b(&self) -> f32 {
        self.b
    }

    /// The share of `b` counted in relevance ([`lexical_share`]).
    pub fn lexical_share(&self) -> f32 {
        self.lexical_share
    }

    /// Relevance: what abstention is decided on.
    pub fn rel(&self) -> f32 {
        self.rel
    }

    /// Kind weight, after [`Breakdown::lift_share`].
    pub fn kind_weight(&self) -> f32 {
        self.kind_weight
    }

    /// Age decay.
    pub fn decay(&self) -> f32 {
        self.decay
    }

    /// Usage multiplier, after [`Breakdown::lift_share`].
    pub fn usage(&self) -> f32 {
        self.usage
    }

    /// Drift multiplier.
    pub fn drift(&self) -> f32 {
        self.drift
    }

    /// Effective confidence.
    pub fn confidence(&self) -> f32 {
        self.confidence
    }

    /// [`ScoringConfig::question_weight`] for a memory that only asks
    /// ([`crate::is_question`]); 1 otherwise.
    pub fn question(&self) -> f32 {
        self.question
    }

    /// The share of its lifts (kind weight, usage above 1) the hit got for
    /// its relevance against the best candidate's
    /// ([`ScoringConfig::lift_band`]). 1: all of them.
    pub fn lift_share(&self) -> f32 {
        self.lift_share
    }

    /// The lift of a newer version above the older hit it likely updates
    /// ([`ScoringConfig::update_similarity`]); 1 otherwise.
    pub fn update(&self) -> f32 {
        self.update
    }

    /// The older memory this hit was lifted above.
    pub fn updates(&self) -> Option<Uuid> {
        self.updates
    }

    /// The score: the product of the factors.
    pub fn score(&self) -> f32 {
        self.score
    }

    /// The score as a tree, like tantivy's `Explanation`: the score, the
    /// factors it is the product of, and relevance's two halves.
    pub fn explanation(&self) -> Explanation {
        let vector = match self.cosine {
            None => Explanation::leaf(self.v, "vector: none (no embedder)"),
            Some(cosine) => Explanation::node(
                self.v,
                "vector: max(0, cosine)",
                [
                    Some(Explanation::leaf(cosine, "cosine to the query")),
                    self.sentence_cosine
                        .map(|c| Explanation::leaf(c, "cosine of the closest sentence")),
                ]
                .into_iter()
                .flatten()
                .collect(),
            ),
        };
        let lexical = Explanation::node(
            self.b * self.lexical_share,
            "lexical: b × share",
            self.bm25
                .map(|s| Explanation::leaf(s, "raw BM25"))
                .into_iter()
                .chain([
                    Explanation::leaf(self.b, "b: BM25 against the query's attainable score"),
                    Explanation::leaf(self.lexical_share, "share of b counted"),
                ])
                .collect(),
        );
        let mut factors = vec![
            Explanation::node(
                self.rel,
                "relevance: vector_weight × vector + lexical_weight × lexical (with an embedder; else lexical)",
                vec![vector, lexical],
            ),
            Explanation::leaf(self.kind_weight, "kind weight"),
            Explanation::leaf(self.decay, "decay"),
            Explanation::leaf(self.usage, "usage"),
            Explanation::leaf(self.drift, "drift"),
            Explanation::leaf(self.confidence, "confidence"),
            Explanation::leaf(self.question, "question"),
        ];
        if self.lift_share < 1.0 {
            factors.push(Explanation::leaf(
                self.lift_share,
                "share of the lifts kept (kind weight and usage above 1)",
            ));
        }
        if let Some(older) = self.updates {
            factors.push(Explanation::leaf(
                self.update,
                format!("update: ranked just above {older}"),
            ));
        }
        Explanation::node(self.score, "score: the product of the factors", factors)
    }
    /// The score as two or three lines of text: the factors, relevance's
    /// halves, and the update it was lifted for (the example on
    /// [`Breakdown`] shows it).
    pub fn explain(&self) -> String {
        let cosine = match (self.cosine, self.sentence_cosine) {
            (Some(c), Some(s)) if s >= c => format!("{c:.3}, from its closest sentence"),
            (Some(c), _) => format!("{c:.3}"),
            (None, _) => "none".to_string(),
        };
        let bm25 = self.bm25.map_or("none".to_string(), |s| format!("{s:.2}"));
        let share = if self.b > 0.0 && self.lexical_share < 1.0 {
            format!(
                " × {:.2}: a partial match, not close enough in meaning",
                self.lexical_share
            )
        } else {
            String::new()
        };
        let update = match self.updates {
            Some(_) => format!(" × update {:.3}", self.update),
            None => String::new(),
        };
        let question = if self.question < 1.0 {
            format!(" × question {:.2} (it only asks)", self.question)
        } else {
            String::new()
        };
        let lifted = if self.lift_share < 1.0 {
            format!(
                "\n  lifts: {:.0} % of its kind weight and usage, for relevance below the best hit's",
                self.lift_share * 100.0
            )
        } else {
            String::new()
        };
        let mut tree = format!(
            "score {:.3} = rel {:.3} × kind {:.2} × decay {:.3} × usage {:.2} × drift {:.2} × confidence {:.2}{question}{update}\n  rel = vector (cosine {cosine}, v {:.3}) + lexical (bm25 {bm25}, b {:.3}{share}){lifted}",
            self.score,
            self.rel,
            self.kind_weight,
            self.decay,
            self.usage,
            self.drift,
            self.confidence,
            self.v,
            self.b
        );
        if let Some(older) = self.updates {
            tree.push_str(&format!(
                "\n  update: ranked just above {older}, an older, similar memory it likely updates"
            ));
        }
        tree
    }
}

/// One node of a score's explanation ([`Breakdown::explanation`]): a value,
/// what it is, and the values it was computed from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Explanation {
    value: f32,
    description: String,
    details: Vec<Explanation>,
}

impl Explanation {
    fn leaf(value: f32, description: impl Into<String>) -> Explanation {
        Explanation::node(value, description, Vec::new())
    }

    fn node(value: f32, description: impl Into<String>, details: Vec<Explanation>) -> Explanation {
        Explanation {
            value,
            description: description.into(),
            details,
        }
    }

    /// The value.
    pub fn value(&self) -> f32 {
        self.value
    }

    /// What the value is.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The values it was computed from.
    pub fn details(&self) -> &[Explanation] {
        &self.details
    }
}

/// Normalizes a raw BM25 score. `max`/`min` are over the candidate set and
/// used only by the research normalizations; `attainable` is the query's
/// attainable score (Σ IDF of its terms), used by
/// [`Bm25Normalization::Attainable`].
///
/// ```
/// use recall::{Bm25Normalization, normalize_bm25};
/// let sat = Bm25Normalization::Saturation { k: 10.0 };
/// assert_eq!(normalize_bm25(sat, 10.0, 0.0, 50.0, 8.0), 0.5);
/// assert_eq!(normalize_bm25(Bm25Normalization::Attainable, 4.0, 0.0, 50.0, 8.0), 0.5);
/// assert_eq!(normalize_bm25(Bm25Normalization::Attainable, 12.0, 0.0, 50.0, 8.0), 1.0);
/// ```
pub fn normalize_bm25(norm: Bm25Normalization, s: f32, min: f32, max: f32, attainable: f32) -> f32 {
    if s <= 0.0 {
        return 0.0;
    }
    match norm {
        Bm25Normalization::Saturation { k } => s / (s + k.max(f32::EPSILON)),
        Bm25Normalization::MaxOfQuery => {
            if max > 0.0 {
                s / max
            } else {
                0.0
            }
        }
        Bm25Normalization::MinMax => {
            if max > min {
                (s - min) / (max - min)
            } else {
                1.0
            }
        }
        Bm25Normalization::Attainable => {
            if attainable > 0.0 {
                (s / attainable).min(1.0)
            } else {
                0.0
            }
        }
    }
}

/// Relevance: the weighted vector and lexical halves; `b` alone when the
/// engine has no embedder. `is_question`: whether the candidate only asks
/// ([`crate::is_question`]), called only when there is a lexical match to judge.
pub fn relevance(
    config: &ScoringConfig,
    cosine: Option<f32>,
    b: f32,
    has_embedder: bool,
    is_question: impl FnOnce() -> bool,
) -> f32 {
    if !has_embedder {
        return b;
    }
    let v = cosine.unwrap_or(0.0).max(0.0);
    config.vector_weight * v
        + config.lexical_weight * b * lexical_share(config, cosine, b, is_question)
}

/// The share of `b` that counts in relevance
/// ([`ScoringConfig::lexical_support`]): 1 when that is off, when there is
/// no match, and for a memory without a vector (nothing to judge its
/// meaning by). `is_question` is called only for a match to judge.
///
/// ```
/// use recall::{ScoringConfig, lexical_share};
/// let config = ScoringConfig::default();
/// assert_eq!(lexical_share(&config, Some(0.05), 0.45, || false), 0.0);
/// assert_eq!(lexical_share(&config, Some(0.45), 0.45, || false), 1.0);
/// let request = lexical_share(&config, Some(0.45), 0.45, || true);
/// assert!((request - 0.25).abs() < 1e-6); // a request: a quarter up its ramp 0.4 → 0.6
/// assert_eq!(lexical_share(&config, None, 0.45, || true), 1.0);
/// let spec = ScoringConfig { lexical_support: None, ..ScoringConfig::default() };
/// assert_eq!(lexical_share(&spec, Some(0.05), 0.45, || true), 1.0);
/// ```
pub fn lexical_share(
    config: &ScoringConfig,
    cosine: Option<f32>,
    b: f32,
    is_question: impl FnOnce() -> bool,
) -> f32 {
    match (config.lexical_support, cosine) {
        (Some(support), Some(c)) if b > 0.0 => support.share(c, b, is_question()),
        _ => 1.0,
    }
}

/// A candidate's best cosines to the query among its vectors (the whole
/// memory's and its sentences') that state something and those that only
/// ask ([`crate::is_question`]); `None`: it has no such vector.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PartCosines {
    /// Best cosine of a part that states something.
    pub statement: Option<f32>,
    /// Best cosine of a part that only asks.
    pub question: Option<f32>,
}

/// Whether a candidate is evidence that the query can be answered (the
/// abstention gate): a part of it that states something reaches
/// [`ScoringConfig::min_evidence_cosine`], or a part that only asks reaches
/// [`ScoringConfig::question_evidence`]'s cosine, or its `b` reaches
/// [`ScoringConfig::min_evidence_lexical`] (the question one's when the
/// whole memory only asks). `cosine` is its best cosine over all its
/// parts; `is_question` and `parts` are called only when the answer depends
/// on them.
///
/// ```
/// use recall::{PartCosines, ScoringConfig, is_evidence};
/// let config = ScoringConfig::default();
/// let stated = || PartCosines { statement: Some(0.28), question: None };
/// let asked = || PartCosines { statement: Some(0.1), question: Some(0.28) };
/// assert!(is_evidence(&config, 0.0, Some(0.28), 0.0, || false, stated)); // a statement
/// assert!(!is_evidence(&config, 0.0, Some(0.28), 0.0, || false, asked)); // its request part
/// assert!(is_evidence(&config, 0.0, Some(0.05), 0.7, || true, asked)); // most of the query's words
/// // Cut-offs raised by .2 (a store whose memories sit close to this query):
/// assert!(!is_evidence(&config, 0.2, Some(0.28), 0.0, || false, stated));
/// let spec = ScoringConfig { question_evidence: None, ..ScoringConfig::default() };
/// assert!(is_evidence(&spec, 0.0, Some(0.28), 0.0, || true, asked));
/// ```
///
/// `raise` lifts both cosine cut-offs ([`evidence_raise`]).
pub fn is_evidence(
    config: &ScoringConfig,
    raise: f32,
    cosine: Option<f32>,
    b: f32,
    is_question: impl FnOnce() -> bool,
    parts: impl FnOnce() -> PartCosines,
) -> bool {
    let (min_cosine, min_lexical) = (
        config.min_evidence_cosine + raise,
        config.min_evidence_lexical,
    );
    let Some(mut question) = config.question_evidence else {
        return cosine.is_some_and(|c| c >= min_cosine) || b >= min_lexical;
    };
    question.min_cosine += raise;
    let lexical = match (b >= min_lexical, b >= question.min_lexical) {
        (true, true) => true,
        (false, false) => false,
        _ if is_question() => b >= question.min_lexical,
        _ => b >= min_lexical,
    };
    if lexical {
        return true;
    }
    let Some(best) = cosine else {
        return false;
    };
    match (best >= min_cosine, best >= question.min_cosine) {
        (true, true) => true,
        (false, false) => false,
        _ => {
            let parts = parts();
            parts.statement.is_some_and(|c| c >= min_cosine)
                || parts.question.is_some_and(|c| c >= question.min_cosine)
        }
    }
}

/// The unknown-name rule ([`ScoringConfig::unknown_names`]): the query
/// names `named` words ([`crate::named_words`]) and `unknown` of them are
/// mentioned by no memory the caller may read. It abstains when the query
/// names something and none of its names is known, unless it asks for
/// advice (`advice`, [`crate::asks_for_advice`]); one known name (the
/// user's own, a product the store talks about) keeps it answering.
///
/// ```
/// use recall::{ScoringConfig, names_unknown};
/// let config = ScoringConfig::default();
/// assert!(names_unknown(&config, 2, 2, false)); // "What did Melanie tell Caroline?", neither ever mentioned
/// assert!(!names_unknown(&config, 2, 1, false)); // one of them is known
/// assert!(!names_unknown(&config, 0, 0, false)); // the query names nothing
/// assert!(!names_unknown(&config, 1, 1, true)); // "Any tips for my flight to Reykjavik?"
/// let off = ScoringConfig { unknown_names: false, ..ScoringConfig::default() };
/// assert!(!names_unknown(&off, 2, 2, false));
/// ```
pub fn names_unknown(config: &ScoringConfig, named: usize, unknown: usize, advice: bool) -> bool {
    config.unknown_names && !advice && named > 0 && unknown >= named
}

/// How far a query's background ([`Background`]) raises the gate's cosine
/// cut-offs: to [`ScoringConfig::min_evidence_margin`] above the mean
/// cosine of the memories in scope, when that is above
/// [`ScoringConfig::min_evidence_cosine`]; 0 without a background or a
/// margin.
///
/// ```
/// use recall::{Background, ScoringConfig, evidence_raise};
/// let margin = 0.15;
/// let config = ScoringConfig { min_evidence_margin: Some(margin), ..ScoringConfig::default() };
/// let quiet = Background { mean: 0.02, sd: 0.05, sampled: 40 };
/// assert_eq!(evidence_raise(&config, Some(&quiet)), 0.0);
/// let talkative = Background { mean: 0.36, sd: 0.12, sampled: 256 };
/// let raise = evidence_raise(&config, Some(&talkative));
/// assert!((config.min_evidence_cosine + raise - (0.36 + margin)).abs() < 1e-6);
/// ```
pub fn evidence_raise(config: &ScoringConfig, background: Option<&Background>) -> f32 {
    match (config.min_evidence_margin, background) {
        (Some(margin), Some(b)) => (b.mean + margin - config.min_evidence_cosine).max(0.0),
        _ => 0.0,
    }
}

/// Age decay, slowed by confirmations; never below the floor.
pub fn decay_multiplier(config: &ScoringConfig, age_ms: i64, confirmations: u32) -> f32 {
    let age_days = age_ms.max(0) as f64 / DAY_MS;
    let stability = 1.0 + (1.0 + f64::from(confirmations)).ln();
    let floor = f64::from(config.decay_floor);
    let decay = floor + (1.0 - floor) * 0.5f64.powf(age_days / (config.half_life_days * stability));
    decay as f32
}

/// Usage feedback: cited memories rise (capped), dealt-but-ignored ones sink.
pub fn usage_multiplier(config: &ScoringConfig, citations: u32, impressions: u32) -> f32 {
    if citations > 0 {
        (1.0 + config.usage_slope * (1.0 + citations as f32).ln()).min(config.usage_cap)
    } else if impressions >= config.ignored_after {
        config.ignored_penalty
    } else {
        1.0
    }
}

/// Drift: memories about code that changed since they were confirmed are demoted, never hidden.
pub fn drift_multiplier(config: &ScoringConfig, drifted: bool) -> f32 {
    if drifted { config.drift_factor } else { 1.0 }
}

/// Confidence at recall time: inferred memories halve every
/// `inferred_half_life_days` since their last confirmation.
pub fn effective_confidence(
    config: &ScoringConfig,
    written: f32,
    inferred: bool,
    since_confirmed_ms: i64,
) -> f32 {
    if !inferred {
        return written;
    }
    let days = since_confirmed_ms.max(0) as f64 / DAY_MS;
    (f64::from(written) * 0.5f64.powf(days / config.inferred_half_life_days)) as f32
}

/// Whether an inferred memory has faded out of recall: its effective
/// confidence fell below [`ScoringConfig::min_confidence`] (recall skips
/// it; the review queue lists it as low confidence). A memory written
/// explicitly never fades.
pub(crate) fn faded(
    config: &ScoringConfig,
    written: f32,
    inferred: bool,
    since_confirmed_ms: i64,
) -> bool {
    inferred
        && effective_confidence(config, written, true, since_confirmed_ms) < config.min_confidence
}

#[cfg(test)]
impl Breakdown {
    /// A hit whose cosine, relevance and score are all `rel`: no lexical
    /// match, every multiplier 1.
    pub(crate) fn with_relevance(rel: f32) -> Breakdown {
        Breakdown {
            cosine: Some(rel),
            sentence_cosine: None,
            v: rel,
            bm25: None,
            b: 0.0,
            lexical_share: 1.0,
            rel,
            kind_weight: 1.0,
            decay: 1.0,
            usage: 1.0,
            drift: 1.0,
            confidence: 1.0,
            question: 1.0,
            lift_share: 1.0,
            update: 1.0,
            updates: None,
            score: rel,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decay_halves_toward_the_floor_and_stability_slows_it() {
        let c = ScoringConfig::default();
        assert!((decay_multiplier(&c, 0, 0) - 1.0).abs() < 1e-6);
        let day = DAY_MS as i64;
        let halfway = c.decay_floor + (1.0 - c.decay_floor) / 2.0;
        assert!((decay_multiplier(&c, 45 * day, 0) - halfway).abs() < 1e-5);
        assert!(decay_multiplier(&c, 45 * day, 3) > halfway);
        assert!(decay_multiplier(&c, 100_000 * day, 0) >= c.decay_floor);
        assert!(decay_multiplier(&c, 100_000 * day, 0) < halfway);
    }

    #[test]
    fn a_partial_match_far_in_meaning_keeps_a_share_of_its_lexical_half() {
        let c = ScoringConfig::default();
        // Halfway up the ramp (cosine 0.3 of 0.2 → 0.4), a third of the
        // query's information matched:
        let share = lexical_share(&c, Some(0.3), 0.33, || false);
        assert!((share - 0.5).abs() < 1e-6);
        let rel = relevance(&c, Some(0.3), 0.33, true, || false);
        assert!((rel - (0.55 * 0.3 + 0.45 * 0.33 * 0.5)).abs() < 1e-6);
        // Most of the query's information counts whatever the cosine.
        assert_eq!(lexical_share(&c, Some(0.0), 0.6, || true), 1.0);
        // A request climbs the ramp 0.2 higher: at cosine 0.5, halfway.
        let asked = lexical_share(&c, Some(0.5), 0.33, || true);
        assert!((asked - 0.5).abs() < 1e-6);
        // Without an embedder relevance is `b` alone, untouched.
        assert_eq!(relevance(&c, None, 0.33, false, || true), 0.33);
        let explained_breakdown = Breakdown {
            cosine: Some(0.3),
            v: 0.3,
            bm25: Some(2.0),
            b: 0.33,
            lexical_share: share,
            ..Breakdown::with_relevance(rel)
        };
        // The tree's relevance is its two halves with the weights.
        let tree = explained_breakdown.explanation();
        let [vector, lexical] = tree.details()[0].details() else {
            panic!("{tree:#?}")
        };
        let weighed = c.vector_weight * vector.value() + c.lexical_weight * lexical.value();
        assert!(
            (weighed - tree.details()[0].value()).abs() < 1e-6,
            "{tree:#?}"
        );
        assert_eq!(tree.value(), explained_breakdown.score());
        let explained = explained_breakdown.explain();
        assert!(
            explained.contains("b 0.330 × 0.50: a partial match, not close enough in meaning"),
            "{explained}"
        );
        // No lexical match: nothing to discount, nothing said.
        let unmatched = Breakdown {
            bm25: None,
            b: 0.0,
            ..explained_breakdown
        };
        assert!(
            unmatched.explain().ends_with("(bm25 none, b 0.000)"),
            "{}",
            unmatched.explain()
        );
    }

    #[test]
    fn saturation_is_query_independent() {
        let n = Bm25Normalization::Saturation { k: 10.0 };
        assert_eq!(normalize_bm25(n, 10.0, 0.0, 50.0, 1.0), 0.5);
        assert_eq!(normalize_bm25(n, 10.0, 0.0, 10.0, 1.0), 0.5);
        assert_eq!(
            normalize_bm25(Bm25Normalization::MaxOfQuery, 10.0, 0.0, 10.0, 1.0),
            1.0
        );
    }

    #[test]
    fn inferred_confidence_halves_in_thirty_days() {
        let c = ScoringConfig::default();
        let month = 30 * DAY_MS as i64;
        assert!((effective_confidence(&c, 0.8, true, month) - 0.4).abs() < 1e-5);
        assert_eq!(effective_confidence(&c, 0.8, false, month), 0.8);
    }

    #[test]
    fn an_inferred_memory_fades_below_the_floor_and_an_explicit_one_never() {
        let c = ScoringConfig::default();
        let month = 30 * DAY_MS as i64;
        // 0.8 → 0.4 after a month (above 0.3), 0.2 after two.
        assert!(!faded(&c, 0.8, true, month));
        assert!(faded(&c, 0.8, true, 2 * month));
        assert!(!faded(&c, 0.8, false, 100 * month));
    }
}
