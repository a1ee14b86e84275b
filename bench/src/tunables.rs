//! Every scorer tunable by name, in one table: how to set it from text,
//! how to read it back as text and as a plot coordinate. `sweep` builds its
//! points from this table (`--set NAME=V1,V2,…` for any row; its named flags
//! are shorthands for rows), so a new tunable in [`ScoringConfig`] costs one
//! row here to be swept, tabulated, written to JSON and plotted.
//!
//! ```
//! use recall::ScoringConfig;
//! use recall_bench::tunables::find;
//! let mut config = ScoringConfig::default();
//! let share = find("link_share")?;
//! (share.set)(&mut config, "0.3")?;
//! assert_eq!((share.get)(&config), "0.3");
//! assert_eq!((share.axis)(&config), Some(0.30000001192092896));
//! assert!(find("no_such_knob").is_err());
//! # Ok::<(), anyhow::Error>(())
//! ```

use anyhow::Context;
use recall::{
    Bm25Normalization, KindWeights, LexicalSupport, LiftBand, QuestionEvidence, ScoringConfig,
};

/// One tunable.
#[derive(Clone, Copy)]
pub struct Tunable {
    /// Its name (the [`ScoringConfig`] field's, where there is one).
    pub name: &'static str,
    /// What values look like, for error messages and `--help`.
    pub values: &'static str,
    /// Sets it from text.
    pub set: fn(&mut ScoringConfig, &str) -> anyhow::Result<()>,
    /// Its value as text (what `set` reads back to the same setting).
    pub get: fn(&ScoringConfig) -> String,
    /// Its value as a plot coordinate (None: off, or not a number).
    pub axis: fn(&ScoringConfig) -> Option<f64>,
    /// Plotted on a log scale.
    pub log_axis: bool,
}

impl std::fmt::Debug for Tunable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tunable").field("name", &self.name).finish()
    }
}

/// A number.
fn number<T: std::str::FromStr>(name: &str, text: &str) -> anyhow::Result<T>
where
    T::Err: std::error::Error + Send + Sync + 'static,
{
    text.trim()
        .parse()
        .with_context(|| format!("{name} {text:?}: not a number"))
}

/// `off` or a number.
fn optional(name: &str, text: &str) -> anyhow::Result<Option<f32>> {
    match text.trim() {
        "off" => Ok(None),
        v => number(name, v).map(Some),
    }
}

/// `off` or the number.
fn optional_label(value: Option<f32>) -> String {
    value.map_or("off".into(), |v| v.to_string())
}

/// A row for an `f32` field.
macro_rules! real {
    ($name:literal, $field:ident) => {
        Tunable {
            name: $name,
            values: "a number",
            set: |c, v| {
                c.$field = number($name, v)?;
                Ok(())
            },
            get: |c| c.$field.to_string(),
            axis: |c| Some(f64::from(c.$field)),
            log_axis: false,
        }
    };
}

/// A row for an `Option<f32>` field (`off` for None).
macro_rules! optional_real {
    ($name:literal, $field:ident) => {
        Tunable {
            name: $name,
            values: "a number or `off`",
            set: |c, v| {
                c.$field = optional($name, v)?;
                Ok(())
            },
            get: |c| optional_label(c.$field),
            axis: |c| c.$field.map(f64::from),
            log_axis: false,
        }
    };
}

/// The table, in the order sweeps list them.
pub fn tunables() -> Vec<Tunable> {
    vec![
        Tunable {
            name: "vector_weight",
            values: "a number in [0, 1] (the lexical weight is 1 − w)",
            set: |c, v| {
                c.vector_weight = number("vector_weight", v)?;
                c.lexical_weight = 1.0 - c.vector_weight;
                Ok(())
            },
            get: |c| c.vector_weight.to_string(),
            axis: |c| Some(f64::from(c.vector_weight)),
            log_axis: false,
        },
        Tunable {
            name: "bm25",
            values: "`sat:K`, `att`, `max` or `minmax`",
            set: |c, v| {
                c.bm25 = parse_bm25(v)?;
                Ok(())
            },
            get: |c| bm25_label(c.bm25),
            axis: |c| match c.bm25 {
                Bm25Normalization::Saturation { k } => Some(f64::from(k)),
                _ => None,
            },
            log_axis: true,
        },
        Tunable {
            name: "half_life_days",
            values: "a number of days",
            set: |c, v| {
                c.half_life_days = number("half_life_days", v)?;
                Ok(())
            },
            get: |c| c.half_life_days.to_string(),
            axis: |c| Some(c.half_life_days),
            log_axis: true,
        },
        real!("decay_floor", decay_floor),
        real!("min_evidence_cosine", min_evidence_cosine),
        optional_real!("min_evidence_margin", min_evidence_margin),
        real!("min_evidence_lexical", min_evidence_lexical),
        real!("min_relevance", min_relevance),
        real!("min_hit_relevance", min_hit_relevance),
        real!("min_hit_share", min_hit_share),
        Tunable {
            name: "candidate_pool",
            values: "a count",
            set: |c, v| {
                c.candidate_pool = number("candidate_pool", v)?;
                Ok(())
            },
            get: |c| c.candidate_pool.to_string(),
            axis: |c| Some(c.candidate_pool as f64),
            log_axis: true,
        },
        optional_real!("update_similarity", update_similarity),
        optional_real!("update_isolation", update_isolation),
        optional_real!("update_relevance_share", update_relevance_share),
        Tunable {
            name: "lexical_support",
            values: "`LO:HI`, `LO:HI:OFFSET` or `off`",
            set: |c, v| {
                c.lexical_support = parse_support(v)?;
                Ok(())
            },
            get: |c| support_label(c.lexical_support),
            axis: |c| c.lexical_support.map(|s| f64::from(s.related_from)),
            log_axis: false,
        },
        Tunable {
            name: "question_evidence",
            values: "`COS:LEX` or `off`",
            set: |c, v| {
                c.question_evidence = parse_question(v)?;
                Ok(())
            },
            get: |c| question_label(c.question_evidence),
            axis: |c| c.question_evidence.map(|q| f64::from(q.min_cosine)),
            log_axis: false,
        },
        real!("question_weight", question_weight),
        Tunable {
            name: "lift_band",
            values: "`NONE_BELOW:FULL_FROM` or `off`",
            set: |c, v| {
                c.lift_band = parse_band(v)?;
                Ok(())
            },
            get: |c| {
                c.lift_band.map_or("off".into(), |b| {
                    format!("{}:{}", b.none_below, b.full_from)
                })
            },
            axis: |c| c.lift_band.map(|b| f64::from(b.full_from)),
            log_axis: false,
        },
        Tunable {
            name: "kind_weights",
            values: "`spec` (the default weights) or `flat`",
            set: |c, v| {
                c.kind_weights = match v.trim() {
                    "spec" => KindWeights::default(),
                    "flat" => KindWeights::flat(),
                    other => anyhow::bail!("kind_weights {other:?}: `spec` or `flat`"),
                };
                Ok(())
            },
            get: |c| {
                if c.kind_weights == KindWeights::flat() {
                    "flat".into()
                } else if c.kind_weights == KindWeights::default() {
                    "spec".into()
                } else {
                    format!("{:?}", c.kind_weights)
                }
            },
            axis: |_| None,
            log_axis: false,
        },
        Tunable {
            name: "unknown_names",
            values: "`on` or `off`",
            set: |c, v| {
                c.unknown_names = match v.trim() {
                    "on" => true,
                    "off" => false,
                    other => anyhow::bail!("unknown_names {other:?}: `on` or `off`"),
                };
                Ok(())
            },
            get: |c| if c.unknown_names { "on" } else { "off" }.into(),
            axis: |_| None,
            log_axis: false,
        },
        real!("usage_slope", usage_slope),
        real!("usage_cap", usage_cap),
        real!("drift_factor", drift_factor),
        real!("link_share", link_share),
        Tunable {
            name: "links_per_hit",
            values: "a count",
            set: |c, v| {
                c.links_per_hit = number("links_per_hit", v)?;
                Ok(())
            },
            get: |c| c.links_per_hit.to_string(),
            axis: |c| Some(c.links_per_hit as f64),
            log_axis: false,
        },
    ]
}

/// The row named `name`.
pub fn find(name: &str) -> anyhow::Result<Tunable> {
    let table = tunables();
    table
        .iter()
        .find(|t| t.name == name)
        .copied()
        .with_context(|| {
            let names: Vec<&str> = table.iter().map(|t| t.name).collect();
            format!("no tunable {name:?} (one of: {})", names.join(", "))
        })
}

/// Parses a BM25 normalization: `sat:K`, `att`, `max`, `minmax`.
pub fn parse_bm25(text: &str) -> anyhow::Result<Bm25Normalization> {
    match text.trim() {
        "max" => Ok(Bm25Normalization::MaxOfQuery),
        "att" => Ok(Bm25Normalization::Attainable),
        "minmax" => Ok(Bm25Normalization::MinMax),
        other => {
            let k = other.strip_prefix("sat:").with_context(|| {
                format!("unknown BM25 normalization {other:?} (sat:K, att, max, minmax)")
            })?;
            Ok(Bm25Normalization::Saturation { k: k.parse()? })
        }
    }
}

/// `sat:K`, `att`, `max` or `minmax`.
pub fn bm25_label(n: Bm25Normalization) -> String {
    match n {
        Bm25Normalization::Saturation { k } => format!("sat:{k}"),
        Bm25Normalization::MaxOfQuery => "max".into(),
        Bm25Normalization::MinMax => "minmax".into(),
        Bm25Normalization::Attainable => "att".into(),
    }
}

/// `off`, or `LO:HI:OFFSET`.
pub fn support_label(support: Option<LexicalSupport>) -> String {
    support.map_or("off".into(), |s| {
        format!(
            "{}:{}:{}",
            s.unrelated_below, s.related_from, s.question_offset
        )
    })
}

/// `A:B:…` as numbers (`None` if one is not a number).
fn numbers(s: &str) -> Option<Vec<f32>> {
    s.split(':').map(|n| n.trim().parse().ok()).collect()
}

/// A lexical-support ramp: `off`, or `LO:HI` (LO ≤ HI) with an optional
/// `:OFFSET` for memories that only ask; the strong-match level (and an
/// offset not given) at the defaults.
pub fn parse_support(s: &str) -> anyhow::Result<Option<LexicalSupport>> {
    let s = s.trim();
    if s == "off" {
        return Ok(None);
    }
    let default = LexicalSupport::default();
    let ramp = |lo: f32, hi: f32, question_offset: f32| LexicalSupport {
        unrelated_below: lo,
        related_from: hi,
        question_offset,
        ..default
    };
    match numbers(s).as_deref() {
        Some(&[lo, hi]) if lo <= hi => Ok(Some(ramp(lo, hi, default.question_offset))),
        Some(&[lo, hi, offset]) if lo <= hi => Ok(Some(ramp(lo, hi, offset))),
        _ => anyhow::bail!(
            "lexical support {s:?}: `LO:HI` with LO ≤ HI (e.g. 0.2:0.4), \
             `LO:HI:OFFSET` (e.g. 0.2:0.4:0.2), or `off`"
        ),
    }
}

/// `off`, or `COS:LEX`.
pub fn question_label(question: Option<QuestionEvidence>) -> String {
    question.map_or("off".into(), |q| {
        format!("{}:{}", q.min_cosine, q.min_lexical)
    })
}

/// What the gate asks of a memory that only asks: `off` or `COS:LEX`.
pub fn parse_question(s: &str) -> anyhow::Result<Option<QuestionEvidence>> {
    let s = s.trim();
    if s == "off" {
        return Ok(None);
    }
    match numbers(s).as_deref() {
        Some(&[min_cosine, min_lexical]) => Ok(Some(QuestionEvidence {
            min_cosine,
            min_lexical,
        })),
        _ => anyhow::bail!("question evidence {s:?}: `COS:LEX` (e.g. 0.32:0.6), or `off`"),
    }
}

/// A lift band: `off` or `NONE_BELOW:FULL_FROM` (NONE_BELOW ≤ FULL_FROM).
pub fn parse_band(s: &str) -> anyhow::Result<Option<LiftBand>> {
    let s = s.trim();
    if s == "off" {
        return Ok(None);
    }
    match numbers(s).as_deref() {
        Some(&[none_below, full_from]) if none_below <= full_from => Ok(Some(LiftBand {
            none_below,
            full_from,
        })),
        _ => anyhow::bail!("lift band {s:?}: `NONE_BELOW:FULL_FROM` (e.g. 0.5:0.8), or `off`"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_reads_back_what_it_was_set_to_and_names_are_unique() {
        let table = tunables();
        let mut names: Vec<&str> = table.iter().map(|t| t.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), table.len());
        for t in &table {
            // Its default's text sets the same default back.
            let defaults = ScoringConfig::default();
            let mut config = ScoringConfig::default();
            (t.set)(&mut config, &(t.get)(&defaults)).unwrap();
            assert_eq!((t.get)(&config), (t.get)(&defaults), "{}", t.name);
            assert!((t.set)(&mut config, "not a value").is_err(), "{}", t.name);
        }
    }

    #[test]
    fn a_row_changes_its_field_and_nothing_else() {
        let mut config = ScoringConfig::default();
        (find("vector_weight").unwrap().set)(&mut config, "0.7").unwrap();
        assert_eq!(config.vector_weight, 0.7);
        assert!((config.lexical_weight - 0.3).abs() < 1e-6);
        (find("lift_band").unwrap().set)(&mut config, "off").unwrap();
        assert_eq!(config.lift_band, None);
        let changed = ScoringConfig {
            vector_weight: 0.7,
            lexical_weight: config.lexical_weight,
            lift_band: None,
            ..ScoringConfig::default()
        };
        assert_eq!(config, changed);
    }

    #[test]
    fn a_lexical_support_ramp_is_lo_colon_hi_or_off() {
        let default = LexicalSupport::default();
        let ramp = parse_support(" 0.1:0.3 ").unwrap().unwrap();
        assert_eq!((ramp.unrelated_below, ramp.related_from), (0.1, 0.3));
        assert_eq!(ramp.strong_match, default.strong_match);
        assert_eq!(ramp.question_offset, default.question_offset);
        assert_eq!(support_label(Some(ramp)), "0.1:0.3:0.2");
        let offset = parse_support("0.1:0.3:0.05").unwrap().unwrap();
        assert_eq!(offset.question_offset, 0.05);
        assert_eq!((offset.unrelated_below, offset.related_from), (0.1, 0.3));
        assert_eq!(parse_support("off").unwrap(), None);
        for bad in [
            "0.4:0.2",
            "0.3",
            "a:b",
            "",
            "0.1:0.3:x",
            "off:0.1",
            "0.1:0.3:0.1:0.2",
        ] {
            assert!(parse_support(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn question_evidence_is_cos_colon_lex_or_off() {
        let question = parse_question(" 0.3:0.55 ").unwrap().unwrap();
        assert_eq!((question.min_cosine, question.min_lexical), (0.3, 0.55));
        assert_eq!(question_label(Some(question)), "0.3:0.55");
        assert_eq!(parse_question("off").unwrap(), None);
        for bad in ["0.3", "a:0.6", "0.3:", ""] {
            assert!(parse_question(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
