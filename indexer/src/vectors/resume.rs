//! A set's partitions across a reopen: pushes defer their upkeep while a
//! store opens, then the set takes the partitions saved at an earlier open
//! when they were made for its rows, or trains new ones once.

use crate::partitions::{PARTITION_FROM, Partitions};

use super::VectorSet;

/// What [`VectorSet::resume_partitions`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartitionsResumed {
    /// The set is too small for partitions.
    Unpartitioned,
    /// The saved partitions matched and hold every row.
    Restored,
    /// The saved partitions matched; the rows after them were assigned.
    Extended,
    /// Nothing saved matched (or the set outgrew it): trained anew.
    Trained,
}

impl VectorSet {
    /// From now on pushes skip the partitions' upkeep (training, batch
    /// assignment) until [`VectorSet::resume_partitions`]: a store being
    /// opened pushes every row first and partitions once, instead of
    /// training at 16,384 rows, again at 131,072 and assigning as it goes.
    pub fn defer_partitions(&mut self) {
        self.deferred = true;
    }

    /// New partitions over every row, as a push or an open trains them.
    /// Training reads every row: the rows of mapped blocks are then let go
    /// of again, or at a million rows all 1.5 GB of them stayed in the
    /// process's resident set.
    pub(super) fn train_partitions(&self) -> Partitions {
        let trained = Partitions::train(&self.data, &self.codes, self.words, self.dim, self.len());
        self.data.release_mapped_pages();
        trained
    }

    /// Ends [`VectorSet::defer_partitions`]: takes the partitions `saved`
    /// holds (from [`VectorSet::saved_partitions`]) when they were made for
    /// this set's rows, trains new ones when not (or when the set has grown
    /// eightfold since they were trained, as a push would), and assigns the
    /// rows they do not hold.
    ///
    /// ```
    /// use recall_indexer::{PartitionsResumed, VectorSet};
    /// let mut set = VectorSet::new(2);
    /// set.defer_partitions();
    /// set.push(0, &[1.0, 0.0]);
    /// assert_eq!(set.resume_partitions(None), PartitionsResumed::Unpartitioned);
    /// ```
    pub fn resume_partitions(&mut self, saved: Option<&[u8]>) -> PartitionsResumed {
        self.deferred = false;
        let rows = self.len();
        let restored = saved
            .and_then(|bytes| {
                Partitions::from_bytes(bytes, &self.codes, self.words, self.dim, rows)
            })
            .filter(|p| rows < 8 * p.trained_at());
        match restored {
            Some(mut p) => {
                let extended = p.assigned() < rows;
                p.assign(&self.data, &self.codes, self.words, rows);
                self.partitions = Some(p);
                match extended {
                    true => PartitionsResumed::Extended,
                    false => PartitionsResumed::Restored,
                }
            }
            None if rows >= PARTITION_FROM => {
                self.partitions = Some(self.train_partitions());
                PartitionsResumed::Trained
            }
            None => {
                self.partitions = None;
                PartitionsResumed::Unpartitioned
            }
        }
    }

    /// How many rows the partitions hold (None while the set has none):
    /// the rows [`VectorSet::saved_partitions`] would save them for.
    ///
    /// ```
    /// use recall_indexer::VectorSet;
    /// let mut set = VectorSet::new(2);
    /// set.push(0, &[1.0, 0.0]);
    /// assert_eq!(set.partitioned_rows(), None); // too small for partitions
    /// ```
    pub fn partitioned_rows(&self) -> Option<usize> {
        self.partitions.as_ref().map(|p| p.assigned())
    }

    /// The partitions as bytes, for [`VectorSet::resume_partitions`] at a
    /// later open (None while the set has none).
    pub fn saved_partitions(&self) -> Option<Vec<u8>> {
        self.partitions
            .as_ref()
            .and_then(|p| p.to_bytes(&self.codes, self.words))
    }
}
