//! Writing a derived file (one that can be made again from the tables):
//! whole, under a temporary name, then renamed into place, so a reader
//! sees the old file or the new one and never part of one, and a mapping
//! of the old file keeps its inode. No fsync: a file lost in a crash is
//! made again.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Writes `parts`, one after the other, as the file at `path` (creating
/// its directory), through a temporary name of this process and a rename.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("derived").join("x.bin");
/// recall_indexer::write_derived(&path, &[b"head", b"body"])?;
/// assert_eq!(std::fs::read(&path)?, b"headbody");
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn write_derived(path: &Path, parts: &[&[u8]]) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut temp = path.as_os_str().to_owned();
    temp.push(format!(".{}.tmp", std::process::id()));
    let temp = PathBuf::from(temp);
    let written = File::create(&temp)
        .and_then(|mut file| parts.iter().try_for_each(|part| file.write_all(part)))
        .and_then(|()| std::fs::rename(&temp, path));
    if written.is_err() {
        std::fs::remove_file(&temp).ok();
    }
    written
}
