//! The audit log: an append-only, fsynced JSON-lines file of what happened to
//! which memory, by whom — ids and content hashes, never content. It is the
//! one file an erasure does not rewrite: it holds no text to erase, and it is
//! the record that the erasure happened.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{IndexerError, Result};
use crate::faults;

/// File name of the audit log inside the data directory.
pub(crate) const AUDIT_FILE: &str = "audit.jsonl";

/// What an audit entry records. Written as its lower-case name (`"forget"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum AuditOp {
    /// A memory was stored, or a write was deduplicated into one.
    Remember,
    /// A memory replaced another.
    Supersede,
    /// A memory was soft-deleted.
    Forget,
    /// Memories were physically erased.
    Erase,
    /// A quarantined memory was let through after review.
    Release,
    /// A consolidation pass applied a proposal: a memory confirmed by its
    /// near copies, which it superseded.
    Consolidate,
    /// A proposal was accepted: a held memory is served from now on, and
    /// what it supersedes is superseded.
    Accept,
    /// A proposal was rejected.
    Reject,
}

impl AuditOp {
    /// The name written to the log.
    pub fn as_str(self) -> &'static str {
        match self {
            AuditOp::Remember => "remember",
            AuditOp::Supersede => "supersede",
            AuditOp::Forget => "forget",
            AuditOp::Erase => "erase",
            AuditOp::Release => "release",
            AuditOp::Consolidate => "consolidate",
            AuditOp::Accept => "accept",
            AuditOp::Reject => "reject",
        }
    }
}

impl std::fmt::Display for AuditOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// One line of the audit log.
///
/// ```
/// use recall_indexer::{AuditEntry, AuditOp};
/// let entry = AuditEntry::new(1_700_000_000_000, "acme", AuditOp::Forget).id("0190f0c4-0000-7000-8000-000000000000");
/// assert_eq!(entry.ids.len(), 1);
/// let line = serde_json::to_string(&entry)?;
/// assert!(line.contains(r#""op":"forget""#));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// When (ms since the Unix epoch).
    pub at_ms: i64,
    /// The tenant it concerns.
    pub tenant: String,
    /// What happened.
    pub op: AuditOp,
    /// Who asked for it, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    /// The memories it concerns.
    #[serde(default)]
    pub ids: Vec<String>,
    /// SHA-256 of the stored content (hex), for writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_sha256: Option<String>,
    /// Non-content detail: redaction counts, the screening rule, a bank name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl AuditEntry {
    /// An entry with no ids, actor, hash or detail yet.
    pub fn new(at_ms: i64, tenant: impl Into<String>, op: AuditOp) -> AuditEntry {
        AuditEntry {
            at_ms,
            tenant: tenant.into(),
            op,
            actor: None,
            ids: Vec::new(),
            content_sha256: None,
            detail: None,
        }
    }

    /// Adds a memory id.
    pub fn id(mut self, id: impl Into<String>) -> AuditEntry {
        self.ids.push(id.into());
        self
    }

    /// Sets who asked.
    pub fn actor(mut self, actor: Option<String>) -> AuditEntry {
        self.actor = actor;
        self
    }

    /// Sets the content hash.
    pub fn content_sha256(mut self, hash: String) -> AuditEntry {
        self.content_sha256 = Some(hash);
        self
    }

    /// Sets the detail.
    pub fn detail(mut self, detail: Option<String>) -> AuditEntry {
        self.detail = detail;
        self
    }
}

/// The open audit log.
#[derive(Debug)]
pub(crate) struct AuditLog {
    path: PathBuf,
    file: File,
    /// Bytes of whole lines in the file: a failed append is cut back to it.
    len: u64,
    /// Why the log takes no more entries until a reopen (see
    /// `Wal::broken`: a failed fsync, or a failed append that could not be
    /// cut off).
    broken: Option<String>,
}

impl AuditLog {
    /// Opens (creating) the log and cuts a torn last line (a write that was
    /// never acknowledged). Reads the file from its end back to the last
    /// line break only: the log grows with every write (180 MB after a
    /// million), and reading it whole cost every open that much memory and
    /// time for one byte's answer.
    pub(crate) fn open(dir: &Path) -> Result<AuditLog> {
        let path = dir.join(AUDIT_FILE);
        let io = || IndexerError::io(&path);
        let file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(&path)
            .map_err(io())?;
        let len = file.metadata().map_err(io())?.len();
        let whole = whole_lines_len(&file, len).map_err(io())?;
        if whole < len {
            tracing::warn!(path = %path.display(), "audit log had a torn last line; cutting it off");
            file.set_len(whole).map_err(io())?;
            file.sync_data().map_err(io())?;
        }
        Ok(AuditLog {
            path,
            file,
            len: whole,
            broken: None,
        })
    }

    /// Appends entries as one write and fsyncs it.
    pub(crate) fn append(&mut self, entries: &[AuditEntry]) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let mut buf = Vec::new();
        for entry in entries {
            serde_json::to_writer(&mut buf, entry)
                .map_err(|e| IndexerError::corrupt("audit entry", e.to_string()))?;
            buf.push(b'\n');
        }
        if let Some(reason) = &self.broken {
            return Err(IndexerError::ReadOnly {
                reason: reason.clone(),
            });
        }
        let path = self.path.as_path();
        if let Err(e) = faults::write_all(&mut self.file, path, &buf) {
            // A torn line would make every later read of the log fail.
            if let Err(cut) = faults::set_len(&self.file, path, self.len) {
                self.broken = Some(format!(
                    "a failed append ({e}) could not be cut off the audit log ({cut}); reopen the store"
                ));
            }
            return Err(IndexerError::io(path)(e));
        }
        if let Err(e) = faults::sync_data(&self.file, path) {
            // Not acknowledged: cut off, and never trusted to a later fsync.
            let _ = faults::set_len(&self.file, path, self.len);
            self.broken = Some(format!(
                "an fsync of the audit log failed ({e}); reopen the store"
            ));
            return Err(IndexerError::io(path)(e));
        }
        self.len += buf.len() as u64;
        Ok(())
    }

    /// Why the log refuses entries until the store is reopened, if it does.
    pub(crate) fn broken(&self) -> Option<&str> {
        self.broken.as_deref()
    }

    /// Every entry about `tenant`, oldest first. A line that does not parse
    /// is reported as corruption rather than skipped.
    pub(crate) fn read(&self, tenant: &str) -> Result<Vec<AuditEntry>> {
        let raw = std::fs::read(&self.path).map_err(IndexerError::io(&self.path))?;
        let mut out = Vec::new();
        for (n, line) in raw.split(|b| *b == b'\n').enumerate() {
            if line.is_empty() {
                continue;
            }
            let entry: AuditEntry = serde_json::from_slice(line)
                .map_err(|e| IndexerError::corrupt("audit log", format!("line {}: {e}", n + 1)))?;
            if entry.tenant == tenant {
                out.push(entry);
            }
        }
        Ok(out)
    }
}

/// The length of `file`'s first `len` bytes up to and including its last
/// line break (0 without one), read backwards a chunk at a time. Seeking
/// moves only the read position: the log is opened to append, so writes
/// still go to its end.
fn whole_lines_len(mut file: &File, len: u64) -> std::io::Result<u64> {
    use std::io::{Read, Seek, SeekFrom};
    const CHUNK: u64 = 64 * 1024;
    let mut end = len;
    let mut buf = vec![0u8; CHUNK as usize];
    while end > 0 {
        let start = end.saturating_sub(CHUNK);
        let chunk = &mut buf[..(end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(chunk)?;
        if let Some(at) = chunk.iter().rposition(|b| *b == b'\n') {
            return Ok(start + at as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Opens a log whose file holds `bytes` and returns what is left of it.
    fn reopened(bytes: &[u8]) -> (u64, Vec<u8>) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(AUDIT_FILE), bytes).unwrap();
        let log = AuditLog::open(dir.path()).unwrap();
        (log.len, std::fs::read(dir.path().join(AUDIT_FILE)).unwrap())
    }

    #[test]
    fn a_torn_last_line_is_cut_off_however_long_it_is() {
        let lines = b"{\"a\":1}\n{\"b\":2}\n".to_vec();
        assert_eq!(reopened(&lines), (lines.len() as u64, lines.clone()));

        let mut torn = lines.clone();
        torn.extend_from_slice(b"{\"c\":");
        assert_eq!(reopened(&torn), (lines.len() as u64, lines.clone()));

        // A torn line longer than the chunk read backwards, and a whole
        // line longer than it before: the cut lands after the last break.
        let mut long = vec![b'x'; 200_000];
        long.push(b'\n');
        let kept = long.clone();
        long.extend(std::iter::repeat_n(b'y', 150_000));
        assert_eq!(reopened(&long), (kept.len() as u64, kept));

        // No line break at all, and an empty file.
        assert_eq!(reopened(b"{\"torn\""), (0, Vec::new()));
        assert_eq!(reopened(b""), (0, Vec::new()));
    }
}
