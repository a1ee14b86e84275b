//! Right-to-erasure (§6 `erase`): what to erase, and the intent file that
//! makes an interrupted erasure finish at the next open.
//!
//! An erasure is not a write that can be logged and replayed like the others:
//! it removes bytes. The store records the selector (names and ids, never
//! content) in `ERASING` before it starts and removes the file when every
//! copy is gone; a store that opens and finds the file runs the erasure again
//! (each step is idempotent) before it serves anything.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{IndexerError, Result};
use crate::faults;

/// File name of the pending-erasure record inside the data directory.
pub(crate) const INTENT_FILE: &str = "ERASING";

/// Which memories an erasure removes, within one tenant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum EraseSelector {
    /// These memories (ids as text).
    Memories {
        /// Their tenant.
        tenant: String,
        /// Their ids.
        ids: Vec<String>,
    },
    /// Every memory of one bank (e.g. one user's `user:<id>`).
    Bank {
        /// The tenant.
        tenant: String,
        /// The bank.
        bank: String,
    },
    /// Everything the tenant ever stored.
    Tenant {
        /// The tenant.
        tenant: String,
    },
}

/// SQL string literal. Tenant and bank names are validated to
/// `[A-Za-z0-9._:@/-]` and ids are UUIDs, so quoting is defence in depth.
pub(crate) fn literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

impl EraseSelector {
    /// The tenant it is confined to.
    pub fn tenant(&self) -> &str {
        match self {
            EraseSelector::Memories { tenant, .. }
            | EraseSelector::Bank { tenant, .. }
            | EraseSelector::Tenant { tenant } => tenant,
        }
    }

    /// The `memories` rows it covers, as a LanceDB filter.
    pub(crate) fn memories_filter(&self) -> String {
        let tenant = format!("tenant = {}", literal(self.tenant()));
        match self {
            EraseSelector::Memories { ids, .. } => {
                format!("{tenant} AND {}", id_list("id", ids))
            }
            EraseSelector::Bank { bank, .. } => format!("{tenant} AND bank = {}", literal(bank)),
            EraseSelector::Tenant { .. } => tenant,
        }
    }
}

/// `column IN ('a', 'b')`, or a false condition for an empty list.
pub(crate) fn id_list(column: &str, ids: &[String]) -> String {
    if ids.is_empty() {
        return "false".to_string();
    }
    let quoted: Vec<String> = ids.iter().map(|id| literal(id)).collect();
    format!("{column} IN ({})", quoted.join(", "))
}

/// Records the erasure about to run, durably.
pub(crate) fn write_intent(dir: &Path, selector: &EraseSelector) -> Result<()> {
    let path = dir.join(INTENT_FILE);
    let json = serde_json::to_vec(selector)
        .map_err(|e| IndexerError::corrupt("erase intent", e.to_string()))?;
    let io = IndexerError::io(&path);
    let mut file = faults::create(&path).map_err(IndexerError::io(&path))?;
    faults::write_all(&mut file, &path, &json)
        .and_then(|()| faults::sync_data(&file, &path))
        .map_err(io)?;
    sync_dir(dir)
}

/// The erasure an earlier process started and did not finish, if any.
pub(crate) fn read_intent(dir: &Path) -> Result<Option<EraseSelector>> {
    let path = dir.join(INTENT_FILE);
    match std::fs::read(&path) {
        Ok(bytes) => match serde_json::from_slice(&bytes) {
            Ok(selector) => Ok(Some(selector)),
            // Torn while being written: the erasure had not started, and the
            // call that asked for it did not return.
            Err(_) => {
                tracing::warn!(path = %path.display(), "ignoring a torn erase intent");
                clear_intent(dir)?;
                Ok(None)
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(IndexerError::io(&path)(e)),
    }
}

/// Marks the erasure finished.
pub(crate) fn clear_intent(dir: &Path) -> Result<()> {
    let path = dir.join(INTENT_FILE);
    match faults::remove_file(&path) {
        Ok(()) => sync_dir(dir),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(IndexerError::io(&path)(e)),
    }
}

fn sync_dir(dir: &Path) -> Result<()> {
    faults::sync_dir(dir).map_err(IndexerError::io(dir))
}
