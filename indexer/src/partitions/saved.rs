//! Partitions written to bytes and read back, so a store opens without
//! training and assigning them again: at a million rows that was a quarter
//! of the open (the centroid products of the assignment).
//!
//! What is saved is derived and only trusted when it checks out: the
//! bytes carry a checksum of themselves and one of the sign codes of the
//! rows they assign. Rows are identified by position, so a set whose first
//! rows changed (an erasure) no longer matches the codes and is trained
//! again. Layout, little-endian: magic, `dim`, `words`, `k` (u32 each, and
//! one unused), `trained_at`, `assigned`, the codes' checksum (u64 each),
//! the centroids (`k × dim` f32), each assigned row's list (u32), and the
//! checksum of everything before it (u64).

use ndarray::Array2;
use sha2::{Digest, Sha256};

use super::{List, Partitions, TRAININGS};

const MAGIC: &[u8; 8] = b"RCPARTS1";

/// Bytes of saved partitions before their centroids: what
/// [`saved_partitions_rows`] reads.
pub const SAVED_HEADER_BYTES: usize = 48;

/// How many rows saved partitions were made for, read from their first
/// [`SAVED_HEADER_BYTES`] bytes, when those are a header of this layout
/// and its sizes add up to `len`, the length of the whole saved bytes. A
/// hint of a set's size before its rows are read (the engine's open
/// reserves room with it); the checksum is not verified, so nothing but
/// a size is taken from it.
///
/// ```
/// use recall_indexer::{SAVED_HEADER_BYTES, saved_partitions_rows};
/// assert_eq!(saved_partitions_rows(&[0u8; SAVED_HEADER_BYTES], 1_000), None);
/// ```
pub fn saved_partitions_rows(header: &[u8], len: u64) -> Option<usize> {
    let mut reader = Reader {
        bytes: header.get(..SAVED_HEADER_BYTES)?,
    };
    if reader.take(8)? != MAGIC {
        return None;
    }
    let (dim, _words, k, _) = (reader.u32()?, reader.u32()?, reader.u32()?, reader.u32()?);
    let _trained_at = reader.u64()?;
    let assigned = reader.u64()?;
    let expected = (SAVED_HEADER_BYTES as u64)
        .checked_add(
            4u64.checked_mul(u64::from(k))?
                .checked_mul(u64::from(dim))?,
        )?
        .checked_add(4u64.checked_mul(assigned)?)?
        .checked_add(8)?;
    (expected == len).then_some(usize::try_from(assigned).ok()?)
}

/// The first 8 bytes of SHA-256 of `bytes`.
fn checksum(bytes: &[u8]) -> u64 {
    let digest = Sha256::digest(bytes);
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_le_bytes(first)
}

/// The checksum of the first `rows` rows' sign codes.
fn codes_checksum(codes: &[u64], words: usize, rows: usize) -> Option<u64> {
    let codes = codes.get(..rows * words)?;
    let mut hasher = Sha256::new();
    for word in codes {
        hasher.update(word.to_le_bytes());
    }
    let digest = hasher.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    Some(u64::from_le_bytes(first))
}

impl Partitions {
    /// These partitions as bytes ([`Partitions::from_bytes`] reads them).
    pub(crate) fn to_bytes(&self, codes: &[u64], words: usize) -> Option<Vec<u8>> {
        let k = self.lists.len();
        let mut list_of = vec![0u32; self.assigned];
        for (index, list) in self.lists.iter().enumerate() {
            for &row in &list.rows {
                *list_of.get_mut(row as usize)? = index as u32;
            }
        }
        let mut out = Vec::with_capacity(64 + 4 * (k * self.dim + self.assigned));
        out.extend_from_slice(MAGIC);
        for n in [self.dim, words, k, 0] {
            out.extend_from_slice(&(n as u32).to_le_bytes());
        }
        out.extend_from_slice(&(self.trained_at as u64).to_le_bytes());
        out.extend_from_slice(&(self.assigned as u64).to_le_bytes());
        out.extend_from_slice(&codes_checksum(codes, words, self.assigned)?.to_le_bytes());
        for x in &self.centroids {
            out.extend_from_slice(&x.to_le_bytes());
        }
        for list in list_of {
            out.extend_from_slice(&list.to_le_bytes());
        }
        let sum = checksum(&out);
        out.extend_from_slice(&sum.to_le_bytes());
        Some(out)
    }

    /// Partitions read from `bytes`, if they were written for rows whose
    /// sign codes are the first ones of `codes` (`words` per row, `rows`
    /// rows) and `dim`-wide vectors, and are whole. `None` otherwise: the
    /// caller trains new ones.
    pub(crate) fn from_bytes(
        bytes: &[u8],
        codes: &[u64],
        words: usize,
        dim: usize,
        rows: usize,
    ) -> Option<Partitions> {
        let (body, sum) = bytes.split_at_checked(bytes.len().checked_sub(8)?)?;
        if checksum(body) != u64::from_le_bytes(sum.try_into().ok()?) {
            return None;
        }
        let mut reader = Reader { bytes: body };
        if reader.take(8)? != MAGIC {
            return None;
        }
        let (saved_dim, saved_words, k, _) = (
            reader.u32()? as usize,
            reader.u32()? as usize,
            reader.u32()? as usize,
            reader.u32()?,
        );
        let trained_at = reader.u64()? as usize;
        let assigned = reader.u64()? as usize;
        let codes_sum = reader.u64()?;
        if saved_dim != dim || saved_words != words || k == 0 || assigned > rows {
            return None;
        }
        if codes_checksum(codes, words, assigned)? != codes_sum {
            return None;
        }
        let centroids: Vec<f32> = reader
            .take(4 * k * dim)?
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        let centroids = Array2::from_shape_vec((k, dim), centroids).ok()?;
        let list_of: Vec<usize> = reader
            .take(4 * assigned)?
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
            .collect();
        // Each list sized for its rows at once: grown a push at a time,
        // the lists' capacity ended up at up to twice their rows.
        let mut sizes = vec![0usize; k];
        for &list in &list_of {
            *sizes.get_mut(list)? += 1;
        }
        let mut lists: Vec<List> = sizes.iter().map(|&n| List::with_room(n, words)).collect();
        for (row, &list) in list_of.iter().enumerate() {
            lists
                .get_mut(list)?
                .push(row as u32, codes.get(row * words..(row + 1) * words)?);
        }
        if !reader.bytes.is_empty() {
            return None;
        }
        Some(Partitions {
            dim,
            centroids,
            lists,
            assigned,
            trained_at,
            training: TRAININGS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1,
        })
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.bytes.split_at_checked(n)?;
        self.bytes = rest;
        Some(head)
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
}

#[cfg(test)]
mod tests {
    use crate::vectors::tests::clustered;
    use crate::{PartitionsResumed, ScanConfig, VectorSet};

    const DIM: usize = 32;

    fn opened(vectors: &[Vec<f32>], saved: Option<&[u8]>) -> (VectorSet, PartitionsResumed) {
        let mut set = VectorSet::new(DIM);
        set.defer_partitions();
        for (i, v) in vectors.iter().enumerate() {
            set.push(i, v);
        }
        let resumed = set.resume_partitions(saved);
        (set, resumed)
    }

    /// A 2 % probe: what it finds depends on the lists.
    fn probed(set: &VectorSet, queries: &[Vec<f32>]) -> Vec<Vec<(usize, f32)>> {
        let scan = ScanConfig {
            exact_limit: 0,
            probe_share: 0.02,
            rescore_pool: 50,
            min_cosine: None,
        };
        queries
            .iter()
            .map(|q| set.nearest(q, 10, scan, |_| true))
            .collect()
    }

    #[test]
    fn saved_partitions_come_back_as_trained_and_checked_against_the_rows() {
        let vectors = clustered(20_000, 64, DIM);
        let queries: Vec<Vec<f32>> = vectors.iter().step_by(997).cloned().collect();
        let (trained, resumed) = opened(&vectors, None);
        assert_eq!(resumed, PartitionsResumed::Trained);
        let Some(bytes) = trained.saved_partitions() else {
            panic!("a trained set has partitions to save");
        };

        // The same rows: the same lists, so the same probe results.
        let (restored, resumed) = opened(&vectors, Some(&bytes));
        assert_eq!(resumed, PartitionsResumed::Restored);
        assert_eq!(probed(&restored, &queries), probed(&trained, &queries));
        assert_eq!(restored.saved_partitions().as_deref(), Some(&bytes[..]));
        // Each list restored with room for its rows and no more: 20,000
        // rows of one-word codes (at most seven padding rows in each list's
        // last block), 256 lists (the fewest a training makes), `DIM` ×
        // 256 centroid floats.
        let (k, words) = (256, 1);
        let most = 20_000 * 4 + (20_000 + 7 * k) * 8 * words + k * DIM * 4 + k * 48;
        assert!(
            restored.heap_bytes().partitions <= most,
            "{} > {most}",
            restored.heap_bytes().partitions
        );

        // More rows: the saved ones are kept, the new ones assigned.
        let mut grown = vectors.clone();
        grown.extend(clustered(20_500, 64, DIM).into_iter().skip(20_000));
        let (extended, resumed) = opened(&grown, Some(&bytes));
        assert_eq!(resumed, PartitionsResumed::Extended);
        let Some(more) = extended.saved_partitions() else {
            panic!("an extended set has partitions to save");
        };
        assert!(more.len() == bytes.len() + 4 * 500);
        // Their header says how many rows they were made for.
        let rows = |b: &[u8]| super::saved_partitions_rows(b, b.len() as u64);
        assert_eq!(rows(&bytes), Some(20_000));
        assert_eq!(rows(&more), Some(20_500));
        assert_eq!(
            super::saved_partitions_rows(&bytes, bytes.len() as u64 - 4),
            None
        );

        // A damaged file, or rows that are not the ones it was made for:
        // trained again.
        let mut damaged = bytes.clone();
        damaged[100] ^= 1;
        assert_eq!(
            opened(&vectors, Some(&damaged)).1,
            PartitionsResumed::Trained
        );
        let mut other = vectors.clone();
        other.swap(0, 1);
        assert_eq!(opened(&other, Some(&bytes)).1, PartitionsResumed::Trained);
        assert_eq!(
            opened(&vectors[..100], Some(&bytes)).1,
            PartitionsResumed::Unpartitioned
        );
        let (_, resumed) = opened(&vectors, Some(&bytes[..bytes.len() - 1]));
        assert_eq!(resumed, PartitionsResumed::Trained);
    }
}
