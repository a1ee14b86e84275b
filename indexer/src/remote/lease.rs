//! The writer's lease on a store in object storage: one object, `URI/lease`,
//! that names its holder, a generation (the fencing token, one higher at
//! every change of holder) and when it expires. Taken with a conditional
//! PUT (`If-None-Match: *` when there is none, `If-Match: <etag>` over an
//! expired one), so of two processes taking it at once exactly one wins;
//! renewed with `If-Match` on the etag this holder wrote, so a renewal
//! after someone else took the lease fails instead of overwriting it.
//!
//! The holder trusts its lease until `sent + ttl × 0.8`, measured on its own
//! monotonic clock from the moment it sent the PUT that set the expiry;
//! another process takes it over only after `expires_at + ttl × 0.2` on its
//! wall clock. The gap absorbs clock skew up to a fifth of the lease.
//! A write is acknowledged only if the lease was still trusted after its
//! log object landed (`ObjectLog::append`): a writer paused past its lease
//! wakes to refused writes, and a new holder, which lists the log only
//! after taking the lease, sees every acknowledged object.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};
use serde::{Deserialize, Serialize};

use super::failed;
use crate::error::{IndexerError, Result};

/// The lease object's content.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
struct Record {
    holder: String,
    /// The recall node (`recall serve --node-id`) that holds it, if any:
    /// where a node that finds the lease held forwards its requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    node: Option<String>,
    generation: u64,
    /// Wall-clock milliseconds since the Unix epoch, by the holder's clock.
    expires_at_ms: u64,
}

/// A lease this process holds (or held: see [`Lease::check`]).
pub(crate) struct Lease {
    store: Arc<dyn ObjectStore>,
    location: ObjectPath,
    holder: String,
    node: Option<String>,
    generation: u64,
    ttl: Duration,
    state: Mutex<Held>,
}

struct Held {
    version: UpdateVersion,
    /// Until when this process trusts its lease (monotonic clock).
    trusted_until: Instant,
    /// Why the lease is gone, once it is.
    lost: Option<String>,
}

/// How long a holder trusts its lease, as a share of the ttl.
const TRUSTED_SHARE: f64 = 0.8;
/// How long past its expiry another process waits before taking a lease over.
const SKEW_SHARE: f64 = 0.2;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Lease {
    /// Takes the lease at `prefix/lease` for `holder`, waiting up to `wait`
    /// for a held one to expire (a holder that crashed frees it after its
    /// ttl and the skew allowance).
    pub(crate) async fn acquire(
        store: Arc<dyn ObjectStore>,
        prefix: &ObjectPath,
        holder: String,
        node: Option<String>,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Lease> {
        let location = prefix.clone().join("lease");
        let deadline = Instant::now() + wait;
        loop {
            let current = read(&store, &location).await?;
            let skew = ttl.mul_f64(SKEW_SHARE).as_millis() as u64;
            let (mode, generation) = match &current {
                None => (PutMode::Create, 1),
                Some((record, version)) if now_ms() > record.expires_at_ms + skew => {
                    (PutMode::Update(version.clone()), record.generation + 1)
                }
                Some((record, _)) => {
                    if Instant::now() >= deadline {
                        return Err(IndexerError::LeaseHeld {
                            holder: record.holder.clone(),
                            node: record.node.clone(),
                            expires_in_ms: (record.expires_at_ms + skew).saturating_sub(now_ms()),
                        });
                    }
                    let free_in = (record.expires_at_ms + skew).saturating_sub(now_ms()) + 1;
                    let left = deadline.saturating_duration_since(Instant::now());
                    tokio::time::sleep(Duration::from_millis(free_in).min(left).min(ttl / 4)).await;
                    continue;
                }
            };
            let sent = Instant::now();
            let record = Record {
                holder: holder.clone(),
                node: node.clone(),
                generation,
                expires_at_ms: now_ms() + ttl.as_millis() as u64,
            };
            match put(&store, &location, &record, mode).await {
                Ok(version) => {
                    tracing::info!(%location, generation, %holder, "took the store's lease");
                    return Ok(Lease {
                        store,
                        location,
                        holder,
                        node,
                        generation,
                        ttl,
                        state: Mutex::new(Held {
                            version,
                            trusted_until: sent + ttl.mul_f64(TRUSTED_SHARE),
                            lost: None,
                        }),
                    });
                }
                // Another process took it between the read and the PUT: look again.
                Err(Conditional::Lost) => continue,
                Err(Conditional::Failed(e)) => return Err(e),
            }
        }
    }

    /// The fencing token: one higher than the previous holder's.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// How often a holder renews.
    pub(crate) fn renew_every(&self) -> Duration {
        self.ttl / 4
    }

    /// Ok while this process may still act as the store's writer.
    pub(crate) fn check(&self) -> Result<()> {
        let held = self
            .state
            .lock()
            .map_err(|_| IndexerError::Poisoned { what: "lease" })?;
        if let Some(reason) = &held.lost {
            return Err(IndexerError::LeaseLost {
                reason: reason.clone(),
            });
        }
        if Instant::now() >= held.trusted_until {
            return Err(IndexerError::LeaseLost {
                reason: format!(
                    "generation {} was last renewed more than {:?} ago",
                    self.generation,
                    self.ttl.mul_f64(TRUSTED_SHARE)
                ),
            });
        }
        Ok(())
    }

    /// Extends the lease by its ttl. A lease that lapsed or was taken is
    /// lost for good: this process writes no more until reopened.
    pub(crate) async fn renew(&self) -> Result<()> {
        self.check()?;
        let version = self
            .state
            .lock()
            .map_err(|_| IndexerError::Poisoned { what: "lease" })?
            .version
            .clone();
        let sent = Instant::now();
        let record = Record {
            holder: self.holder.clone(),
            node: self.node.clone(),
            generation: self.generation,
            expires_at_ms: now_ms() + self.ttl.as_millis() as u64,
        };
        let outcome = put(
            &self.store,
            &self.location,
            &record,
            PutMode::Update(version),
        )
        .await;
        let mut held = self
            .state
            .lock()
            .map_err(|_| IndexerError::Poisoned { what: "lease" })?;
        match outcome {
            Ok(version) => {
                // Trusted only if it was still trusted when this renewal was
                // sent: a renewal that lands after a lapse is not a lease.
                if sent < held.trusted_until {
                    held.version = version;
                    held.trusted_until = sent + self.ttl.mul_f64(TRUSTED_SHARE);
                }
                Ok(())
            }
            Err(Conditional::Lost) => {
                let reason = format!(
                    "generation {} was taken over by another process",
                    self.generation
                );
                held.lost = Some(reason.clone());
                Err(IndexerError::LeaseLost { reason })
            }
            Err(Conditional::Failed(e)) => Err(e),
        }
    }

    /// Gives the lease up (it expires at once), if this process still holds it.
    pub(crate) async fn release(&self) -> Result<()> {
        if self.check().is_err() {
            return Ok(());
        }
        let version = {
            let mut held = self
                .state
                .lock()
                .map_err(|_| IndexerError::Poisoned { what: "lease" })?;
            held.lost = Some("released".into());
            held.version.clone()
        };
        let record = Record {
            holder: self.holder.clone(),
            node: self.node.clone(),
            generation: self.generation,
            expires_at_ms: 0,
        };
        match put(
            &self.store,
            &self.location,
            &record,
            PutMode::Update(version),
        )
        .await
        {
            Ok(_) | Err(Conditional::Lost) => Ok(()),
            Err(Conditional::Failed(e)) => Err(e),
        }
    }
}

enum Conditional {
    /// The condition did not hold: someone else wrote the lease.
    Lost,
    Failed(IndexerError),
}

async fn read(
    store: &Arc<dyn ObjectStore>,
    location: &ObjectPath,
) -> Result<Option<(Record, UpdateVersion)>> {
    let got = match store.get(location).await {
        Ok(got) => got,
        Err(object_store::Error::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(failed("get", location, &e)),
    };
    let version = UpdateVersion {
        e_tag: got.meta.e_tag.clone(),
        version: got.meta.version.clone(),
    };
    let bytes = got.bytes().await.map_err(|e| failed("get", location, &e))?;
    let record = serde_json::from_slice(&bytes)
        .map_err(|e| IndexerError::corrupt(format!("lease {location}"), e.to_string()))?;
    Ok(Some((record, version)))
}

async fn put(
    store: &Arc<dyn ObjectStore>,
    location: &ObjectPath,
    record: &Record,
    mode: PutMode,
) -> std::result::Result<UpdateVersion, Conditional> {
    let body = serde_json::to_vec(record)
        .map_err(|e| Conditional::Failed(IndexerError::corrupt("lease", e.to_string())))?;
    let options = PutOptions {
        mode,
        ..PutOptions::default()
    };
    match store
        .put_opts(location, PutPayload::from(body), options)
        .await
    {
        Ok(done) => Ok(UpdateVersion::from(done)),
        Err(
            object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. },
        ) => Err(Conditional::Lost),
        Err(e) => Err(Conditional::Failed(failed("put", location, &e))),
    }
}

/// A lease dropped while still held is given up in the background (a
/// process that exits first leaves it to expire).
impl Drop for Lease {
    fn drop(&mut self) {
        let Ok(held) = self.state.get_mut() else {
            return;
        };
        if held.lost.is_some() || Instant::now() >= held.trusted_until {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (store, location, version) = (
            self.store.clone(),
            self.location.clone(),
            held.version.clone(),
        );
        let record = Record {
            holder: self.holder.clone(),
            node: self.node.clone(),
            generation: self.generation,
            expires_at_ms: 0,
        };
        runtime.spawn(async move {
            let _ = put(&store, &location, &record, PutMode::Update(version)).await;
        });
    }
}
