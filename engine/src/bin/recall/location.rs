//! Where the CLI's store lives: `--data` names a directory or an
//! `s3://bucket/prefix` location; for the latter `--cache` names the local
//! directory of what is derived (default under the user's cache directory).

use std::path::{Path, PathBuf};

use anyhow::Context;
use recall::{Config, Remote};

/// The store's location as the engine is given it.
pub struct Location {
    /// The data directory, or the local cache of a remote store.
    pub dir: PathBuf,
    /// The tables and log, when they are on object storage.
    pub remote: Option<Remote>,
}

impl Location {
    /// Reads `--data` and `--cache`. An `s3://` location takes its
    /// endpoint and credentials from the standard `AWS_*` variables.
    pub fn resolve(data: &Path, cache: Option<&Path>) -> anyhow::Result<Location> {
        let Some(uri) = data.to_str().filter(|d| d.contains("://")) else {
            return Ok(Location {
                dir: data.to_path_buf(),
                remote: None,
            });
        };
        let remote = Remote::from_env(uri).with_context(|| format!("--data {uri}"))?;
        let dir = match cache {
            Some(dir) => dir.to_path_buf(),
            None => default_cache()?
                .join("stores")
                .join("s3")
                .join(remote.bucket())
                .join(remote.prefix()),
        };
        Ok(Location {
            dir,
            remote: Some(remote),
        })
    }

    /// The engine's configuration for this location.
    pub fn config(&self) -> Config {
        let config = Config::new(&self.dir);
        match &self.remote {
            Some(remote) => config.remote(remote.clone()),
            None => config,
        }
    }

    /// What to name in messages: the URI, or the directory.
    pub fn name(&self) -> String {
        match &self.remote {
            Some(remote) => remote.uri().to_string(),
            None => self.dir.display().to_string(),
        }
    }
}

/// `$XDG_CACHE_HOME/recall`, else `$HOME/.cache/recall`.
fn default_cache() -> anyhow::Result<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
        .context("neither XDG_CACHE_HOME nor HOME is set: give --cache DIR")?;
    Ok(base.join("recall"))
}
