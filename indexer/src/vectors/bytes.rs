//! What a [`VectorSet`] holds in memory, by part.

use crate::partitions::Partitions;

use super::VectorSet;

/// Heap bytes a [`VectorSet`] holds allocated, by part: what
/// [`VectorSet::heap_bytes`] reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VectorBytes {
    /// The `f32` rows.
    pub vectors: usize,
    /// The sign codes and the row owners.
    pub codes: usize,
    /// The k-means centroids and their lists (which hold a second copy of
    /// their rows' codes, laid out for the probe).
    pub partitions: usize,
}

impl VectorBytes {
    /// All parts together.
    pub fn total(&self) -> usize {
        self.vectors + self.codes + self.partitions
    }
}

impl std::ops::Add for VectorBytes {
    type Output = VectorBytes;
    fn add(self, other: VectorBytes) -> VectorBytes {
        VectorBytes {
            vectors: self.vectors + other.vectors,
            codes: self.codes + other.codes,
            partitions: self.partitions + other.partitions,
        }
    }
}

impl VectorSet {
    /// Bytes this set holds allocated, by part.
    ///
    /// ```
    /// use recall_indexer::VectorSet;
    /// let mut set = VectorSet::new(4);
    /// set.push(0, &[1.0, 0.0, 0.0, 0.0]);
    /// assert!(set.heap_bytes().vectors >= 16);
    /// ```
    pub fn heap_bytes(&self) -> VectorBytes {
        VectorBytes {
            vectors: self.data.heap_bytes(),
            codes: self.codes.capacity() * size_of::<u64>()
                + self.owners.capacity() * size_of::<usize>(),
            partitions: self.partitions.as_ref().map_or(0, Partitions::heap_bytes),
        }
    }
}
