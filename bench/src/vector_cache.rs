//! Embeddings cached on disk by content hash, so a corpus is embedded once
//! and every later run (a sweep, a re-run after a scorer change) reads them.
//!
//! One append-only file per embedder and width,
//! `<dir>/<embedder>-<dim>.vectors`: records of the text's SHA-256 (32
//! bytes) followed by `dim` little-endian f32. A torn last record (a run
//! killed mid-append) is ignored at load.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use indicatif::ProgressBar;
use recall::{Embedder, FastEmbedder};
use sha2::{Digest, Sha256};

/// The default cache directory: `$RECALL_VECTOR_CACHE`, else
/// `~/.cache/recall/vectors`, else `./.recall-vectors`.
pub fn default_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("RECALL_VECTOR_CACHE") {
        return PathBuf::from(dir);
    }
    std::env::var_os("HOME").map_or_else(
        || PathBuf::from(".recall-vectors"),
        |home| PathBuf::from(home).join(".cache/recall/vectors"),
    )
}

/// Vectors by content hash, backed by a file.
pub struct VectorCache {
    embedder: Arc<dyn Embedder>,
    path: PathBuf,
    /// Shared with the [`VectorCache::cached_embedder`]s handed out.
    vectors: Arc<HashMap<[u8; 32], Vec<f32>>>,
}

fn key(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

impl VectorCache {
    /// Opens (or starts) the cache of `embedder` under `dir`.
    pub fn open(dir: &Path, embedder: Arc<dyn Embedder>) -> std::io::Result<VectorCache> {
        std::fs::create_dir_all(dir)?;
        let dim = embedder.dim();
        let name: String = embedder
            .name()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let path = dir.join(format!("{name}-{dim}.vectors"));
        let mut vectors = HashMap::new();
        if let Ok(bytes) = std::fs::read(&path) {
            let record = 32 + 4 * dim;
            for chunk in bytes.chunks_exact(record) {
                let mut k = [0u8; 32];
                k.copy_from_slice(&chunk[..32]);
                let v = chunk[32..]
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect();
                vectors.insert(k, v);
            }
        }
        Ok(VectorCache {
            embedder,
            path,
            vectors: Arc::new(vectors),
        })
    }

    /// Vectors held.
    pub fn len(&self) -> usize {
        self.vectors.len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.vectors.is_empty()
    }

    /// The embedder behind the cache.
    pub fn embedder(&self) -> &Arc<dyn Embedder> {
        &self.embedder
    }

    /// Embeds every text not cached yet (in batches, with a progress bar
    /// when `progress` is set) and appends them to the file.
    pub fn fill(&mut self, texts: &[&str], progress: bool) -> anyhow::Result<()> {
        let mut missing: Vec<&str> = texts
            .iter()
            .copied()
            .filter(|t| !self.vectors.contains_key(&key(t)))
            .collect();
        missing.sort_unstable();
        missing.dedup();
        if missing.is_empty() {
            return Ok(());
        }
        let bar = if progress {
            crate::progress::bar(missing.len() as u64, "embedding")
        } else {
            ProgressBar::hidden()
        };
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        // An embedder handed out earlier keeps its own snapshot.
        let cached = Arc::make_mut(&mut self.vectors);
        for batch in missing.chunks(128) {
            let vectors = recall_indexer::embed_checked(self.embedder.as_ref(), batch)?;
            let mut out = Vec::with_capacity(batch.len() * (32 + 4 * self.embedder.dim()));
            for (text, v) in batch.iter().zip(vectors) {
                let k = key(text);
                out.extend_from_slice(&k);
                v.iter()
                    .for_each(|x| out.extend_from_slice(&x.to_le_bytes()));
                cached.insert(k, v);
            }
            file.write_all(&out)?;
            bar.inc(batch.len() as u64);
        }
        file.sync_data()?;
        bar.finish_and_clear();
        Ok(())
    }

    /// The cached vector of `text`, if [`VectorCache::fill`] saw it.
    pub fn get(&self, text: &str) -> Option<&Vec<f32>> {
        self.vectors.get(&key(text))
    }

    /// An embedder for an engine that answers from what the cache holds
    /// now and runs the model only for texts it misses (not saved). The
    /// engine then embeds what it chooses (contents and their sentences)
    /// as it would with the model, without running the model again.
    pub fn cached_embedder(&self) -> Arc<dyn Embedder> {
        Arc::new(CachedEmbedder {
            vectors: self.vectors.clone(),
            model: self.embedder.clone(),
        })
    }
}

/// See [`VectorCache::cached_embedder`].
struct CachedEmbedder {
    vectors: Arc<HashMap<[u8; 32], Vec<f32>>>,
    model: Arc<dyn Embedder>,
}

impl Embedder for CachedEmbedder {
    fn dim(&self) -> usize {
        self.model.dim()
    }

    fn name(&self) -> &str {
        self.model.name()
    }

    fn embed(&self, texts: &[&str]) -> recall_indexer::Result<Vec<Vec<f32>>> {
        let missing: Vec<&str> = texts
            .iter()
            .copied()
            .filter(|t| !self.vectors.contains_key(&key(t)))
            .collect();
        let mut computed = if missing.is_empty() {
            Vec::new()
        } else {
            self.model.embed(&missing)?
        }
        .into_iter();
        texts
            .iter()
            .map(|t| match self.vectors.get(&key(t)) {
                Some(v) => Ok(v.clone()),
                None => computed.next().ok_or_else(|| {
                    recall_indexer::IndexerError::Embedding(
                        "the model returned too few vectors".into(),
                    )
                }),
            })
            .collect()
    }

    fn count_tokens(&self, texts: &[&str]) -> Option<Vec<usize>> {
        self.model.count_tokens(texts)
    }
}

/// The embedder for quality runs: the real model, never a stand-in.
pub fn embedder(model_dir: Option<&Path>) -> anyhow::Result<Arc<dyn Embedder>> {
    let dir = match model_dir {
        Some(d) => d.to_path_buf(),
        None => recall::find_model_dir()?
            .context("no embedding model found: run scripts/setup.sh or pass --model-dir")?,
    };
    Ok(Arc::new(FastEmbedder::from_dir(&dir)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use recall::HashEmbedder;

    #[test]
    fn vectors_survive_a_reopen_and_a_torn_tail_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let embedder: Arc<dyn Embedder> = Arc::new(HashEmbedder::new(8));
        let mut cache = VectorCache::open(dir.path(), embedder.clone()).unwrap();
        cache
            .fill(&["alpha beta", "gamma", "alpha beta"], false)
            .unwrap();
        assert_eq!(cache.len(), 2);
        let v = cache.get("gamma").unwrap().clone();
        let path = cache.path.clone();
        drop(cache);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.extend_from_slice(&[1, 2, 3]);
        std::fs::write(&path, bytes).unwrap();
        let cache = VectorCache::open(dir.path(), embedder).unwrap();
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.get("gamma"), Some(&v));
        assert!(cache.get("delta").is_none());
    }

    /// Answers from the cache where it can, from the model elsewhere.
    struct Constant;
    impl Embedder for Constant {
        fn dim(&self) -> usize {
            2
        }
        fn name(&self) -> &str {
            "constant"
        }
        fn embed(&self, texts: &[&str]) -> recall_indexer::Result<Vec<Vec<f32>>> {
            Ok(texts.iter().map(|_| vec![0.0, 1.0]).collect())
        }
    }

    #[test]
    fn an_engine_embedder_reads_the_cache_and_runs_the_model_for_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let mut cache = VectorCache::open(dir.path(), Arc::new(Constant)).unwrap();
        cache.fill(&["seen"], false).unwrap();
        // A vector only the cache can give: the model says [0, 1] for everything.
        let file = std::fs::read(&cache.path).unwrap();
        assert_eq!(file.len(), 32 + 8);
        Arc::make_mut(&mut cache.vectors).insert(key("seen"), vec![1.0, 0.0]);
        let embedder = cache.cached_embedder();
        let got = embedder.embed(&["new", "seen", "new"]).unwrap();
        assert_eq!(got, [vec![0.0, 1.0], vec![1.0, 0.0], vec![0.0, 1.0]]);
        assert_eq!((embedder.dim(), embedder.name()), (2, "constant"));
    }
}
