//! The audit log on object storage, under `URI/audit/`: each audited call
//! writes one object (`e-<seq>-<generation>-<n>`, JSON lines, written with
//! `If-None-Match: *` under the writer's lease) before it returns, so an
//! audit entry is as durable as the write it records and is read by
//! whichever node opens the store next. Every [`MERGE_AT`] objects, and at
//! open for what a previous writer left, the single objects are merged
//! into one (`m-<first seq>-<last seq>-<generation>-<n>`) and deleted, so
//! reading the log costs a listing and a GET per few hundred calls.
//!
//! A merge whose deletes fail leaves entries in two objects; a read hands
//! each distinct line out once.

use std::collections::HashSet;
use std::sync::Arc;

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use super::lease::Lease;
use super::{failed, list_all};
use crate::audit::AuditEntry;
use crate::error::{IndexerError, Result};

/// Single objects written before they are merged into one.
pub(crate) const MERGE_AT: usize = 256;

/// The audit objects of a store whose lease this process holds.
pub(crate) struct AuditObjects {
    store: Arc<dyn ObjectStore>,
    /// `URI/audit`.
    dir: ObjectPath,
    lease: Arc<Lease>,
    /// Single objects not merged yet, with their entries' lines.
    unmerged: Vec<(ObjectPath, u64, Vec<u8>)>,
    /// Makes names unique within this lease generation.
    written: u64,
}

fn lines(entries: &[AuditEntry]) -> Result<Vec<u8>> {
    let mut buf = Vec::new();
    for entry in entries {
        serde_json::to_writer(&mut buf, entry)
            .map_err(|e| IndexerError::corrupt("audit entry", e.to_string()))?;
        buf.push(b'\n');
    }
    Ok(buf)
}

impl AuditObjects {
    /// Opens the audit objects under `prefix/audit` and merges the single
    /// objects an earlier writer left.
    pub(crate) async fn open(
        store: Arc<dyn ObjectStore>,
        prefix: &ObjectPath,
        lease: Arc<Lease>,
    ) -> Result<AuditObjects> {
        let mut audit = AuditObjects {
            store,
            dir: prefix.clone().join("audit"),
            lease,
            unmerged: Vec::new(),
            written: 0,
        };
        let left: Vec<ObjectPath> = audit
            .list()
            .await?
            .into_iter()
            .filter(|path| path.filename().is_some_and(|name| name.starts_with("e-")))
            .collect();
        for path in left {
            let bytes = audit.get(&path).await?;
            let seq = path
                .filename()
                .and_then(|name| name.split('-').nth(1))
                .and_then(|seq| seq.parse().ok())
                .unwrap_or(0);
            audit.unmerged.push((path, seq, bytes));
        }
        if !audit.unmerged.is_empty() {
            audit.merge().await?;
        }
        Ok(audit)
    }

    async fn list(&self) -> Result<Vec<ObjectPath>> {
        let listed = list_all(self.store.as_ref(), &self.dir).await?;
        Ok(listed.into_iter().map(|meta| meta.location).collect())
    }

    async fn get(&self, path: &ObjectPath) -> Result<Vec<u8>> {
        let got = match self.store.get(path).await {
            Ok(got) => got.bytes().await,
            Err(e) => Err(e),
        };
        Ok(got.map_err(|e| failed("get", path, &e))?.to_vec())
    }

    async fn put_new(&mut self, name: String, bytes: Vec<u8>) -> Result<ObjectPath> {
        self.lease.check()?;
        self.written += 1;
        let path = self.dir.clone().join(name);
        let create = PutOptions {
            mode: PutMode::Create,
            ..PutOptions::default()
        };
        match self
            .store
            .put_opts(&path, PutPayload::from(bytes), create)
            .await
        {
            Ok(_) => {}
            Err(object_store::Error::AlreadyExists { .. }) => {
                return Err(IndexerError::WriterConflict {
                    location: path.to_string(),
                });
            }
            Err(e) => return Err(failed("put", &path, &e)),
        }
        // Landed; trusted only if no other process can have taken the
        // store over meanwhile (as for a log object).
        self.lease.check()?;
        Ok(path)
    }

    /// Writes `entries` (the store's next sequence number is `seq`) as one
    /// object; returns once the bucket has it.
    pub(crate) async fn append(&mut self, entries: &[AuditEntry], seq: u64) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let bytes = lines(entries)?;
        let name = format!(
            "e-{seq:020}-{:010}-{:06}",
            self.lease.generation(),
            self.written
        );
        let path = self.put_new(name, bytes.clone()).await?;
        self.unmerged.push((path, seq, bytes));
        if self.unmerged.len() >= MERGE_AT
            && let Err(e) = self.merge().await
        {
            // The entries are durable in their own objects; merged later.
            tracing::warn!(error = %e, "merging the audit log's objects failed; will retry");
        }
        Ok(())
    }

    /// Writes the single objects' entries as one object, then deletes them.
    async fn merge(&mut self) -> Result<()> {
        let first = self.unmerged.iter().map(|u| u.1).min().unwrap_or(0);
        let last = self.unmerged.iter().map(|u| u.1).max().unwrap_or(0);
        let bytes: Vec<u8> = self
            .unmerged
            .iter()
            .flat_map(|(_, _, bytes)| bytes.iter().copied())
            .collect();
        let name = format!(
            "m-{first:020}-{last:020}-{:010}-{:06}",
            self.lease.generation(),
            self.written
        );
        self.put_new(name, bytes).await?;
        for (path, _, _) in std::mem::take(&mut self.unmerged) {
            match self.store.delete(&path).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                // Its entries are in the merged object too: a read hands
                // each out once.
                Err(e) => tracing::warn!(%path, error = %e, "deleting a merged audit object"),
            }
        }
        Ok(())
    }

    /// Every entry about `tenant`, oldest first (by time, then by object).
    pub(crate) async fn read(&self, tenant: &str) -> Result<Vec<AuditEntry>> {
        let mut paths = self.list().await?;
        paths.sort();
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for path in paths {
            // Only this process writes or merges (it holds the lease, and
            // the store's lock while it reads), so every listed object is there.
            let bytes = self.get(&path).await?;
            for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                if !seen.insert(line.to_vec()) {
                    continue;
                }
                let entry: AuditEntry = serde_json::from_slice(line).map_err(|e| {
                    IndexerError::corrupt(format!("audit object {path}"), e.to_string())
                })?;
                if entry.tenant == tenant {
                    out.push(entry);
                }
            }
        }
        out.sort_by_key(|entry| entry.at_ms);
        Ok(out)
    }
}
