//! The store's write-ahead log, wherever it lives: a file in the data
//! directory (`wal.rs`) or objects beside tables on object storage
//! (`remote/object_log.rs`). One set of calls for the store, so its write
//! path and recovery read the same for both.

use std::path::{Path, PathBuf};

use crate::audit::AuditEntry;
use crate::erasure::{self, EraseSelector};
use crate::error::Result;
use crate::remote::Remote;
use crate::rows::Record;
use crate::wal::{self, SEALED, Wal};

#[cfg(feature = "s3")]
use crate::remote::object_log::{ObjectLog, SealedObjects};

/// The live log.
pub(super) enum Log {
    /// `DIR/wal.log`, sealed to `DIR/wal.sealed.log` for a flush.
    File { wal: Wal, dir: PathBuf },
    /// `URI/wal/NNN…` objects.
    #[cfg(feature = "s3")]
    Objects(ObjectLog),
}

/// What a flush deletes once its records are in the tables.
pub(super) enum Sealed {
    File(PathBuf),
    #[cfg(feature = "s3")]
    Objects(SealedObjects),
}

impl Sealed {
    /// Ok while this process may still commit to the tables (always, for a
    /// store in a directory: its lock is held until the flush is done).
    pub(super) fn still_writer(&self) -> Result<()> {
        match self {
            Sealed::File(_) => Ok(()),
            #[cfg(feature = "s3")]
            Sealed::Objects(objects) => objects.still_writer(),
        }
    }

    /// Deletes the sealed log: the tables hold its records.
    pub(super) async fn remove(&self) -> Result<()> {
        match self {
            Sealed::File(path) => wal::remove_sealed(path),
            #[cfg(feature = "s3")]
            Sealed::Objects(objects) => objects.remove().await,
        }
    }
}

impl Log {
    /// Opens the log of the store in `dir` (or at `remote`) and returns it
    /// with every batch it holds, in sequence order (a sealed file log,
    /// which a crash during a flush left, comes first).
    pub(super) async fn open(
        dir: &Path,
        remote: Option<&Remote>,
    ) -> Result<(Log, Vec<Vec<Record>>)> {
        match remote {
            None => {
                let sealed = wal::read_sealed(&dir.join(SEALED))?;
                let (wal, batches) = Wal::open(&dir.join("wal.log"))?;
                let log = Log::File {
                    wal,
                    dir: dir.to_path_buf(),
                };
                Ok((log, sealed.into_iter().chain(batches).collect()))
            }
            #[cfg(feature = "s3")]
            Some(remote) => {
                let (log, batches) = ObjectLog::open(remote).await?;
                Ok((Log::Objects(log), batches))
            }
            #[cfg(not(feature = "s3"))]
            Some(_) => Err(crate::IndexerError::FeatureMissing {
                what: "a store on object storage",
                feature: "s3",
            }),
        }
    }

    /// Writes one batch (`bare`, its vectors moved out into `vectors`,
    /// starting at sequence number `first_seq`) while `beside` runs: on
    /// another thread for the file log (its fsync and the caller's work do
    /// not depend on each other), before the PUT for the object log.
    ///
    /// `audit`: entries to write beside the batch on object storage (one
    /// more object, PUT at the same time); a directory's audit file is the
    /// store's, so there it must be empty.
    pub(super) async fn append<T: Send>(
        &mut self,
        batch: (&[Record], &[Option<Vec<f32>>]),
        first_seq: u64,
        sync: bool,
        audit: &[AuditEntry],
        beside: impl FnOnce() -> T + Send,
    ) -> (Result<()>, T) {
        let (bare, vectors) = batch;
        match self {
            Log::File { wal, .. } => {
                debug_assert!(
                    audit.is_empty(),
                    "a directory's audit is a file of the store's"
                );
                rayon::join(|| wal.append(bare, vectors, sync), beside)
            }
            #[cfg(feature = "s3")]
            Log::Objects(log) => {
                // Every object is durable once the PUT returns: `sync` has
                // nothing to skip.
                let done = beside();
                (log.append(bare, vectors, first_seq, audit).await, done)
            }
        }
    }

    /// Hands the log written so far to a flush; new writes start afresh.
    pub(super) fn seal(&mut self) -> Result<Sealed> {
        match self {
            Log::File { wal, dir } => {
                let sealed = dir.join(SEALED);
                wal.seal(&sealed)?;
                Ok(Sealed::File(sealed))
            }
            #[cfg(feature = "s3")]
            Log::Objects(log) => Ok(Sealed::Objects(log.seal())),
        }
    }

    /// Empties the live log: the tables hold every record it had.
    pub(super) async fn reset(&mut self) -> Result<()> {
        match self {
            Log::File { wal, .. } => wal.reset(),
            #[cfg(feature = "s3")]
            Log::Objects(log) => log.reset().await,
        }
    }

    /// After the open replayed every batch into the tables: empties the
    /// log, a sealed file log included.
    pub(super) async fn replayed(&mut self) -> Result<()> {
        if let Log::File { dir, .. } = self {
            wal::remove_sealed(&dir.join(SEALED))?;
        }
        self.reset().await
    }

    /// Ok while this process may write the store: always for a directory
    /// (its lock is held), while the lease is held on object storage.
    pub(super) fn still_writer(&self) -> Result<()> {
        match self {
            Log::File { .. } => Ok(()),
            #[cfg(feature = "s3")]
            Log::Objects(log) => log.still_writer(),
        }
    }

    /// Records, durably, the erasure about to run, beside the log: a
    /// crash (or, on object storage, the death of this node) part-way
    /// leaves it for the next open, by any process, to finish.
    pub(super) async fn write_intent(&self, selector: &EraseSelector) -> Result<()> {
        match self {
            Log::File { dir, .. } => erasure::write_intent(dir, selector),
            #[cfg(feature = "s3")]
            Log::Objects(log) => log.write_intent(selector).await,
        }
    }

    /// The erasure an earlier process left unfinished, if any.
    pub(super) async fn read_intent(&self) -> Result<Option<EraseSelector>> {
        match self {
            Log::File { dir, .. } => erasure::read_intent(dir),
            #[cfg(feature = "s3")]
            Log::Objects(log) => log.read_intent().await,
        }
    }

    /// The erasure is finished (or was never started).
    pub(super) async fn clear_intent(&self) -> Result<()> {
        match self {
            Log::File { dir, .. } => erasure::clear_intent(dir),
            #[cfg(feature = "s3")]
            Log::Objects(log) => log.clear_intent().await,
        }
    }

    /// Gives up what makes this process the writer, for a prompt takeover
    /// (the lease on object storage; a directory's lock goes with the store).
    pub(super) async fn release(&self) -> Result<()> {
        match self {
            Log::File { .. } => Ok(()),
            #[cfg(feature = "s3")]
            Log::Objects(log) => log.release().await,
        }
    }

    /// Whether the audit log lives beside the log in the bucket (on object
    /// storage) rather than in the directory's file.
    pub(super) fn audits_in_bucket(&self) -> bool {
        match self {
            Log::File { .. } => false,
            #[cfg(feature = "s3")]
            Log::Objects(_) => true,
        }
    }

    /// Writes audit entries to the bucket (on object storage; nothing for
    /// a directory, whose audit log is a file of the store's).
    pub(super) async fn append_audit(&mut self, entries: &[AuditEntry], seq: u64) -> Result<()> {
        match self {
            Log::File { .. } => {
                let _ = (entries, seq);
                Ok(())
            }
            #[cfg(feature = "s3")]
            Log::Objects(log) => log.append_audit(entries, seq).await,
        }
    }

    /// The bucket's audit entries about `tenant` (on object storage).
    pub(super) async fn read_audit(&self, tenant: &str) -> Result<Option<Vec<AuditEntry>>> {
        match self {
            Log::File { .. } => {
                let _ = tenant;
                Ok(None)
            }
            #[cfg(feature = "s3")]
            Log::Objects(log) => log.read_audit(tenant).await.map(Some),
        }
    }

    /// Why the log refuses writes until the store is reopened, if it does.
    pub(super) fn broken(&self) -> Option<&str> {
        match self {
            Log::File { wal, .. } => wal.broken(),
            #[cfg(feature = "s3")]
            Log::Objects(log) => log.broken(),
        }
    }

    /// Bytes in the live log.
    pub(super) fn len(&self) -> u64 {
        match self {
            Log::File { wal, .. } => wal.len(),
            #[cfg(feature = "s3")]
            Log::Objects(log) => log.len(),
        }
    }
}
