//! Which recall nodes (`recall serve --node-id N`) are alive: each node
//! keeps one object, `ROOT/nodes/<id>` (JSON: its id, the address it serves
//! on, and until when it counts as alive), rewritten every quarter of the
//! lease ttl, and learns the others by listing `ROOT/nodes/` as often.
//! A node counts as gone once its object's expiry and the skew allowance
//! (a fifth of the ttl, as for the writer's lease) have passed, or at once
//! when it leaves (its object is deleted).
//!
//! Membership only steers requests (which node a tenant is placed on); it
//! never grants the right to write. That is the tenant store's own lease,
//! so two nodes that briefly disagree about who is alive cost a forward,
//! never a lost or doubled write.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::object_log::connect;
use super::{Remote, failed, list_all};
use crate::error::{IndexerError, Result};

/// How long past its expiry a node still counts as alive (clock skew).
const SKEW_SHARE: f64 = 0.2;

/// A live node as its membership object names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// Its `--node-id`.
    pub node: String,
    /// Where it serves requests (`host:port`).
    pub addr: String,
}

/// The membership object's content.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    node: String,
    addr: String,
    /// Wall-clock milliseconds since the Unix epoch, by the node's clock.
    expires_at_ms: u64,
}

/// This node's place among the live nodes under one root; dropping it stops
/// the renewals (the object then expires), [`Members::leave`] removes it at once.
///
/// ```no_run
/// # async fn demo() -> recall_indexer::Result<()> {
/// use recall_indexer::{Members, Remote};
/// let root = Remote::from_env("s3://memories/fleet")?;
/// let members = Members::join(&root, "n1", "127.0.0.1:7700").await?;
/// assert!(members.live().iter().any(|m| m.node == "n1"));
/// members.leave().await?;
/// # Ok(())
/// # }
/// ```
pub struct Members {
    shared: Arc<Shared>,
    view: watch::Receiver<Vec<Member>>,
    task: JoinHandle<()>,
}

struct Shared {
    store: Arc<dyn ObjectStore>,
    dir: ObjectPath,
    me: Member,
    ttl: Duration,
    view: watch::Sender<Vec<Member>>,
}

/// A node id: 1 to 64 characters of `A-Z a-z 0-9 . _ -`, not `.` or `..`
/// (it names an object and a cache directory).
pub fn validate_node_id(node: &str) -> Result<()> {
    let valid = !node.is_empty()
        && node.len() <= 64
        && node != "."
        && node != ".."
        && node
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    if valid {
        Ok(())
    } else {
        Err(IndexerError::InvalidNodeId {
            node: node.to_string(),
        })
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Members {
    /// Writes this node's object under `root` (its lease ttl sets how often
    /// it is renewed and how long a silent node counts as alive), reads
    /// the others, and keeps both fresh in the background.
    pub async fn join(root: &Remote, node: &str, addr: &str) -> Result<Members> {
        validate_node_id(node)?;
        let (store, prefix) = connect(root)?;
        let (ttl, _) = root.lease();
        let me = Member {
            node: node.to_string(),
            addr: addr.to_string(),
        };
        let (view, receiver) = watch::channel(vec![me.clone()]);
        let shared = Arc::new(Shared {
            store,
            dir: prefix.join("nodes"),
            me,
            ttl,
            view,
        });
        shared.announce().await?;
        shared.refresh().await?;
        let task = tokio::spawn(keep_fresh(Arc::clone(&shared)));
        Ok(Members {
            shared,
            view: receiver,
            task,
        })
    }

    /// This node.
    pub fn me(&self) -> &Member {
        &self.shared.me
    }

    /// The live nodes, this one included, sorted by id.
    pub fn live(&self) -> Vec<Member> {
        self.view.borrow().clone()
    }

    /// Changes of [`Members::live`], for whoever moves tenants when it changes.
    pub fn watch(&self) -> watch::Receiver<Vec<Member>> {
        self.view.clone()
    }

    /// Lists the nodes now instead of at the next tick.
    pub async fn refresh(&self) -> Result<()> {
        self.shared.refresh().await
    }

    /// Stops renewing and deletes this node's object, so the others stop
    /// placing tenants here at their next listing.
    pub async fn leave(&self) -> Result<()> {
        self.task.abort();
        let location = self.shared.location(&self.shared.me.node);
        match self.shared.store.delete(&location).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(failed("delete", &location, &e)),
        }
    }
}

impl Drop for Members {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Shared {
    fn location(&self, node: &str) -> ObjectPath {
        self.dir.clone().join(node)
    }

    /// (Re)writes this node's object with a fresh expiry.
    async fn announce(&self) -> Result<()> {
        let record = Record {
            node: self.me.node.clone(),
            addr: self.me.addr.clone(),
            expires_at_ms: now_ms() + self.ttl.as_millis() as u64,
        };
        let body = serde_json::to_vec(&record)
            .map_err(|e| IndexerError::corrupt("membership record", e.to_string()))?;
        let location = self.location(&self.me.node);
        self.store
            .put(&location, PutPayload::from(body))
            .await
            .map_err(|e| failed("put", &location, &e))?;
        Ok(())
    }

    /// Lists `nodes/` and publishes the live ones (this node always among them).
    async fn refresh(&self) -> Result<()> {
        let listed = list_all(self.store.as_ref(), &self.dir).await?;
        let skew = self.ttl.mul_f64(SKEW_SHARE).as_millis() as u64;
        let now = now_ms();
        let mut live = vec![self.me.clone()];
        for meta in listed {
            let got = match self.store.get(&meta.location).await {
                Ok(got) => got,
                // Left between the listing and the read.
                Err(object_store::Error::NotFound { .. }) => continue,
                Err(e) => return Err(failed("get", &meta.location, &e)),
            };
            let bytes = got
                .bytes()
                .await
                .map_err(|e| failed("get", &meta.location, &e))?;
            let record: Record = match serde_json::from_slice(&bytes) {
                Ok(record) => record,
                Err(e) => {
                    tracing::warn!(location = %meta.location, error = %e, "skipping an unreadable membership object");
                    continue;
                }
            };
            if record.node != self.me.node && now <= record.expires_at_ms + skew {
                live.push(Member {
                    node: record.node,
                    addr: record.addr,
                });
            }
        }
        live.sort_by(|a, b| a.node.cmp(&b.node));
        self.view.send_if_modified(|view| {
            let changed = *view != live;
            if changed {
                tracing::info!(nodes = ?live.iter().map(|m| &m.node).collect::<Vec<_>>(), "live nodes changed");
                *view = live;
            }
            changed
        });
        Ok(())
    }
}

/// Renews this node's object and relists the others every quarter ttl; a
/// failure is retried at the next tick (the node drops out of the others'
/// view if none gets through before its object expires).
async fn keep_fresh(shared: Arc<Shared>) {
    loop {
        tokio::time::sleep(shared.ttl / 4).await;
        if let Err(e) = shared.announce().await {
            tracing::warn!(error = %e, "renewing this node's membership failed");
        }
        if let Err(e) = shared.refresh().await {
            tracing::warn!(error = %e, "listing the live nodes failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_ids_name_one_object_and_one_directory() {
        for good in ["n1", "node-2", "eu.west_3"] {
            assert!(validate_node_id(good).is_ok(), "{good}");
        }
        let long = "x".repeat(65);
        for bad in ["", ".", "..", "a/b", "a b", "ü", long.as_str()] {
            assert!(
                matches!(
                    validate_node_id(bad),
                    Err(IndexerError::InvalidNodeId { .. })
                ),
                "{bad:?} is refused"
            );
        }
    }
}
