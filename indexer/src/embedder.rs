//! Text → vector. The default is all-MiniLM-L6-v2 (int8 ONNX, 384-d, mean
//! pooling, L2-normalized) run locally by fastembed on a dynamically loaded
//! ONNX Runtime; nothing is fetched from a model hub. `scripts/setup.sh` puts
//! the files in `models/`.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use fastembed::{
    InitOptionsUserDefined, Pooling, TextEmbedding, TokenizerFiles, UserDefinedEmbeddingModel,
};

use crate::error::{IndexerError, Result};

/// Width of the default model's vectors.
pub const DEFAULT_DIM: usize = 384;
/// The ONNX Runtime library the setup script installs next to the model.
pub const ORT_LIBRARY: &str = "libonnxruntime.so.1.31.1";

/// Turns texts into vectors. Implementations must be deterministic for a given
/// text; the engine checks every vector (width, finiteness) and normalizes it.
pub trait Embedder: Send + Sync {
    /// Width of every vector this embedder returns.
    fn dim(&self) -> usize;
    /// A short name for logs and `recall status`.
    fn name(&self) -> &str;
    /// Embeds a batch of texts, one vector per text, in order.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>>;
    /// Tokens in each text by this embedder's tokenizer, untruncated, when it
    /// has one (used to keep briefings within a token budget). Default: None.
    fn count_tokens(&self, texts: &[&str]) -> Option<Vec<usize>> {
        let _ = texts;
        None
    }
}

/// Runs `embedder` and checks its output: one vector per text, the promised
/// width, finite values, non-zero length. Returns unit vectors.
///
/// ```
/// use recall_indexer::{embed_checked, Embedder, HashEmbedder};
/// let e = HashEmbedder::new(8);
/// let v = embed_checked(&e, &["hello world"]).unwrap();
/// let norm: f32 = v[0].iter().map(|x| x * x).sum::<f32>().sqrt();
/// assert!((norm - 1.0).abs() < 1e-5);
/// ```
pub fn embed_checked(embedder: &dyn Embedder, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
    if texts.is_empty() {
        return Ok(Vec::new());
    }
    let vectors = embedder.embed(texts)?;
    if vectors.len() != texts.len() {
        return Err(IndexerError::Embedding(format!(
            "{} returned {} vectors for {} texts",
            embedder.name(),
            vectors.len(),
            texts.len()
        )));
    }
    vectors
        .into_iter()
        .map(|v| normalized(v, embedder.dim()))
        .collect()
}

/// Checks a vector's width and values and scales it to unit length.
pub fn normalized(mut v: Vec<f32>, dim: usize) -> Result<Vec<f32>> {
    if v.len() != dim {
        return Err(IndexerError::Embedding(format!(
            "vector has {} dimensions, expected {dim}",
            v.len()
        )));
    }
    if v.iter().any(|x| !x.is_finite()) {
        return Err(IndexerError::Embedding(
            "vector holds NaN or infinity".into(),
        ));
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm == 0.0 || !norm.is_finite() {
        return Err(IndexerError::Embedding("vector has zero length".into()));
    }
    v.iter_mut().for_each(|x| *x /= norm);
    Ok(v)
}

/// The default embedder: fastembed over a local ONNX model.
pub struct FastEmbedder {
    model: Mutex<TextEmbedding>,
    /// The width of its vectors: `hidden_size` in its `config.json`.
    dim: usize,
    /// The model's tokenizer without truncation or padding, made once: a
    /// token budget needs full counts, and cloning the tokenizer (its 30k-word
    /// vocabulary) per call cost more than the recall it rendered.
    counter: tokenizers::Tokenizer,
    name: String,
}

static ORT_LOADED: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();

/// Loads ONNX Runtime once per process: `ORT_DYLIB_PATH` when set, otherwise
/// the library the setup script put beside the model.
fn load_runtime(model_dir: &Path) -> Result<()> {
    let wanted = match std::env::var_os("ORT_DYLIB_PATH") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => model_dir.join(ORT_LIBRARY),
    };
    let loaded = ORT_LOADED.get_or_init(|| {
        if !wanted.exists() {
            return Err(format!("{} is missing", wanted.display()));
        }
        ort::init_from(&wanted)
            .map(|_environment| wanted.clone())
            .map_err(|e| format!("{}: {e}", wanted.display()))
    });
    match loaded {
        Ok(_) => Ok(()),
        Err(_) if !wanted.exists() => Err(IndexerError::ModelMissing { path: wanted }),
        Err(e) => Err(IndexerError::Embedding(format!(
            "cannot load ONNX Runtime: {e}"
        ))),
    }
}

impl FastEmbedder {
    /// Loads a sentence-embedding model from `dir` (`model.onnx`,
    /// `tokenizer.json`, `config.json`, `special_tokens_map.json`,
    /// `tokenizer_config.json`, and the ONNX Runtime library unless
    /// `ORT_DYLIB_PATH` names one): all-MiniLM-L6-v2 as `scripts/setup.sh`
    /// installs it, or another mean-pooled encoder such as
    /// all-mpnet-base-v2 (`scripts/setup.sh --mpnet`). Its width is
    /// `hidden_size` in `config.json`, its name `recall_name` there
    /// (all-MiniLM-L6-v2's when absent).
    ///
    /// A missing file is [`IndexerError::ModelMissing`], never a silent fallback.
    pub fn from_dir(dir: &Path) -> Result<FastEmbedder> {
        let read = |name: &str| -> Result<Vec<u8>> {
            let path = dir.join(name);
            if !path.exists() {
                return Err(IndexerError::ModelMissing { path });
            }
            std::fs::read(&path).map_err(IndexerError::io(path))
        };
        let onnx = read("model.onnx")?;
        let config = read("config.json")?;
        let (dim, name) = describe(&config)?;
        let tokenizer_files = TokenizerFiles {
            tokenizer_file: read("tokenizer.json")?,
            config_file: config,
            special_tokens_map_file: read("special_tokens_map.json")?,
            tokenizer_config_file: read("tokenizer_config.json")?,
        };
        load_runtime(dir)?;
        let model =
            UserDefinedEmbeddingModel::new(onnx, tokenizer_files).with_pooling(Pooling::Mean);
        // ONNX Runtime's pool threads spin after each run by default, and on
        // a small machine that spinning takes the cores the recall that
        // follows the query's embedding needs. Stopping it after each run
        // keeps the embedding as fast (docs/MEASUREMENTS.md, "MCP").
        let options = InitOptionsUserDefined::new()
            .with_max_length(256)
            .with_session_config("session.force_spinning_stop", "1");
        let embedding = TextEmbedding::try_new_from_user_defined(model, options)
            .map_err(|e| IndexerError::Embedding(format!("cannot load the model: {e}")))?;
        let mut counter = embedding.tokenizer.clone();
        counter
            .with_truncation(None)
            .map_err(|e| IndexerError::Embedding(format!("cannot set up the tokenizer: {e}")))?;
        counter.with_padding(None);
        Ok(FastEmbedder {
            model: Mutex::new(embedding),
            dim,
            counter,
            name,
        })
    }
}

/// A model directory's width and name, from its `config.json`.
fn describe(config: &[u8]) -> Result<(usize, String)> {
    let bad = |why: String| IndexerError::Embedding(format!("the model's config.json {why}"));
    let config: serde_json::Value =
        serde_json::from_slice(config).map_err(|e| bad(format!("is not JSON: {e}")))?;
    let dim = config
        .get("hidden_size")
        .and_then(serde_json::Value::as_u64)
        .filter(|&d| d > 0)
        .ok_or_else(|| bad("has no positive hidden_size".into()))?;
    let name = config
        .get("recall_name")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("all-MiniLM-L6-v2 (int8, fastembed)");
    Ok((dim as usize, name.to_string()))
}

impl Embedder for FastEmbedder {
    fn dim(&self) -> usize {
        self.dim
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let mut model = self
            .model
            .lock()
            .map_err(|_| IndexerError::Embedding("model lock poisoned".into()))?;
        model
            .embed(texts, Some(64))
            .map_err(|e| IndexerError::Embedding(e.to_string()))
    }

    fn count_tokens(&self, texts: &[&str]) -> Option<Vec<usize>> {
        texts
            .iter()
            .map(|t| self.counter.encode(*t, false).ok().map(|e| e.len()))
            .collect()
    }
}

/// A deterministic, model-free embedder for unit tests and speed benches:
/// hashed bag of lowercase words (with sign hashing). Texts sharing words are
/// similar; it knows nothing of meaning.
///
/// ```
/// use recall_indexer::{embed_checked, HashEmbedder};
/// let e = HashEmbedder::new(64);
/// let v = embed_checked(&e, &["deploy the gateway", "deploy the gateway", "cats"]).unwrap();
/// assert_eq!(v[0], v[1]);
/// assert_ne!(v[0], v[2]);
/// ```
#[derive(Debug, Clone)]
pub struct HashEmbedder {
    dim: usize,
}

impl HashEmbedder {
    /// A hash embedder producing `dim`-wide vectors.
    pub fn new(dim: usize) -> HashEmbedder {
        HashEmbedder { dim: dim.max(1) }
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl Embedder for HashEmbedder {
    fn dim(&self) -> usize {
        self.dim
    }

    fn name(&self) -> &str {
        "hash (test)"
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        Ok(texts
            .iter()
            .map(|text| {
                let mut v = vec![0f32; self.dim];
                for word in text
                    .split(|c: char| !c.is_alphanumeric())
                    .filter(|w| !w.is_empty())
                {
                    let h = fnv1a(word.to_lowercase().as_bytes());
                    let sign = if h >> 63 == 0 { 1.0 } else { -1.0 };
                    v[(h % self.dim as u64) as usize] += sign;
                }
                if v.iter().all(|x| *x == 0.0) {
                    v[0] = 1.0;
                }
                v
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_directory_says_its_width_and_name_in_its_config() {
        let minilm = br#"{"hidden_size": 384, "model_type": "bert"}"#;
        assert_eq!(
            describe(minilm).unwrap(),
            (384, "all-MiniLM-L6-v2 (int8, fastembed)".to_string())
        );
        let mpnet = br#"{"hidden_size": 768, "recall_name": "all-mpnet-base-v2 (int8)"}"#;
        assert_eq!(
            describe(mpnet).unwrap(),
            (768, "all-mpnet-base-v2 (int8)".to_string())
        );
        assert!(describe(b"{}").is_err());
        assert!(describe(br#"{"hidden_size": 0}"#).is_err());
        assert!(describe(b"not json").is_err());
    }
}
