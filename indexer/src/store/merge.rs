//! The open's merge of the memories table, read a batch at a time, with
//! the records read whole.

use crate::rows::{MemoryRow, Record};

/// Merges the memory rows read a batch at a time with the other records
/// (events, backfilled vectors, records a failed replay left in the log),
/// all in sequence order, and keeps the rows the BM25 index lacks.
pub(super) struct Merge {
    side: std::iter::Peekable<std::vec::IntoIter<Record>>,
    /// Memory rows above the BM25 index's last commit, to catch it up.
    pub(super) unindexed: Vec<MemoryRow>,
    indexed_upto: u64,
    /// The highest sequence number handed out.
    pub(super) last_seq: u64,
}

impl Merge {
    /// `side` in sequence order; the BM25 index holds the rows up to
    /// `indexed_upto`.
    pub(super) fn new(side: Vec<Record>, indexed_upto: u64) -> Merge {
        Merge {
            side: side.into_iter().peekable(),
            unindexed: Vec::new(),
            indexed_upto,
            last_seq: 0,
        }
    }

    /// `rows` (each above every earlier batch's) with the other records
    /// that come before each of them.
    pub(super) fn before_and(&mut self, mut rows: Vec<MemoryRow>) -> Vec<Record> {
        rows.sort_by_key(|r| r.seq);
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            while let Some(r) = self.side.next_if(|r| r.seq() < row.seq) {
                self.push(&mut out, r);
            }
            self.push(&mut out, Record::Memory(row));
        }
        out
    }

    /// The other records after the last memory row.
    pub(super) fn rest(&mut self) -> Vec<Record> {
        let mut out = Vec::new();
        while let Some(r) = self.side.next() {
            self.push(&mut out, r);
        }
        out
    }

    fn push(&mut self, out: &mut Vec<Record>, record: Record) {
        self.last_seq = self.last_seq.max(record.seq());
        if let Record::Memory(row) = &record
            && row.seq > self.indexed_upto
        {
            self.unindexed.push(row.clone());
        }
        out.push(record);
    }
}
