//! The payload of one write-ahead log frame: a batch of records.
//!
//! Written as a marker byte (0), the JSON of the records with their vectors
//! left out (length-prefixed), then each record's vector as raw
//! little-endian `f32` (a `u32` count first; `u32::MAX` for none). Vectors
//! are most of a memory's bytes: as JSON (hex text) they cost more to write
//! than the rest of the record. Logs from before this format hold a plain
//! JSON array (first byte `[`) and still replay.

use rayon::prelude::*;

use crate::error::{IndexerError, Result};
use crate::rows::Record;

/// First byte of a payload with the vectors after the JSON.
const VECTORS_AFTER_JSON: u8 = 0;
/// Count written for a record without a vector.
const NO_VECTOR: u32 = u32::MAX;
/// Batches at least this large are serialized in parallel.
const PARALLEL_ENCODE_FROM: usize = 64;

/// Moves each record's vector out, so the rest of the batch encodes as
/// JSON without copying the vectors (`None` for a record without one).
/// [`restore_vectors`] puts them back.
pub(crate) fn take_vectors(batch: &mut [Record]) -> Vec<Option<Vec<f32>>> {
    batch
        .iter_mut()
        .map(|record| match record {
            Record::Memory(m) => m.vector.take(),
            Record::Vector(r) => Some(std::mem::take(&mut r.vector)),
            Record::Event(_) => None,
        })
        .collect()
}

/// Puts back what [`take_vectors`] moved out of the same batch.
pub(crate) fn restore_vectors(batch: &mut [Record], vectors: Vec<Option<Vec<f32>>>) {
    for (record, vector) in batch.iter_mut().zip(vectors) {
        match (record, vector) {
            (Record::Memory(m), v) => m.vector = v,
            (Record::Vector(r), Some(v)) => r.vector = v,
            _ => {}
        }
    }
}

/// Encodes a batch whose vectors [`take_vectors`] moved out into
/// `vectors` (large batches serialize their records over the pool).
pub(crate) fn encode(bare: &[Record], vectors: &[Option<Vec<f32>>]) -> Result<Vec<u8>> {
    if vectors.len() != bare.len() {
        return Err(IndexerError::corrupt(
            "write-ahead log record",
            "a vector slot per record",
        ));
    }
    let json = match bare.len() >= PARALLEL_ENCODE_FROM {
        true => bare
            .par_iter()
            .map(serde_json::to_vec)
            .collect::<serde_json::Result<Vec<_>>>(),
        false => bare.iter().map(serde_json::to_vec).collect(),
    }
    .map_err(|e| IndexerError::corrupt("write-ahead log record", e.to_string()))?;
    let json_len = 2 + json.iter().map(|j| j.len() + 1).sum::<usize>();
    let vector_len: usize = vectors
        .iter()
        .map(|v| 4 + v.as_ref().map_or(0, |v| 4 * v.len()))
        .sum();
    let mut payload = Vec::with_capacity(5 + json_len + vector_len);
    payload.push(VECTORS_AFTER_JSON);
    payload.extend_from_slice(&[0; 4]);
    payload.push(b'[');
    for (i, json) in json.iter().enumerate() {
        if i > 0 {
            payload.push(b',');
        }
        payload.extend_from_slice(json);
    }
    payload.push(b']');
    let written = u32::try_from(payload.len() - 5).map_err(|_| IndexerError::TooLarge {
        what: "write-ahead log records",
        len: (payload.len() - 5) as u64,
        max: u64::from(u32::MAX),
    })?;
    payload[1..5].copy_from_slice(&written.to_le_bytes());
    for vector in vectors {
        match vector {
            Some(v) => {
                let n = u32::try_from(v.len())
                    .ok()
                    .filter(|n| *n != NO_VECTOR)
                    .ok_or(IndexerError::TooLarge {
                        what: "vector",
                        len: v.len() as u64,
                        max: u64::from(NO_VECTOR - 1),
                    })?;
                payload.extend_from_slice(&n.to_le_bytes());
                v.iter()
                    .for_each(|x| payload.extend_from_slice(&x.to_le_bytes()));
            }
            None => payload.extend_from_slice(&NO_VECTOR.to_le_bytes()),
        }
    }
    Ok(payload)
}

/// Decodes a payload; None if it is damaged.
pub(crate) fn decode(payload: &[u8]) -> Option<Vec<Record>> {
    let (&first, rest) = payload.split_first()?;
    if first != VECTORS_AFTER_JSON {
        return serde_json::from_slice(payload).ok();
    }
    let json_len = u32::from_le_bytes(rest.get(..4)?.try_into().ok()?) as usize;
    let mut batch: Vec<Record> = serde_json::from_slice(rest.get(4..4 + json_len)?).ok()?;
    let mut at = 4 + json_len;
    let mut take = |n: usize| {
        let bytes = rest.get(at..at.checked_add(n)?)?;
        at += n;
        Some(bytes)
    };
    for record in &mut batch {
        let n = u32::from_le_bytes(take(4)?.try_into().ok()?);
        let vector = match n {
            NO_VECTOR => None,
            n => Some(
                take(4 * n as usize)?
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect::<Vec<f32>>(),
            ),
        };
        match (record, vector) {
            (Record::Memory(m), v) => m.vector = v,
            (Record::Vector(r), Some(v)) => r.vector = v,
            (Record::Event(_), None) => {}
            _ => return None,
        }
    }
    (at == rest.len()).then_some(batch)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::rows::{EventRow, MemoryRow, VectorRow};

    fn memory(seq: u64, vector: Option<Vec<f32>>) -> Record {
        Record::Memory(MemoryRow {
            seq,
            id: format!("m{seq}"),
            tenant: "acme".into(),
            bank: "org".into(),
            kind: "note".into(),
            title: None,
            content: "deploys \"run\" at noon\n".into(),
            elements: vec!["src/a.rs".into()],
            source: "explicit".into(),
            trust: "user".into(),
            agent: None,
            session_id: None,
            confidence: 1.0,
            observed_at_ms: 5,
            created_at_ms: 6,
            expires_at_ms: None,
            supersedes: None,
            vector,
            // Sentence vectors travel in the JSON, as hex.
            sentences: if seq.is_multiple_of(8) {
                vec![vec![0.25; 4], vec![-1.0, 0.0, 0.5, f32::MIN_POSITIVE]]
            } else {
                Vec::new()
            },
        })
    }

    /// `n` records of every kind, with and without vectors (the log's
    /// tests use them too).
    pub(crate) fn mixed(n: u64) -> Vec<Record> {
        (0..n)
            .map(|seq| match seq % 4 {
                0 => memory(seq, Some(vec![0.1, -2.5e-8, f32::MIN_POSITIVE, seq as f32])),
                1 => memory(seq, None),
                2 => Record::Event(EventRow {
                    seq,
                    tenant: "acme".into(),
                    memory_id: "m0".into(),
                    op: "confirm".into(),
                    at_ms: 1,
                    arg: None,
                }),
                _ => Record::Vector(VectorRow {
                    seq,
                    tenant: "acme".into(),
                    memory_id: "m1".into(),
                    vector: vec![0.5; 3],
                    sentences: vec![vec![0.5; 3], vec![-0.5; 3]],
                }),
            })
            .collect()
    }

    /// Encodes as the log does, and checks the batch got its vectors back.
    fn encoded(batch: &[Record]) -> Vec<u8> {
        let mut bare = batch.to_vec();
        let vectors = take_vectors(&mut bare);
        let payload = encode(&bare, &vectors).unwrap();
        restore_vectors(&mut bare, vectors);
        assert_eq!(bare, batch, "the vectors are back in their records");
        payload
    }

    #[test]
    fn batches_round_trip_exactly_serial_and_parallel() {
        for n in [0, 1, 5, PARALLEL_ENCODE_FROM - 1, PARALLEL_ENCODE_FROM, 300] {
            let batch = mixed(n as u64);
            let payload = encoded(&batch);
            assert_eq!(payload[0], VECTORS_AFTER_JSON);
            assert_eq!(decode(&payload), Some(batch), "{n} records");
        }
    }

    #[test]
    fn logs_written_as_json_still_replay() {
        let batch = mixed(8);
        let old = serde_json::to_vec(&batch).unwrap();
        assert_eq!(old[0], b'[');
        assert_eq!(decode(&old), Some(batch));
    }

    #[test]
    fn a_short_or_padded_payload_is_damage() {
        let payload = encoded(&mixed(6));
        assert!(decode(&payload[..payload.len() - 1]).is_none());
        let mut padded = payload.clone();
        padded.push(0);
        assert!(decode(&padded).is_none());
        assert!(decode(&[]).is_none());
    }
}
