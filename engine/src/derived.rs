//! Files the engine keeps beside the store so it opens faster: each
//! tenant's vector partitions, in `DATA/derived/partitions/`.
//!
//! They are derived, never the truth: a missing, damaged or stale file
//! (one made for other rows) is ignored and the partitions are trained
//! again, as they were before these files existed; a file that cannot be
//! written costs the next open that training and nothing else. They are
//! written without fsync for that reason. An erasure deletes its tenant's
//! files (the centroids are averages of the tenant's vectors). Only the
//! process holding the store's lock writes them.

use std::path::{Path, PathBuf};

use recall_indexer::{PartitionsResumed, VectorSet};
use sha2::{Digest, Sha256};

use crate::state::State;

/// The two vector sets of a tenant, as their files name them.
const SETS: [&str; 2] = ["whole", "sentences"];

fn partitions_dir(data: &Path) -> PathBuf {
    data.join("derived").join("partitions")
}

/// The file of `tenant`'s `set`: named by a hash of the tenant, so no
/// tenant name becomes a path.
fn partitions_path(data: &Path, tenant: &str, set: &str) -> PathBuf {
    let digest = Sha256::digest(tenant.as_bytes());
    let name: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    partitions_dir(data).join(format!("{name}.{set}"))
}

/// Ends [`State::opening`]: each tenant's vector sets take their saved
/// partitions when those match their rows, and train new ones otherwise;
/// files that changed are written again.
pub(crate) fn resume_partitions(data: &Path, state: &mut State) {
    state.opened();
    for (tenant, t) in state.tenants.iter_mut() {
        for (set, vectors) in SETS.into_iter().zip([&mut t.vectors, &mut t.sentences]) {
            let path = partitions_path(data, tenant, set);
            let saved = std::fs::read(&path).ok();
            let resumed = vectors.resume_partitions(saved.as_deref());
            tracing::debug!(tenant, set, ?resumed, "vector partitions");
            match resumed {
                PartitionsResumed::Restored => {}
                PartitionsResumed::Extended | PartitionsResumed::Trained => save(&path, vectors),
                PartitionsResumed::Unpartitioned if saved.is_some() => remove(&path),
                PartitionsResumed::Unpartitioned => {}
            }
        }
    }
}

/// Deletes `tenant`'s partition files (an erasure in it).
pub(crate) fn forget_tenant(data: &Path, tenant: &str) {
    for set in SETS {
        remove(&partitions_path(data, tenant, set));
    }
}

fn save(path: &Path, vectors: &VectorSet) {
    let Some(bytes) = vectors.saved_partitions() else {
        return;
    };
    let mut temp = path.as_os_str().to_owned();
    temp.push(".tmp");
    let temp = PathBuf::from(temp);
    let written = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(&temp, &bytes))
        .and_then(|()| std::fs::rename(&temp, path));
    if let Err(e) = written {
        // The next open trains them again.
        tracing::warn!(path = %path.display(), error = %e, "could not save vector partitions");
        std::fs::remove_file(&temp).ok();
    }
}

fn remove(path: &Path) {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "could not remove vector partitions")
        }
    }
}
