//! The write-ahead log as objects: one object per acknowledged batch, under
//! `URI/wal/`, named by the batch's first sequence number in 20 digits (so
//! names sort in sequence order) and holding one frame of the file log's
//! format (`wal.rs`). An object is written whole or not at all, so there is
//! no torn tail to cut: an object that does not decode is damage.
//!
//! Only the holder of the store's lease (`lease.rs`) writes: the open takes
//! the lease before it lists the log, and a write is acknowledged only if
//! the lease was still trusted after its object landed. The object's name
//! carries the lease's generation after the sequence number
//! (`NNN…-GGG…`), and is written with `If-None-Match: *` (object_store's
//! `PutMode::Create`), so no PUT ever replaces an acknowledged batch. A
//! writer that lost its lease may still land an object it was not
//! acknowledged for; the open drops any object whose generation is older
//! than that of an object at the same or a lower sequence number (that
//! newer holder started after the old one's last acknowledged write).

use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, RetryConfig};

use super::audit_objects::AuditObjects;
use super::lease::Lease;
use super::{Remote, failed, list_all};
use crate::audit::AuditEntry;
use crate::erasure::EraseSelector;
use crate::error::{IndexerError, Result};
use crate::rows::Record;
use crate::wal;

/// The log's objects.
pub(crate) struct ObjectLog {
    store: Arc<dyn ObjectStore>,
    lease: Arc<Lease>,
    /// `URI/wal`.
    dir: ObjectPath,
    /// `URI/ERASING`: an erasure in progress (`crate::erasure`).
    intent: ObjectPath,
    /// `URI/audit/`: the audit log.
    audit: AuditObjects,
    /// Objects written (or found at open) and not yet flushed to the tables.
    live: Vec<ObjectPath>,
    bytes: u64,
    /// Why the log takes no more writes until the store is reopened: a PUT
    /// failed, and whether it landed is unknown (the reopen reads what is
    /// there), or another writer took a sequence number.
    broken: Option<String>,
}

/// The objects of a sealed log, deleted once a flush put their records in
/// the tables.
pub(crate) struct SealedObjects {
    store: Arc<dyn ObjectStore>,
    /// Held until the flush is done, as the local lock is.
    lease: Arc<Lease>,
    objects: Vec<ObjectPath>,
}

impl SealedObjects {
    /// Ok while this process still holds the store's lease: checked
    /// before a flush commits to the tables.
    pub(crate) fn still_writer(&self) -> Result<()> {
        self.lease.check()
    }

    /// Deletes the objects (one already gone counts as deleted).
    pub(crate) async fn remove(&self) -> Result<()> {
        for object in &self.objects {
            match self.store.delete(object).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(failed("delete", object, &e)),
            }
        }
        Ok(())
    }
}

/// An S3 client for `remote`, and the key prefix the store's objects sit under.
pub(crate) fn connect(remote: &Remote) -> Result<(Arc<dyn ObjectStore>, ObjectPath)> {
    let invalid = |reason: String| IndexerError::InvalidRemote {
        uri: remote.uri().to_string(),
        reason,
    };
    let mut builder = AmazonS3Builder::new().with_bucket_name(remote.bucket());
    // Retries as Lance's client of the same store makes them (its keys and
    // defaults), so one setting governs the tables and the log.
    let mut retry = RetryConfig {
        max_retries: 3,
        retry_timeout: Duration::from_secs(180),
        ..RetryConfig::default()
    };
    for (key, value) in remote.options() {
        let key = key.to_ascii_lowercase();
        let number = || {
            value
                .parse::<u64>()
                .map_err(|_| invalid(format!("`{key}` takes a whole number, not `{value}`")))
        };
        match key.as_str() {
            "client_max_retries" => retry.max_retries = number()? as usize,
            "client_retry_timeout" => retry.retry_timeout = Duration::from_secs(number()?),
            // Lance's own read settings: nothing for the log's client.
            "download_retry_count" | "block_size" => {}
            _ => {
                let parsed: AmazonS3ConfigKey = key
                    .parse()
                    .map_err(|_| invalid(format!("unknown option `{key}`")))?;
                builder = builder.with_config(parsed, value);
            }
        }
    }
    builder = builder.with_retry(retry);
    let store = builder.build().map_err(|e| invalid(e.to_string()))?;
    Ok((Arc::new(store), ObjectPath::from(remote.prefix())))
}

impl ObjectLog {
    /// Lists the log's objects and returns the log with their batches, in
    /// sequence order.
    pub(crate) async fn open(remote: &Remote) -> Result<(ObjectLog, Vec<Vec<Record>>)> {
        let (store, prefix) = connect(remote)?;
        let (ttl, wait) = remote.lease();
        let pid = std::process::id();
        let id = uuid::Uuid::now_v7();
        let holder = match remote.node_id() {
            Some(node) => format!("node {node}, pid {pid} ({id})"),
            None => format!("pid {pid} ({id})"),
        };
        let node = remote.node_id().map(str::to_string);
        let lease =
            Arc::new(Lease::acquire(store.clone(), &prefix, holder, node, ttl, wait).await?);
        tokio::spawn(keep_renewed(Arc::downgrade(&lease)));
        let dir = prefix.clone().join("wal");
        let listed = list_all(store.as_ref(), &dir).await?;
        let mut named = Vec::with_capacity(listed.len());
        for meta in listed {
            let (seq, generation) = parse_name(&meta.location)?;
            named.push((seq, generation, meta));
        }
        let (kept, stale) = current(named);
        for meta in &stale {
            tracing::warn!(object = %meta.location, "dropping a log object a writer wrote after losing its lease");
        }
        let mut batches = Vec::with_capacity(kept.len());
        let mut bytes = 0;
        for meta in &kept {
            let got = match store.get(&meta.location).await {
                Ok(got) => got.bytes().await,
                Err(e) => Err(e),
            };
            let raw = got.map_err(|e| failed("get", &meta.location, &e))?;
            let (mut frames, valid) = wal::decode(&raw);
            if valid != raw.len() || frames.len() != 1 {
                return Err(IndexerError::corrupt(
                    format!("log object {}", meta.location),
                    format!("{} of {} bytes hold whole frames", valid, raw.len()),
                ));
            }
            batches.append(&mut frames);
            bytes += raw.len() as u64;
        }
        let audit = AuditObjects::open(store.clone(), &prefix, lease.clone()).await?;
        // The stale objects go with the next reset, after the replay.
        let live = kept
            .into_iter()
            .chain(stale)
            .map(|meta| meta.location)
            .collect();
        Ok((
            ObjectLog {
                store,
                lease,
                intent: prefix.clone().join(crate::erasure::INTENT_FILE),
                audit,
                dir,
                live,
                bytes,
                broken: None,
            },
            batches,
        ))
    }

    /// Writes one batch as one object, named by `first_seq`, and `audit`
    /// (if any) as an object of the audit log, both PUT at once; returns
    /// once the object store has both. `bare` is the batch with its vectors
    /// moved out into `vectors` (as for the file log).
    pub(crate) async fn append(
        &mut self,
        bare: &[Record],
        vectors: &[Option<Vec<f32>>],
        first_seq: u64,
        audit: &[AuditEntry],
    ) -> Result<()> {
        let (header, payload) = wal::frame(bare, vectors)?;
        if let Some(reason) = &self.broken {
            return Err(IndexerError::ReadOnly {
                reason: reason.clone(),
            });
        }
        if let Err(e) = self.lease.check() {
            self.broken = Some(e.to_string());
            return Err(e);
        }
        let mut object = Vec::with_capacity(header.len() + payload.len());
        object.extend_from_slice(&header);
        object.extend_from_slice(&payload);
        let len = object.len() as u64;
        let location = self
            .dir
            .clone()
            .join(format!("{first_seq:020}-{:010}", self.lease.generation()));
        let create = PutOptions {
            mode: PutMode::Create,
            ..PutOptions::default()
        };
        let (put, audited) = tokio::join!(
            self.store
                .put_opts(&location, PutPayload::from(object), create),
            self.audit.append(audit, first_seq)
        );
        if let Err(e) = audited {
            // The batch's object may have landed without its audit entries:
            // what the log holds is known again at the reopen, as below.
            // Not acknowledged; the batch's object, if it landed, is left
            // out of `live` so no flush deletes it before the reopen.
            self.broken = Some(format!(
                "writing the audit object beside {location} failed ({e}); whether the batch landed is unknown"
            ));
            return Err(e);
        }
        match put {
            Ok(_) => {
                self.live.push(location);
                self.bytes += len;
                // Landed, but acknowledged only if no other process can
                // have taken the lease (and listed the log) before it did.
                if let Err(e) = self.lease.check() {
                    self.broken = Some(e.to_string());
                    return Err(e);
                }
                Ok(())
            }
            Err(object_store::Error::AlreadyExists { .. }) => {
                self.broken = Some(format!(
                    "another writer wrote {location}, the log object this store was writing next"
                ));
                Err(IndexerError::WriterConflict {
                    location: location.to_string(),
                })
            }
            Err(e) => {
                // The PUT may have landed: what the log holds is known again
                // only by listing it, which the reopen does.
                self.broken = Some(format!(
                    "writing the log object {location} failed ({e}); whether it landed is unknown"
                ));
                Err(failed("put", &location, &e))
            }
        }
    }

    /// Writes audit entries as one object in the bucket (`seq`: the
    /// store's next sequence number, which orders the objects' names).
    pub(crate) async fn append_audit(&mut self, entries: &[AuditEntry], seq: u64) -> Result<()> {
        self.audit.append(entries, seq).await
    }

    /// The audit log's entries about `tenant`, oldest first.
    pub(crate) async fn read_audit(&self, tenant: &str) -> Result<Vec<AuditEntry>> {
        self.audit.read(tenant).await
    }

    /// Records the erasure about to run in the bucket (any node's next
    /// open finishes it).
    pub(crate) async fn write_intent(&self, selector: &EraseSelector) -> Result<()> {
        self.lease.check()?;
        let json = serde_json::to_vec(selector)
            .map_err(|e| IndexerError::corrupt("erase intent", e.to_string()))?;
        self.store
            .put(&self.intent, PutPayload::from(json))
            .await
            .map(|_| ())
            .map_err(|e| failed("put", &self.intent, &e))
    }

    /// The erasure a process left unfinished, if any. An object is written
    /// whole, so one that does not parse is damage, not a torn write.
    pub(crate) async fn read_intent(&self) -> Result<Option<EraseSelector>> {
        let got = match self.store.get(&self.intent).await {
            Ok(got) => got.bytes().await,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => Err(e),
        };
        let bytes = got.map_err(|e| failed("get", &self.intent, &e))?;
        serde_json::from_slice(&bytes).map(Some).map_err(|e| {
            IndexerError::corrupt(format!("erase intent {}", self.intent), e.to_string())
        })
    }

    /// The erasure is finished.
    pub(crate) async fn clear_intent(&self) -> Result<()> {
        match self.store.delete(&self.intent).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(failed("delete", &self.intent, &e)),
        }
    }

    /// Gives the store's lease up (the store is closing).
    pub(crate) async fn release(&self) -> Result<()> {
        self.lease.release().await
    }

    /// Ok while this process holds the store's lease.
    pub(crate) fn still_writer(&self) -> Result<()> {
        self.lease.check()
    }

    /// Why the log refuses writes, if it does.
    pub(crate) fn broken(&self) -> Option<&str> {
        self.broken.as_deref()
    }

    /// Hands the objects written so far to a flush; new writes start a
    /// fresh list.
    pub(crate) fn seal(&mut self) -> SealedObjects {
        self.bytes = 0;
        SealedObjects {
            store: self.store.clone(),
            lease: self.lease.clone(),
            objects: std::mem::take(&mut self.live),
        }
    }

    /// Deletes every object of the log: its records are in the tables.
    pub(crate) async fn reset(&mut self) -> Result<()> {
        self.seal().remove().await
    }

    /// Bytes in the log's objects not yet flushed.
    pub(crate) fn len(&self) -> u64 {
        self.bytes
    }
}

/// Renews the lease every quarter of its ttl while its holder lives.
async fn keep_renewed(lease: std::sync::Weak<Lease>) {
    loop {
        let every = match lease.upgrade() {
            Some(lease) => lease.renew_every(),
            None => return,
        };
        tokio::time::sleep(every).await;
        let Some(lease) = lease.upgrade() else {
            return;
        };
        match lease.renew().await {
            Ok(()) => {}
            Err(e @ (IndexerError::LeaseLost { .. } | IndexerError::Poisoned { .. })) => {
                tracing::error!(error = %e, "the store's writer lease is lost; writes are refused");
                return;
            }
            // Retried at the next tick; the lease lapses if none gets through.
            Err(e) => tracing::warn!(error = %e, "renewing the store's writer lease failed"),
        }
    }
}

/// `NNN…-GGG…`: the first sequence number and the lease generation.
fn parse_name(location: &ObjectPath) -> Result<(u64, u64)> {
    let name = location.filename().unwrap_or_default();
    let parsed = name
        .split_once('-')
        .and_then(|(seq, generation)| Some((seq.parse().ok()?, generation.parse().ok()?)));
    parsed.ok_or_else(|| {
        IndexerError::corrupt(
            format!("log object {location}"),
            "its name is not <sequence>-<generation>",
        )
    })
}

/// Splits the log's objects into those to replay, in sequence order, and
/// those a writer landed after a newer holder took the lease: an object is
/// stale when an object of a newer generation sits at the same or a lower
/// sequence number (the newer holder listed every acknowledged object
/// before it wrote, so nothing acknowledged comes after its first object
/// from an older generation).
fn current<M>(mut named: Vec<(u64, u64, M)>) -> (Vec<M>, Vec<M>) {
    // Newest generation first at one sequence number.
    named.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    let (mut kept, mut stale) = (Vec::new(), Vec::new());
    let mut newest = 0;
    for (_, generation, meta) in named {
        if generation < newest {
            stale.push(meta);
        } else {
            newest = generation;
            kept.push(meta);
        }
    }
    (kept, stale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_a_lapsed_writer_landed_after_a_newer_one_began_are_stale() {
        // Generation 1 wrote 1 and 5 (acknowledged), then lost its lease;
        // generation 2 started at 9. Generation 1 still landed 9 and 12.
        let named = vec![
            (12, 1, "12-1"),
            (1, 1, "1-1"),
            (9, 2, "9-2"),
            (5, 1, "5-1"),
            (9, 1, "9-1"),
            (14, 2, "14-2"),
        ];
        let (kept, stale) = current(named);
        assert_eq!(kept, vec!["1-1", "5-1", "9-2", "14-2"]);
        assert_eq!(stale, vec!["9-1", "12-1"]);
        let (kept, stale) = current(vec![(3, 4, "a"), (7, 4, "b")]);
        assert_eq!((kept, stale.len()), (vec!["a", "b"], 0));
    }

    #[test]
    fn a_log_object_is_named_by_sequence_and_generation() {
        let ok = ObjectPath::from("team/wal/00000000000000000042-0000000003");
        assert_eq!(parse_name(&ok).unwrap(), (42, 3));
        let bad = ObjectPath::from("team/wal/00000000000000000042");
        assert!(matches!(
            parse_name(&bad),
            Err(IndexerError::Corrupt { .. })
        ));
    }
}
