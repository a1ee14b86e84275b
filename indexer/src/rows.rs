//! The persisted shapes: memory rows (immutable once written) and events
//! (everything that changes afterwards).
//!
//! The indexer stores strings and numbers; what they mean (kinds, trust, the
//! scoring) is the engine's business.

use serde::{Deserialize, Serialize};

/// One memory as written to the `memories` table. Never rewritten: later
/// changes (confirmations, forgetting, supersession, usage, drift) are
/// [`EventRow`]s, so a recall never rewrites table rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryRow {
    /// Store-wide sequence number, assigned by [`crate::Store`]; also the
    /// lexical index's document key.
    pub seq: u64,
    /// UUID v7, as text.
    pub id: String,
    /// Hard partition.
    pub tenant: String,
    /// Scope inside the tenant.
    pub bank: String,
    /// Memory kind, as text.
    pub kind: String,
    /// Optional unique title.
    pub title: Option<String>,
    /// The (redacted) text.
    pub content: String,
    /// Things the memory is about.
    pub elements: Vec<String>,
    /// `explicit` or `inferred`.
    pub source: String,
    /// `user`, `agent`, `external` or `quarantined`.
    pub trust: String,
    /// Free provenance: the agent that wrote it.
    pub agent: Option<String>,
    /// Free provenance: the session it came from.
    pub session_id: Option<String>,
    /// Confidence in (0, 1].
    pub confidence: f32,
    /// When the fact was said (ms since the Unix epoch).
    pub observed_at_ms: i64,
    /// When it was written (ms since the Unix epoch).
    pub created_at_ms: i64,
    /// When it leaves recall, if ever (ms since the Unix epoch).
    pub expires_at_ms: Option<i64>,
    /// The id this memory supersedes, if any.
    pub supersedes: Option<String>,
    /// The content's embedding, when an embedder was configured.
    #[serde(with = "wire::optional")]
    pub vector: Option<Vec<f32>>,
    /// One embedding per sentence of a content of several sentences (the
    /// engine's recall scores a memory by the closest of these and
    /// [`MemoryRow::vector`]); empty for a one-sentence content, a memory
    /// written without an embedder (its backfilled [`VectorRow`] carries
    /// them) or with a caller's own vector, and memories written before
    /// sentences were embedded.
    #[serde(default, skip_serializing_if = "Vec::is_empty", with = "wire::list")]
    pub sentences: Vec<Vec<f32>>,
}

/// A change to an existing memory, appended to the `events` table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventRow {
    /// Store-wide sequence number, assigned by [`crate::Store`].
    pub seq: u64,
    /// The tenant of the memory it changes.
    pub tenant: String,
    /// The memory it changes.
    pub memory_id: String,
    /// What happened (`confirm`, `forget`, `superseded_by`, …; the engine defines them).
    pub op: String,
    /// When it happened (ms since the Unix epoch).
    pub at_ms: i64,
    /// An argument whose meaning depends on `op` (e.g. the superseding id).
    pub arg: Option<String>,
}

/// A vector computed after the memory was written (backfill, once an
/// embedder is configured for a store written without one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VectorRow {
    /// Store-wide sequence number, assigned by [`crate::Store`].
    pub seq: u64,
    /// The tenant of the memory.
    pub tenant: String,
    /// The memory it belongs to.
    pub memory_id: String,
    /// The embedding.
    #[serde(with = "wire::required")]
    pub vector: Vec<f32>,
    /// The sentence vectors, as [`MemoryRow::sentences`].
    #[serde(default, skip_serializing_if = "Vec::is_empty", with = "wire::list")]
    pub sentences: Vec<Vec<f32>>,
}

/// One durable write: a new memory, an event, or a backfilled vector.
// Most records are memories, so boxing the large variant would only add an
// allocation per write.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Record {
    /// A new memory row.
    Memory(MemoryRow),
    /// A change to an existing memory.
    Event(EventRow),
    /// A backfilled vector.
    Vector(VectorRow),
}

impl Record {
    /// The record's sequence number.
    pub fn seq(&self) -> u64 {
        match self {
            Record::Memory(m) => m.seq,
            Record::Event(e) => e.seq,
            Record::Vector(v) => v.seq,
        }
    }

    pub(crate) fn set_seq(&mut self, seq: u64) {
        match self {
            Record::Memory(m) => m.seq = seq,
            Record::Event(e) => e.seq = seq,
            Record::Vector(v) => v.seq = seq,
        }
    }
}

/// How vectors travel in the write-ahead log: the f32 little-endian bytes as
/// hex (exact, and several times cheaper to write and read than decimal
/// floats in JSON). Logs written before this encoding held arrays of
/// numbers; both are read.
mod wire {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Encoded {
        Hex(String),
        Floats(Vec<f32>),
    }

    fn to_hex(v: &[f32]) -> Vec<u8> {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        // Bytes first: `String::push` encodes each char, a visible cost at
        // 3 KB of hex per vector.
        let mut out = Vec::with_capacity(v.len() * 8);
        for byte in v.iter().flat_map(|x| x.to_le_bytes()) {
            out.push(DIGITS[usize::from(byte >> 4)]);
            out.push(DIGITS[usize::from(byte & 0xf)]);
        }
        out
    }

    /// The hex digits as a JSON string.
    fn hex_str<E: serde::ser::Error>(hex: &[u8]) -> Result<&str, E> {
        std::str::from_utf8(hex).map_err(E::custom)
    }

    fn from_hex<E: serde::de::Error>(text: &str) -> Result<Vec<f32>, E> {
        let nibble = |c: u8| match c {
            b'0'..=b'9' => Ok(c - b'0'),
            b'a'..=b'f' => Ok(c - b'a' + 10),
            _ => Err(E::custom("vector: not lowercase hex")),
        };
        let bytes = text.as_bytes();
        if !bytes.len().is_multiple_of(8) {
            return Err(E::custom("vector: hex length is not a multiple of 8"));
        }
        bytes
            .chunks_exact(8)
            .map(|c| {
                let mut le = [0u8; 4];
                for (i, pair) in c.chunks_exact(2).enumerate() {
                    le[i] = nibble(pair[0])? << 4 | nibble(pair[1])?;
                }
                Ok(f32::from_le_bytes(le))
            })
            .collect()
    }

    fn decode<E: serde::de::Error>(encoded: Encoded) -> Result<Vec<f32>, E> {
        match encoded {
            Encoded::Hex(text) => from_hex(&text),
            Encoded::Floats(v) => Ok(v),
        }
    }

    pub(super) mod required {
        use super::*;

        pub(crate) fn serialize<S: Serializer>(v: &[f32], s: S) -> Result<S::Ok, S::Error> {
            hex_str::<S::Error>(&to_hex(v))?.serialize(s)
        }

        pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f32>, D::Error> {
            decode(Encoded::deserialize(d)?)
        }
    }

    pub(super) mod optional {
        use super::*;

        pub(crate) fn serialize<S: Serializer>(
            v: &Option<Vec<f32>>,
            s: S,
        ) -> Result<S::Ok, S::Error> {
            match v.as_deref().map(to_hex) {
                Some(hex) => s.serialize_some(hex_str::<S::Error>(&hex)?),
                None => s.serialize_none(),
            }
        }

        pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<Option<Vec<f32>>, D::Error> {
            Option::<Encoded>::deserialize(d)?.map(decode).transpose()
        }
    }

    pub(super) mod list {
        use super::*;

        pub(crate) fn serialize<S: Serializer>(v: &[Vec<f32>], s: S) -> Result<S::Ok, S::Error> {
            let hex: Vec<Vec<u8>> = v.iter().map(|v| to_hex(v)).collect();
            let strs = hex
                .iter()
                .map(|h| hex_str::<S::Error>(h))
                .collect::<Result<Vec<&str>, S::Error>>()?;
            strs.serialize(s)
        }

        pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<Vec<Vec<f32>>, D::Error> {
            Vec::<Encoded>::deserialize(d)?
                .into_iter()
                .map(decode)
                .collect()
        }
    }

    #[cfg(test)]
    mod tests {
        use crate::rows::VectorRow;

        #[test]
        fn vectors_round_trip_exactly_and_old_logs_still_read() {
            let row = VectorRow {
                seq: 7,
                tenant: "acme".into(),
                memory_id: "m".into(),
                vector: vec![0.1, -2.5e-8, f32::MIN_POSITIVE, 1.0],
                sentences: vec![vec![0.25, 0.5, 0.0, -1.0]],
            };
            let json = serde_json::to_string(&row).unwrap();
            assert!(json.contains("cdcccc3d"), "hex of 0.1f32 LE: {json}");
            assert_eq!(serde_json::from_str::<VectorRow>(&json).unwrap(), row);
            let old = r#"{"seq":7,"tenant":"acme","memory_id":"m","vector":[0.5,1.0]}"#;
            assert_eq!(
                serde_json::from_str::<VectorRow>(old).unwrap().vector,
                vec![0.5, 1.0]
            );
            assert!(
                serde_json::from_str::<VectorRow>(old)
                    .unwrap()
                    .sentences
                    .is_empty()
            );
            let bad = r#"{"seq":7,"tenant":"acme","memory_id":"m","vector":"zz"}"#;
            assert!(serde_json::from_str::<VectorRow>(bad).is_err());
        }
    }
}
