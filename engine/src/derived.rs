//! Files the engine keeps beside the store: each tenant's vector
//! partitions, in `DATA/derived/partitions/`, so it opens faster (written
//! by an open that trained or extended them, after an import, and at
//! close); and its
//! full blocks of vector rows, in `DATA/derived/vectors/`, mapped instead
//! of held on the heap (`recall_indexer::MappedBlocks`).
//!
//! They are derived, never the truth: a missing, damaged or stale file
//! (one made for other rows) is ignored and the partitions are trained
//! again, as they were before these files existed, or the block is written
//! again from the rows the store read; a file that cannot be written costs
//! the next open that training, or keeps the block in memory, and nothing
//! else. They are written without fsync for that reason. An erasure
//! deletes its tenant's files (they hold its vectors, or averages of
//! them). Only the process holding the store's lock writes them.

use std::path::{Path, PathBuf};

use recall_indexer::{IndexerError, MappedBlocks, PartitionsResumed, Record, RowKey, VectorSet};
use sha2::{Digest, Sha256};

use crate::state::State;

/// The two vector sets of a tenant, as their files name them.
const SETS: [&str; 2] = ["whole", "sentences"];

fn partitions_dir(data: &Path) -> PathBuf {
    data.join("derived").join("partitions")
}

/// A tenant's name in file names: a hash of it, so no tenant name
/// becomes a path.
fn tenant_key(tenant: &str) -> String {
    let digest = Sha256::digest(tenant.as_bytes());
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// The file of `tenant`'s `set`.
fn partitions_path(data: &Path, tenant: &str, set: &str) -> PathBuf {
    partitions_dir(data).join(format!("{}.{set}", tenant_key(tenant)))
}

/// The directory of `tenant`'s `set`'s block files.
fn vectors_dir(data: &Path, tenant: &str, set: &str) -> PathBuf {
    data.join("derived")
        .join("vectors")
        .join(format!("{}.{set}", tenant_key(tenant)))
}

/// The key a vector row is stored under in its block file: its memory's
/// id and the hash of its folded text. The text decides the vector (the
/// store records its model), so a row adopted by key at an open is the
/// vector the memory's own row holds, even for an id written again after
/// an erasure.
pub(crate) fn row_key(id: &uuid::Uuid, folded_hash: u64) -> RowKey {
    let mut key = [0; recall_indexer::ROW_KEY_BYTES];
    key[..16].copy_from_slice(id.as_bytes());
    key[16..].copy_from_slice(&folded_hash.to_le_bytes());
    key
}

/// Whether any tenant has a block file of `dim`-wide vectors that an open
/// can adopt rows from by key: the open then reads the memories without
/// their vectors. (Files of an older format are not: that open reads
/// every vector and writes them again.)
pub(crate) fn has_vector_files(data: &Path, dim: usize) -> bool {
    let Ok(tenants) = std::fs::read_dir(data.join("derived").join("vectors")) else {
        return false;
    };
    tenants.flatten().any(|dir| {
        dir.file_name()
            .to_string_lossy()
            .ends_with(&format!(".{}", SETS[0]))
            && VectorSet::adoptable_files(&dir.path(), dim)
    })
}

/// Whether `vectors` (of at least `from` rows) has full blocks of rows in
/// memory to hand to files ([`crate::WriteConfig::vector_files_from`]).
fn to_map(vectors: &VectorSet, from: usize) -> bool {
    vectors.len() >= from && vectors.blocks_to_map() > 0
}

/// Whether any tenant's vector set has a full block of rows to map.
pub(crate) fn has_blocks_to_map(state: &State, from: usize) -> bool {
    state
        .tenants
        .values()
        .any(|t| to_map(&t.vectors, from) || to_map(&t.sentences, from))
}

/// Each full block of vector rows `state` holds in memory, in its file
/// and mapped (see [`take_vector_files`]). Reads the state only, so a live
/// engine runs it under the read lock. A set whose files cannot be written
/// keeps its rows in memory (logged).
pub(crate) fn vector_files(
    data: &Path,
    state: &State,
    from: usize,
) -> Vec<(String, usize, MappedBlocks)> {
    let mut out = Vec::new();
    for (tenant, t) in &state.tenants {
        for (which, (set, vectors)) in SETS.into_iter().zip([&t.vectors, &t.sentences]).enumerate()
        {
            if !to_map(vectors, from) {
                continue;
            }
            let dir = vectors_dir(data, tenant, set);
            let key_of = |owner: usize| {
                t.memories
                    .get(owner)
                    .map_or([0; recall_indexer::ROW_KEY_BYTES], |m| {
                        row_key(&m.id, m.folded_hash)
                    })
            };
            match vectors.map_to_files(&dir, key_of) {
                Ok(mapped) => {
                    tracing::debug!(
                        tenant = &**tenant,
                        set,
                        written = mapped.written,
                        found = mapped.found,
                        "vector blocks mapped"
                    );
                    out.push((tenant.to_string(), which, mapped));
                }
                Err(e) => {
                    tracing::warn!(tenant = &**tenant, set, error = %e, "vector rows stay in memory");
                }
            }
        }
    }
    out
}

/// Puts the mappings of [`vector_files`] in place of the blocks they were
/// made from.
pub(crate) fn take_vector_files(state: &mut State, files: Vec<(String, usize, MappedBlocks)>) {
    for (tenant, which, mapped) in files {
        if let Some(t) = state.tenants.get_mut(tenant.as_str()) {
            let vectors = match which {
                0 => &mut t.vectors,
                _ => &mut t.sentences,
            };
            vectors.take_mapped(mapped);
        }
    }
}

/// [`vector_files`] then [`take_vector_files`], for a state no one else
/// reads (an open).
pub(crate) fn map_vector_blocks(data: &Path, state: &mut State, from: usize) {
    if state.vectors_grew && has_blocks_to_map(state, from) {
        let files = vector_files(data, state, from);
        take_vector_files(state, files);
    }
    state.vectors_grew = false;
}

/// How many memories with a vector `tenant` had when its partitions were
/// last saved (the header of its `whole` file; `None` without one): a
/// hint of the tenant's size before its rows are read.
fn saved_rows(data: &Path, tenant: &str) -> Option<usize> {
    saved_rows_at(&partitions_path(data, tenant, SETS[0]))
}

/// A tenant's room at an open: its saved partitions' rows and a sixteenth
/// more. An import and a close save the partitions, so the memories written
/// after the last save (before a process ended without a close) are not
/// counted; a tenant that outgrew its room would be copied whole, into
/// fresh pages, as its last rows are folded, and room never written is
/// never resident.
fn with_room_to_grow(rows: usize) -> usize {
    rows.saturating_add(rows / 16)
}

/// How many rows the partitions saved at `path` hold, from its header.
fn saved_rows_at(path: &Path) -> Option<usize> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    let mut header = [0u8; recall_indexer::SAVED_HEADER_BYTES];
    file.read_exact(&mut header).ok()?;
    recall_indexer::saved_partitions_rows(&header, len)
}

/// Saves each vector set's partitions that its file does not hold yet
/// (the file holds fewer or more rows, or there is none), so the next
/// open restores them instead of training: a store that an import filled
/// and nothing opened since had none, and its first open trained them,
/// the longest step of that open (docs/MEASUREMENTS.md). A set whose
/// partitions assigned no row since its file was written costs a header
/// read. Returns how many files it wrote.
/// Reads the state only; a live engine runs it under the read lock.
pub(crate) fn save_partitions(data: &Path, state: &State) -> usize {
    let mut written = 0;
    for (tenant, t) in &state.tenants {
        for (set, vectors) in SETS.into_iter().zip([&t.vectors, &t.sentences]) {
            let Some(rows) = vectors.partitioned_rows() else {
                continue;
            };
            let path = partitions_path(data, tenant, set);
            if saved_rows_at(&path) != Some(rows) && save(&path, vectors) {
                written += 1;
            }
        }
    }
    written
}

/// Before an open folds `records`: each tenant they bring that the state
/// does not hold yet gets room for as many memories as its saved
/// partitions say it had ([`State::reserve_tenant`]), and, unless that is
/// too few for vector files (`from` rows), its whole vectors adopt the
/// block files that hold their rows ([`VectorSet::adopt_files_from`]).
pub(crate) fn prepare_new_tenants(data: &Path, state: &mut State, records: &[Record], from: usize) {
    let mut last: Option<&str> = None;
    for record in records {
        let Record::Memory(row) = record else {
            continue;
        };
        // Rows come in runs of one tenant: look each run up once.
        if last == Some(row.tenant.as_str()) {
            continue;
        }
        last = Some(&row.tenant);
        if state.tenants.contains_key(&row.tenant) {
            continue;
        }
        let rows = saved_rows(data, &row.tenant);
        state.reserve_tenant(&row.tenant, rows.map_or(0, with_room_to_grow));
        // Only the whole vectors: the sentence vectors are read with
        // their rows (rare, and no key names one sentence of several). A
        // tenant below `from` keeps its rows in memory, as it would grow.
        let dir = vectors_dir(data, &row.tenant, SETS[0]);
        if rows.is_some_and(|rows| rows < from) || !dir.is_dir() {
            continue;
        }
        if let Some(t) = state.tenants.get_mut(&row.tenant) {
            t.vectors.adopt_files_from(&dir);
        }
    }
}

/// Ends [`State::opening`]: each tenant's vector sets take their saved
/// partitions when those match their rows, and train new ones otherwise;
/// files that changed are written again.
pub(crate) fn resume_partitions(data: &Path, state: &mut State) {
    state.opened();
    for (tenant, t) in state.tenants.iter_mut() {
        for (set, vectors) in SETS.into_iter().zip([&mut t.vectors, &mut t.sentences]) {
            let path = partitions_path(data, tenant, set);
            let adopted = vectors.stop_adopting();
            let saved = std::fs::read(&path).ok();
            let resumed = vectors.resume_partitions(saved.as_deref());
            tracing::debug!(tenant, set, adopted, ?resumed, "vector partitions");
            match resumed {
                PartitionsResumed::Restored => {}
                PartitionsResumed::Extended | PartitionsResumed::Trained => {
                    save(&path, vectors);
                }
                PartitionsResumed::Unpartitioned if saved.is_some() => remove(&path),
                PartitionsResumed::Unpartitioned => {}
            }
        }
    }
}

/// Deletes `tenant`'s partition and vector files (an erasure in it). A
/// live mapping of a deleted file reads on until the state holding it is
/// replaced, which the erasure does next. The vector files hold the
/// tenant's vectors themselves, so one that cannot be deleted is an error:
/// the erasure stops before it starts.
pub(crate) fn forget_tenant(data: &Path, tenant: &str) -> Result<(), IndexerError> {
    for set in SETS {
        remove(&partitions_path(data, tenant, set));
        let dir = vectors_dir(data, tenant, set);
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(IndexerError::Io { path: dir, source }),
        }
    }
    Ok(())
}

/// Writes `vectors`' partitions to `path`; whether it did.
fn save(path: &Path, vectors: &VectorSet) -> bool {
    let Some(bytes) = vectors.saved_partitions() else {
        return false;
    };
    match recall_indexer::write_derived(path, &[&bytes]) {
        Ok(()) => true,
        Err(e) => {
            // The next open trains them again.
            tracing::warn!(path = %path.display(), error = %e, "could not save vector partitions");
            false
        }
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
