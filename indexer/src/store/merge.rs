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
        // Sequence numbers are store-wide, so a second record with one
        // already handed out is a copy: on object storage, a flush that a
        // writer sent just before its lease lapsed can land after the new
        // holder replayed the same log objects into the tables.
        if self.last_seq > 0 && record.seq() == self.last_seq {
            tracing::debug!(
                seq = record.seq(),
                "skipping a record the tables hold twice"
            );
            return;
        }
        self.last_seq = self.last_seq.max(record.seq());
        if let Record::Memory(row) = &record
            && row.seq > self.indexed_upto
        {
            self.unindexed.push(row.clone());
        }
        out.push(record);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rows::{EventRow, MemoryRow};

    fn memory(seq: u64) -> MemoryRow {
        MemoryRow {
            seq,
            id: format!("m{seq}"),
            tenant: "t".into(),
            bank: "b".into(),
            kind: "note".into(),
            title: None,
            content: format!("memory {seq}"),
            elements: Vec::new(),
            source: "explicit".into(),
            trust: "user".into(),
            agent: None,
            session_id: None,
            confidence: 1.0,
            observed_at_ms: 0,
            created_at_ms: 0,
            expires_at_ms: None,
            supersedes: None,
            vector: None,
            sentences: Vec::new(),
        }
    }

    fn event(seq: u64) -> Record {
        Record::Event(EventRow {
            seq,
            tenant: "t".into(),
            memory_id: "m1".into(),
            op: "confirm".into(),
            at_ms: 0,
            arg: None,
        })
    }

    /// A table commit that landed twice (a lapsed writer's late flush of
    /// records the next writer replayed) is read once.
    #[test]
    fn records_the_tables_hold_twice_are_handed_out_once() {
        let side = vec![event(2), event(2), event(5), event(5)];
        let mut merge = Merge::new(side, 0);
        let mut seqs: Vec<u64> = Vec::new();
        for batch in [vec![memory(1), memory(3), memory(3)], vec![memory(4)]] {
            seqs.extend(merge.before_and(batch).iter().map(Record::seq));
        }
        seqs.extend(merge.rest().iter().map(Record::seq));
        assert_eq!(seqs, vec![1, 2, 3, 4, 5]);
        assert_eq!(merge.unindexed.len(), 3, "each memory row indexed once");
    }
}
