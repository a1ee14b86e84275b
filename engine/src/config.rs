//! Configuration: where data lives, which embedder, and every tunable of §3–§4.

use std::path::PathBuf;
use std::sync::Arc;

use recall_indexer::{Embedder, Remote, ScanConfig};
use serde::Serialize;

use crate::clock::{Clock, SystemClock};
use crate::memory::Kind;
use crate::policy::ProposalPolicy;
use crate::redact::{DefaultRedactor, Redactor};
use crate::screen::{DefaultScreen, Screen};

/// Where the embedder comes from.
#[derive(Clone, Default)]
pub enum ModelSource {
    /// all-MiniLM-L6-v2 from `$RECALL_MODEL_DIR` when it is set (a directory
    /// without the model is then [`Error::ModelNotFound`](crate::Error::ModelNotFound)),
    /// else from the first of [`default_model_dirs`](crate::default_model_dirs)
    /// that holds it (see [`find_model_dir`](crate::find_model_dir)). When
    /// none does, the engine runs lexical-only and logs where it looked.
    #[default]
    Default,
    /// The model in this directory; missing files are an error. The default
    /// model's directory is `models/`; `scripts/setup.sh --mpnet` puts the
    /// stronger, slower all-mpnet-base-v2 (768-d) in
    /// `models/all-mpnet-base-v2/` ([`FastEmbedder::from_dir`](crate::FastEmbedder::from_dir)
    /// reads any such directory). A store keeps the width of the model it
    /// was written with: opening it with another width is an error.
    Dir(PathBuf),
    /// No embedder: lexical-only recall, text-equality dedup.
    None,
    /// A caller-supplied embedder.
    Custom(Arc<dyn Embedder>),
}

impl std::fmt::Debug for ModelSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelSource::Default => f.write_str("Default"),
            ModelSource::Dir(p) => write!(f, "Dir({})", p.display()),
            ModelSource::None => f.write_str("None"),
            ModelSource::Custom(e) => write!(f, "Custom({})", e.name()),
        }
    }
}

/// How raw BM25 scores become `b` ∈ [0, 1] (§4.3).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Bm25Normalization {
    /// `b = s / (s + k)`, independent of the other candidates (SPEC §4.3's
    /// default, k = 10; the engine's default is [`Bm25Normalization::Attainable`]).
    Saturation {
        /// The half-saturation score `k`.
        k: f32,
    },
    /// `b = s / max(s)` over the candidates (research only: breaks abstention).
    MaxOfQuery,
    /// `(s − min) / (max − min)` over the candidates (research only).
    MinMax,
    /// `b = min(1, s / Σ idf(t))` over the query's distinct terms: the share
    /// of the query's information a document matches, as scored for one
    /// occurrence of every term in a document of average length. Independent
    /// of the other candidates (so abstention still works), and a document
    /// matching only common words gets a small `b`. A term no document has
    /// counts as if one document had it.
    Attainable,
}

/// How much of the lexical half a candidate keeps, by how close the
/// embedding finds it to the query (not in the spec; see
/// [`ScoringConfig::lexical_support`]).
///
/// A match on one or two of the query's words says little when the meaning
/// is elsewhere: "Where is our new place?" shares only *new* with "Explain
/// Git to me like I'm new to it" (cosine 0.01), and that word was half the
/// query's information. Such a match keeps `b` in proportion to the
/// cosine's rise from [`LexicalSupport::unrelated_below`] to
/// [`LexicalSupport::related_from`]; a match on most of the query's
/// information ([`LexicalSupport::strong_match`]: an error code, a name, a
/// phrase) keeps all of it whatever the cosine. A memory that only asks
/// ([`crate::is_question`]) climbs the same ramp
/// [`LexicalSupport::question_offset`] higher: the words a request shares
/// with a question are mostly its topic ("Can you recommend podcasts about
/// rain?" for "Can you recommend a film for Friday night?").
///
/// ```
/// use recall::LexicalSupport;
/// let s = LexicalSupport::default();
/// assert_eq!(s.share(0.1, 0.5, false), 0.0); // unrelated in meaning: the shared word is chance
/// assert!((s.share(0.3, 0.5, false) - 0.5).abs() < 1e-6); // halfway up the ramp
/// assert_eq!(s.share(0.45, 0.5, false), 1.0); // related: the words count fully
/// assert_eq!(s.share(0.1, 0.8, false), 1.0); // most of the query's words: counts whatever the cosine
/// assert!((s.share(0.5, 0.5, true) - 0.5).abs() < 1e-6); // a request: halfway up its ramp
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LexicalSupport {
    /// At or below this cosine a partial lexical match counts nothing.
    /// Default 0.2.
    pub unrelated_below: f32,
    /// At or above this cosine the lexical half counts fully. Default 0.4.
    pub related_from: f32,
    /// A normalized BM25 `b` at or above this counts fully whatever the
    /// cosine. Default 0.6.
    pub strong_match: f32,
    /// How much higher both cosines of the ramp are for a memory that only
    /// asks. Default 0.2 (its ramp: 0.4 → 0.6); see
    /// [`ScoringConfig::lexical_support`].
    pub question_offset: f32,
}

impl Default for LexicalSupport {
    fn default() -> Self {
        LexicalSupport {
            unrelated_below: 0.2,
            related_from: 0.4,
            strong_match: 0.6,
            question_offset: 0.2,
        }
    }
}

impl LexicalSupport {
    /// The share of `b` a candidate with this cosine keeps, in [0, 1];
    /// `is_question`: the candidate only asks ([`crate::is_question`]).
    pub fn share(&self, cosine: f32, b: f32, is_question: bool) -> f32 {
        let offset = if is_question {
            self.question_offset
        } else {
            0.0
        };
        let (from, to) = (self.unrelated_below + offset, self.related_from + offset);
        if b >= self.strong_match || cosine >= to {
            return 1.0;
        }
        let span = to - from;
        if span <= 0.0 {
            // No ramp: a step at `to`, which this cosine is under.
            return 0.0;
        }
        ((cosine - from) / span).clamp(0.0, 1.0)
    }
}

/// What the abstention gate asks of a memory that only asks (every
/// sentence a question, [`crate::is_question`]), or of a sentence of one that
/// does, before it counts as evidence that the query can be answered (not
/// in the spec; see [`ScoringConfig::question_evidence`] and
/// [`crate::is_evidence`]).
///
/// A request a user once made ("What are some cheap date ideas in
/// Montreal?") is close in meaning to many later questions ("What did I
/// buy my husband for his birthday?", cosine 0.30) without stating
/// anything that answers them; a statement at the same cosine may well.
///
/// ```
/// use recall::{QuestionEvidence, ScoringConfig};
/// let config = ScoringConfig::default();
/// let asks = config.question_evidence.unwrap_or_default();
/// assert!(asks.min_cosine > config.min_evidence_cosine);
/// assert!(asks.min_lexical > config.min_evidence_lexical);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct QuestionEvidence {
    /// Cosine to the query a question must reach to answer it. Default 0.32.
    pub min_cosine: f32,
    /// Normalized BM25 `b` a question must reach to answer the query
    /// whatever its cosine. Default 0.6.
    pub min_lexical: f32,
}

impl Default for QuestionEvidence {
    fn default() -> Self {
        QuestionEvidence {
            min_cosine: 0.32,
            min_lexical: 0.6,
        }
    }
}

/// How much of a hit's lifts (its kind weight and a usage multiplier over
/// one) it gets, by its relevance as a share of the best candidate's: all of
/// them from [`LiftBand::full_from`], none at or below
/// [`LiftBand::none_below`], linearly between. Lifts order what is
/// relevant; they must not put a memory that hardly answers above one that
/// does (a pitfall at relevance .17 times 3 above the episode at .44 that
/// answers the question). Demotions (decay, drift, confidence) always apply.
///
/// ```
/// use recall::LiftBand;
/// let band = LiftBand::default();
/// assert_eq!(band.share(0.44, 0.44), 1.0);
/// assert_eq!(band.share(0.17, 0.44), 0.0);
/// assert!(band.share(0.3, 0.44) > 0.0 && band.share(0.3, 0.44) < 1.0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LiftBand {
    /// Relevance share at or below which a hit gets no lift. Default 0.5.
    pub none_below: f32,
    /// Relevance share from which a hit gets its lifts in full. Default 0.8.
    pub full_from: f32,
}

impl Default for LiftBand {
    fn default() -> Self {
        LiftBand {
            none_below: 0.5,
            full_from: 0.8,
        }
    }
}

impl LiftBand {
    /// The share of its lifts a hit of relevance `rel` gets when the best
    /// candidate's is `best`.
    pub fn share(&self, rel: f32, best: f32) -> f32 {
        if best <= 0.0 {
            return 1.0;
        }
        let r = rel / best;
        if r >= self.full_from {
            1.0
        } else if r <= self.none_below || self.full_from <= self.none_below {
            0.0
        } else {
            (r - self.none_below) / (self.full_from - self.none_below)
        }
    }

    /// `weight` with `share` of its lift above 1 (a weight below 1 is a
    /// demotion and stays whole).
    pub fn apply(weight: f32, share: f32) -> f32 {
        if weight > 1.0 {
            1.0 + (weight - 1.0) * share
        } else {
            weight
        }
    }
}

/// Weight of each kind in the score (§4.5).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct KindWeights {
    /// Default 3.0.
    pub pitfall: f32,
    /// Default 2.0.
    pub convention: f32,
    /// Default 1.5.
    pub note: f32,
    /// Default 1.0.
    pub session_outcome: f32,
    /// Default 2.0.
    pub preference: f32,
    /// Default 1.5.
    pub fact: f32,
    /// Default 1.0.
    pub episode: f32,
}

impl Default for KindWeights {
    fn default() -> Self {
        KindWeights {
            pitfall: 3.0,
            convention: 2.0,
            note: 1.5,
            session_outcome: 1.0,
            preference: 2.0,
            fact: 1.5,
            episode: 1.0,
        }
    }
}

impl KindWeights {
    /// Every kind weighs 1: the order is relevance (and the other factors)
    /// alone. For baselines and ablations.
    ///
    /// ```
    /// use recall::{Kind, KindWeights};
    /// assert_eq!(KindWeights::flat().of(Kind::Pitfall), KindWeights::flat().of(Kind::Episode));
    /// ```
    pub fn flat() -> KindWeights {
        KindWeights {
            pitfall: 1.0,
            convention: 1.0,
            note: 1.0,
            session_outcome: 1.0,
            preference: 1.0,
            fact: 1.0,
            episode: 1.0,
        }
    }

    /// The weight of `kind`.
    pub fn of(&self, kind: Kind) -> f32 {
        match kind {
            Kind::Pitfall => self.pitfall,
            Kind::Convention => self.convention,
            Kind::Note => self.note,
            Kind::SessionOutcome => self.session_outcome,
            Kind::Preference => self.preference,
            Kind::Fact => self.fact,
            Kind::Episode => self.episode,
        }
    }
}

/// The recall scorer's tunables (§4). Defaults follow the spec except where
/// a field's doc says otherwise (each measured change is in
/// `docs/MEASUREMENTS.md`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScoringConfig {
    /// Weight of the vector similarity in relevance. Default 0.55, as in the
    /// spec. Measured: `docs/MEASUREMENTS.md`, section
    /// `ScoringConfig::vector_weight` / `lexical_weight`.
    pub vector_weight: f32,
    /// Weight of the normalized BM25 score in relevance. Default 0.45.
    pub lexical_weight: f32,
    /// BM25 normalization. Default [`Bm25Normalization::Attainable`] (the spec
    /// says saturation with k = 10): it ranks better on LoCoMo and far better
    /// on paraphrased probes, abstention included. Measured:
    /// `docs/MEASUREMENTS.md`, section `ScoringConfig::bm25`.
    pub bm25: Bm25Normalization,
    /// How much of the lexical half a candidate keeps by its cosine to the
    /// query ([`LexicalSupport`]); `None`: all of it, as the spec says.
    ///
    /// Default `Some(LexicalSupport::default())`: nothing at cosine 0.2,
    /// all of it from 0.4, all of it whatever the cosine at `b` ≥ 0.6. For a
    /// memory that only asks the ramp is [`LexicalSupport::question_offset`]
    /// higher. Not in the spec: on paraphrased questions the lexical half
    /// mostly found words shared by chance, and the hybrid ranked below the
    /// embedding alone.
    ///
    /// Measured: `docs/MEASUREMENTS.md`, sections `ScoringConfig::lexical_support` and
    /// `LexicalSupport::question_offset`.
    pub lexical_support: Option<LexicalSupport>,
    /// Candidates taken from each of the vector and BM25 stages. Default 100.
    pub candidate_pool: usize,
    /// How many times the pool the BM25 stage asks the index for: the
    /// index still holds forgotten and superseded memories, which are
    /// dropped after the search. Default 1.25.
    pub lexical_overfetch: f32,
    /// Linked memories (`[[Title]]`) each hit brings along when they are
    /// not hits themselves (§4.7). Default 2.
    pub links_per_hit: usize,
    /// A linked memory's score as a share of the hit that brought it
    /// (§4.7). Default 0.5.
    pub link_share: f32,
    /// The abstention gate's meaning half: a query is answered only when
    /// some candidate has at least this cosine to it, or matches its words
    /// ([`ScoringConfig::min_evidence_lexical`]); otherwise the result is
    /// empty and says it abstained. Default 0.18 (0.25 before a memory that
    /// only asks had to reach more, [`ScoringConfig::question_evidence`]).
    /// Not in the spec, which drops candidates below `min_relevance` instead:
    /// with all-MiniLM-L6-v2 the top cosine alone tells an answerable question
    /// from an unanswerable one better than the hybrid relevance does.
    ///
    /// Measured: `docs/MEASUREMENTS.md`, section `ScoringConfig::min_evidence_cosine`.
    pub min_evidence_cosine: f32,
    /// The abstention gate measured from the store rather than from zero:
    /// when set, a candidate's cosine must also stand this far above the
    /// mean cosine of the memories in scope to the query
    /// ([`crate::Background`], [`crate::evidence_raise`]). Raw cosines
    /// move with the store: where every memory names its speaker, a
    /// question's closest memory is above .5 whether or not the store
    /// answers it. Default `None` (the fixed cut-off alone): at 0.15, tuned
    /// on the train side, it abstained on more unanswerable questions on
    /// every held-out set but cost the first probe generator's held-out
    /// seed more answerable questions than it saved (recall_any@10 .995 →
    /// .940), so it is not a default. Not in the spec.
    ///
    /// Measured: `docs/MEASUREMENTS.md`, section
    /// `ScoringConfig::min_evidence_margin`.
    pub min_evidence_margin: Option<f32>,
    /// The abstention gate's lexical half: a candidate whose normalized
    /// BM25 `b` reaches this answers the query whatever its cosine (an error
    /// code, a name). Default 0.4 (with [`Bm25Normalization::Attainable`], 40 %
    /// of the query's information); not in the spec, like the gate. 0 here
    /// turns the gate off. Measured: `docs/MEASUREMENTS.md`, section
    /// `ScoringConfig::min_evidence_lexical`.
    pub min_evidence_lexical: f32,
    /// What the gate asks instead of [`ScoringConfig::min_evidence_cosine`]
    /// and [`ScoringConfig::min_evidence_lexical`] of a memory that only
    /// asks, and the cosine of a sentence that asks
    /// ([`QuestionEvidence`], [`crate::is_evidence`]); `None`: the same as
    /// of any memory.
    ///
    /// Default `Some(QuestionEvidence::default())`: cosine 0.32 or `b` 0.6,
    /// with the statements' cosine lowered from 0.25 to 0.18. Not in the spec:
    /// a user's earlier requests answered questions they do not answer, and
    /// asking more of them lets the gate ask less of statements. The
    /// statements' 0.18 suits memories of a sentence or a few, as agents write
    /// them; a store of long memories does better at 0.2.
    ///
    /// Measured: `docs/MEASUREMENTS.md`, section `ScoringConfig::question_evidence`.
    pub question_evidence: Option<QuestionEvidence>,
    /// The score's factor for a memory that only asks
    /// ([`crate::is_question`]), shown as [`Breakdown::question`](crate::Breakdown::question);
    /// 1 ranks it like any other memory. Default 0.6.
    ///
    /// Not in the spec: a request the user made earlier is not an answer to
    /// what they ask now, yet in conversation such requests filled the top ten
    /// of most preference questions the vector alone missed. A turn that
    /// states something as well as asking is not affected. Lower weights gain
    /// little more and would cost a request that carries the fact asked about.
    ///
    /// Measured: `docs/MEASUREMENTS.md`, section `ScoringConfig::question_weight`.
    pub question_weight: f32,
    /// A further gate on the best candidate's hybrid relevance (§4.3's
    /// `min_relevance`, 0.30 in the spec). Default 0: the evidence gate
    /// above decides. The spec's gate dropped the evidence of half the
    /// answerable probes, and at 0.15 it still abstained worse than the
    /// evidence gate. Measured: `docs/MEASUREMENTS.md`, section `ScoringConfig::min_relevance`.
    pub min_relevance: f32,
    /// Once a query passes the gate, hits with relevance below this are
    /// still dropped (noise: no shared words and cosine under ~0.09).
    /// Default 0.05. The spec uses one threshold for both (every candidate
    /// below `min_relevance` dropped); that also dropped the evidence of
    /// answerable questions whose best hit was something else. Measured:
    /// `docs/MEASUREMENTS.md`, section `ScoringConfig::min_hit_relevance`.
    pub min_hit_relevance: f32,
    /// Hits whose relevance is below this share of the best hit's are
    /// dropped too. Default 0.3; not in the spec. When one memory clearly
    /// answers, unrelated ones — which a kind weight of 3 could otherwise lift
    /// above a relevant note — are not dealt with it; when every hit is weak,
    /// the weak evidence stays. Measured: `docs/MEASUREMENTS.md`, section
    /// `ScoringConfig::min_hit_share`.
    pub min_hit_share: f32,
    /// Kind weights.
    pub kind_weights: KindWeights,
    /// How much of its kind weight and usage lift a hit less relevant
    /// than the best gets ([`LiftBand`]); None: all of them always (the
    /// spec's product). Not in the spec.
    pub lift_band: Option<LiftBand>,
    /// Decay half-life in days (stretched by stability). Default 45.
    pub half_life_days: f64,
    /// Floor of the decay multiplier. Default 0.9 (the spec says 0.6), so
    /// age breaks ties between equally relevant memories without burying
    /// an old memory that answers the question. Measured: `docs/MEASUREMENTS.md`,
    /// section `ScoringConfig::decay_floor`.
    pub decay_floor: f32,
    /// Slope of the usage boost: a cited memory weighs
    /// `1 + usage_slope · ln(1 + citations)` (§5). Default 0.4.
    pub usage_slope: f32,
    /// Cap of the usage boost. Default 1.8.
    pub usage_cap: f32,
    /// Multiplier for memories dealt often and never cited. Default 0.75.
    pub ignored_penalty: f32,
    /// Impressions without citation that make a memory "ignored". Default 5.
    pub ignored_after: u32,
    /// Multiplier for memories on a drifted element. Default 0.6.
    pub drift_factor: f32,
    /// Half-life in days of an inferred memory's confidence. Default 30.
    pub inferred_half_life_days: f64,
    /// Inferred memories below this confidence leave recall. Default 0.3.
    pub min_confidence: f32,
    /// Newer versions first (not in the spec; see `updates.rs`): among the
    /// top k hits, a memory confirmed later than a hit above it, whose
    /// vector closest to the query (its whole vector or a sentence's) has
    /// at least this cosine with that hit's, is lifted to rank just above
    /// it, so an update ("the rent is now …") does not trail the value it
    /// replaced. Only a memory that is evidence on its own (cosine to the
    /// query ≥ [`ScoringConfig::min_evidence_cosine`]) is lifted, and pairs
    /// not both of [`ScoringConfig::update_kinds`] must also stand apart
    /// ([`ScoringConfig::update_isolation`]). `None` turns it off.
    ///
    /// Default 0.25: a restated value can be worded far from the old one
    /// ("joined Stripe this week" after "working at Boeing"). Measured:
    /// `docs/MEASUREMENTS.md`, section `ScoringConfig::update_similarity` (and
    /// `Newer versions first` above it).
    pub update_similarity: Option<f32>,
    /// The kinds whose memories state something a later memory can replace:
    /// two of them are versions whenever they are similar enough, so a
    /// chain of three rents ends newest first. Default fact, preference and
    /// convention. A pair with a memory of any other kind (episodes, notes
    /// and outcomes record what happened) is a version pair only when it
    /// stands apart ([`ScoringConfig::update_isolation`]): lifting every
    /// LoCoMo turn as if it stated something cost much of its nDCG@10.
    /// Measured: `docs/MEASUREMENTS.md`, section `ScoringConfig::update_kinds`.
    pub update_kinds: Vec<Kind>,
    /// A pair with a memory outside [`ScoringConfig::update_kinds`] is lifted
    /// only when no other hit among the top k has this cosine or more
    /// (vectors closest to the query, as for `update_similarity`) to either
    /// of the two: a conversation that keeps coming back to a topic leaves
    /// a thread of similar turns, which are different events, not versions.
    /// `None`: such pairs are never lifted.
    ///
    /// Default 0.5: lower leaves real updates unlifted; higher lets similar
    /// turns of one thread pass for versions, which costs LoCoMo. Measured:
    /// `docs/MEASUREMENTS.md`, section `ScoringConfig::update_isolation`.
    pub update_isolation: Option<f32>,
    /// A pair of [`ScoringConfig::update_kinds`] memories is lifted only
    /// when the newer one answers the query about as well as the older hit:
    /// its relevance (`rel`, before kind weight and decay) is at least this
    /// share of the older's. `None`: any relevance (the pair's similarity
    /// decides alone).
    ///
    /// Why: memories that state something cluster (agents write many facts
    /// about one service or person from a few patterns), so a later memory
    /// about a neighbouring fact is nearly always similar to the hit that
    /// answers; without this test the lift ordered such clusters by recency.
    /// An update says the same thing as what it replaces, with another value,
    /// so it answers the query about as well. A pair that stands apart
    /// ([`ScoringConfig::update_isolation`]) is lifted without this test.
    ///
    /// Default 0.9. Measured: `docs/MEASUREMENTS.md`, section
    /// `ScoringConfig::update_relevance_share`.
    pub update_relevance_share: Option<f32>,
    /// The unknown-name rule of abstention: a query that names someone or
    /// something ([`crate::named_words`]: "Caroline", "Stripe", "JWT") when
    /// no memory the caller may read mentions any of those names abstains,
    /// whatever the cosines, unless it asks for advice
    /// ([`crate::asks_for_advice`], [`crate::names_unknown`]). A question about
    /// what this memory never heard of has no answer in it, and no cosine
    /// scale tells so: where every memory names its speaker, a question
    /// about someone else's life sits as close to the memories as the
    /// owner's own questions do. The names that were not found are in
    /// [`crate::RecallResult::unknown_names`]. Default true; not in the spec.
    ///
    /// Measured: `docs/MEASUREMENTS.md`, section `ScoringConfig::unknown_names`.
    pub unknown_names: bool,
    /// Nearest-neighbour scan settings.
    #[serde(skip)]
    pub scan: ScanConfig,
}

impl Default for ScoringConfig {
    fn default() -> Self {
        ScoringConfig {
            vector_weight: 0.55,
            lexical_weight: 0.45,
            bm25: Bm25Normalization::Attainable,
            lexical_support: Some(LexicalSupport::default()),
            candidate_pool: 100,
            lexical_overfetch: 1.25,
            links_per_hit: 2,
            link_share: 0.5,
            min_evidence_cosine: 0.18,
            min_evidence_margin: None,
            min_evidence_lexical: 0.4,
            question_evidence: Some(QuestionEvidence::default()),
            question_weight: 0.6,
            min_relevance: 0.0,
            min_hit_relevance: 0.05,
            min_hit_share: 0.3,
            kind_weights: KindWeights::default(),
            lift_band: Some(LiftBand::default()),
            half_life_days: 45.0,
            decay_floor: 0.9,
            usage_slope: 0.4,
            usage_cap: 1.8,
            ignored_penalty: 0.75,
            ignored_after: 5,
            drift_factor: 0.6,
            inferred_half_life_days: 30.0,
            min_confidence: 0.3,
            update_similarity: Some(0.25),
            update_kinds: vec![Kind::Fact, Kind::Preference, Kind::Convention],
            update_isolation: Some(0.5),
            update_relevance_share: Some(0.9),
            unknown_names: true,
            scan: ScanConfig::default(),
        }
    }
}

/// The write path's tunables (§3).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WriteConfig {
    /// Cosine at or above which a write confirms the existing memory. Default 0.94.
    pub dedup_threshold: f32,
    /// Cosine at or above which a stored memory reports its neighbour. Default 0.82.
    pub similar_threshold: f32,
    /// Longest content accepted, in bytes. Default 16 KiB.
    pub max_content_bytes: usize,
    /// Records buffered in the write-ahead log before a background flush
    /// writes them to the tables. Default 65,536
    /// ([`recall_indexer::DEFAULT_FLUSH_EVERY`], which says why).
    pub flush_every: usize,
    /// Table flushes between background compactions of the tables' small
    /// fragments; 0 never compacts. Default 16.
    pub compact_every: usize,
    /// How the write path searches the store for a write's near copies:
    /// exact up to 1,024 candidate rows, beyond that the sign-code scan with
    /// an exact re-scoring pool of 64, visiting the 2 % of a partitioned
    /// tenant's lists nearest the write (a near copy sits in the write's own
    /// list or a neighbouring one), so a bulk import is not an exhaustive
    /// scan per item. `min_cosine` is always the similar threshold.
    #[serde(skip)]
    pub near_scan: ScanConfig,
    /// Stored memories a write is compared with (its nearest); the review
    /// queue's similar pairs look at as many per memory. Default 6.
    pub near_candidates: usize,
    /// Most neighbours in the similar band a stored write reports
    /// ([`crate::Remembered::Stored`]'s `similar_to`). Default 5.
    pub max_similar: usize,
    /// A tenant's vector set of at least this many rows keeps its full
    /// blocks of `f32` rows (16,384 rows each) in files under
    /// `DATA/derived/vectors/`, mapped, instead of on the heap; recall's
    /// exact re-scoring reads those rows from the files. The rows then sit
    /// in the page cache, which the kernel can take back, at the cost of a
    /// read per re-scored row. Default 262,144: in a smaller set the rows
    /// are read so often that nearly all of them stay resident anyway (see
    /// docs/MEASUREMENTS.md). `usize::MAX` keeps every row on the heap.
    pub vector_files_from: usize,
}

impl Default for WriteConfig {
    fn default() -> Self {
        WriteConfig {
            dedup_threshold: 0.94,
            similar_threshold: 0.82,
            max_content_bytes: 16 * 1024,
            flush_every: recall_indexer::DEFAULT_FLUSH_EVERY,
            compact_every: 16,
            near_scan: ScanConfig {
                exact_limit: 1024,
                rescore_pool: 64,
                probe_share: 0.02,
                min_cosine: None,
            },
            near_candidates: 6,
            max_similar: 5,
            vector_files_from: 262_144,
        }
    }
}

/// Where the cosine between a write and a stored memory falls (§3): the one
/// test behind deduplication, the `similar_to` report and the review queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Band {
    /// At or above [`WriteConfig::dedup_threshold`]: the write confirms the
    /// stored memory instead of adding a copy.
    NearCopy,
    /// At or above [`WriteConfig::similar_threshold`], below the dedup
    /// threshold: stored, and reported as similar.
    Similar,
    /// Below the similar threshold: unrelated for the write path.
    Apart,
}

impl WriteConfig {
    /// The band `cosine` falls in.
    ///
    /// ```
    /// use recall::{Band, WriteConfig};
    /// let write = WriteConfig::default();
    /// assert_eq!(write.band(0.95), Band::NearCopy);
    /// assert_eq!(write.band(0.90), Band::Similar);
    /// assert_eq!(write.band(0.50), Band::Apart);
    /// ```
    pub fn band(&self, cosine: f32) -> Band {
        if cosine >= self.dedup_threshold {
            Band::NearCopy
        } else if cosine >= self.similar_threshold {
            Band::Similar
        } else {
            Band::Apart
        }
    }
}

/// Everything [`crate::Engine::open`] needs.
///
/// ```
/// use recall::{Config, ModelSource};
/// let config = Config::new("./recall-data").model(ModelSource::None);
/// assert_eq!(config.scoring.vector_weight, 0.55);
/// assert_eq!(config.write.dedup_threshold, 0.94);
/// ```
#[derive(Clone)]
pub struct Config {
    /// The data directory. Default `./recall-data`. With
    /// [`Config::remote`] set it is the local cache (the lock, the BM25
    /// index, the audit log, the vector files and partitions).
    pub data_dir: PathBuf,
    /// Tables and write-ahead log on S3-compatible object storage instead
    /// of in `data_dir` (cargo feature `s3`, on by default). Default none.
    pub remote: Option<Remote>,
    /// The embedder.
    pub model: ModelSource,
    /// Recall tunables.
    pub scoring: ScoringConfig,
    /// Write tunables.
    pub write: WriteConfig,
    /// The clock (inject a [`crate::FixedClock`] for replays and tests).
    pub clock: Arc<dyn Clock>,
    /// Replaces secrets and personal data before anything is stored or
    /// embedded (§7). Default [`DefaultRedactor`]; `None` turns redaction off.
    pub redactor: Option<Arc<dyn Redactor>>,
    /// Holds back content that tries to instruct the agent (§7). Default
    /// [`DefaultScreen`]; `None` turns screening off.
    pub screen: Option<Arc<dyn Screen>>,
    /// Who the audit log names for calls that take no actor (forget,
    /// supersede, confirm). Default none.
    pub actor: Option<String>,
    /// Which banks hold an agent's writes as proposals until a person
    /// accepts them. Default [`ProposalPolicy::default`] (`repo:*` and
    /// `org` propose).
    pub proposals: ProposalPolicy,
}

impl Config {
    /// Defaults with the given data directory.
    pub fn new(data_dir: impl Into<PathBuf>) -> Config {
        Config {
            data_dir: data_dir.into(),
            remote: None,
            model: ModelSource::Default,
            scoring: ScoringConfig::default(),
            write: WriteConfig::default(),
            clock: Arc::new(SystemClock),
            redactor: Some(Arc::new(DefaultRedactor)),
            screen: Some(Arc::new(DefaultScreen)),
            actor: None,
            proposals: ProposalPolicy::default(),
        }
    }

    /// Keeps the tables and the write-ahead log at `remote` (an
    /// `s3://bucket/prefix` location); `data_dir` becomes the local cache.
    /// A write is acknowledged once its log object is in the bucket.
    ///
    /// ```
    /// use recall::{Config, Remote};
    /// let remote = Remote::new("s3://memories/team-a")?
    ///     .option("aws_endpoint", "http://127.0.0.1:8333")
    ///     .option("aws_allow_http", "true");
    /// let config = Config::new("/var/cache/recall/team-a").remote(remote);
    /// assert_eq!(config.remote.as_ref().map(|r| r.uri()), Some("s3://memories/team-a"));
    /// # Ok::<(), recall::IndexerError>(())
    /// ```
    pub fn remote(mut self, remote: Remote) -> Self {
        self.remote = Some(remote);
        self
    }

    /// Sets which banks hold an agent's writes as proposals
    /// ([`ProposalPolicy::direct`]: none).
    pub fn proposals(mut self, proposals: ProposalPolicy) -> Self {
        self.proposals = proposals;
        self
    }

    /// Sets the redactor (`None`: store text as given).
    pub fn redactor(mut self, redactor: Option<Arc<dyn Redactor>>) -> Self {
        self.redactor = redactor;
        self
    }

    /// Sets the injection screen (`None`: never quarantine automatically).
    pub fn screen(mut self, screen: Option<Arc<dyn Screen>>) -> Self {
        self.screen = screen;
        self
    }

    /// Sets the actor the audit log names for calls that take none.
    pub fn actor(mut self, actor: impl Into<String>) -> Self {
        self.actor = Some(actor.into());
        self
    }

    /// Sets the embedder source.
    pub fn model(mut self, model: ModelSource) -> Self {
        self.model = model;
        self
    }

    /// Sets the clock.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Sets the scoring tunables.
    pub fn scoring(mut self, scoring: ScoringConfig) -> Self {
        self.scoring = scoring;
        self
    }

    /// Sets the write tunables.
    pub fn write(mut self, write: WriteConfig) -> Self {
        self.write = write;
        self
    }
}

impl Default for Config {
    fn default() -> Self {
        Config::new("./recall-data")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The documented thresholds, pinned, and the band edges on either side.
    #[test]
    fn the_bands_turn_at_the_documented_thresholds() {
        let write = WriteConfig::default();
        assert_eq!(
            (write.dedup_threshold, write.similar_threshold),
            (0.94, 0.82)
        );
        assert_eq!(write.band(0.941), Band::NearCopy);
        assert_eq!(write.band(0.94), Band::NearCopy);
        assert_eq!(write.band(0.939), Band::Similar);
        assert_eq!(write.band(0.821), Band::Similar);
        assert_eq!(write.band(0.82), Band::Similar);
        assert_eq!(write.band(0.819), Band::Apart);
        assert_eq!((write.near_candidates, write.max_similar), (6, 5));
    }
}
