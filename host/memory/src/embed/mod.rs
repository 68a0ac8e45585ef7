//! Sentence embeddings computed on this machine.
//!
//! [`Embedder`] is the seam; [`MiniLm`] runs all-MiniLM-L6-v2 (a 6-layer,
//! 384-dimension BERT; Reimers & Gurevych 2019, sentence-transformers) on
//! the CPU with our BERT encoder over candle's tensors (8-bit dense layers
//! where the CPU has candle's fast kernels for them, [`Precision`]),
//! tokenised by Hugging Face `tokenizers` from the model's own
//! `tokenizer.json`. The sentence vector is the mean of the last hidden
//! states over the attention mask, L2-normalised, as sentence-transformers'
//! `Pooling(mean)` + `Normalize` modules compute it.
//! Inputs are cut at [`MAX_TOKENS`] tokens (the model's
//! `max_seq_length`). The weights are read from a directory the operator
//! configures (`[memory] model_dir`, filled by `scripts/setup`); nothing is
//! ever downloaded.

use crate::error::{MemoryError, Result};
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

mod encoder;
mod gelu;

pub use encoder::Precision;

/// Longest input, in tokens (sentence-transformers' `max_seq_length` of
/// all-MiniLM-L6-v2); longer texts are truncated.
pub const MAX_TOKENS: usize = 256;

/// Most texts run through the encoder at once.
pub const MAX_GROUP: usize = 64;

/// Most tokens run through the encoder at once (a packed group of texts,
/// [`MAX_GROUP`] at most): large enough that the dense layers' products
/// see many rows, small enough that the group's activations stay a few
/// megabytes (1024 tokens × 1536 floats is 6 MB).
pub const PACK_TOKENS: usize = 1024;

/// The dimension of all-MiniLM-L6-v2's vectors.
pub const MINILM_DIM: usize = 384;

/// Largest model file read, bytes (all-MiniLM-L6-v2 is 90.9 MB).
pub const MAX_MODEL_BYTES: u64 = 512 * 1024 * 1024;

/// The number of threads candle would use for the model's matrix products
/// on this machine (`RAYON_NUM_THREADS` when set, else its count of the
/// CPUs it prefers).
///
/// candle asks for this count at every matrix product, and without
/// `RAYON_NUM_THREADS` it counts the CPUs again each time (on Linux by
/// reading `/proc/cpuinfo`): about 2 ms of a 10 ms query embedding on a
/// 2-vCPU machine. A program that embeds should call this once, before it
/// starts any thread, and set `RAYON_NUM_THREADS` to the result, as the
/// `capsaga` binary does.
pub fn model_threads() -> usize {
    candle_core::utils::get_num_threads()
}

/// How many threads an import embeds with at once: [`model_threads`]
/// when candle's own pool is off (`CANDLE_NUM_THREADS=1`: each product
/// then runs on the thread that asks for it, so the import's threads
/// share the CPUs and none spins waiting for another), else one (candle's
/// pool splits each product over the CPUs; its threads spin between
/// products, which on a busy machine was a quarter of an import's CPU
/// time, `perf`).
pub fn import_workers() -> usize {
    match std::env::var("CANDLE_NUM_THREADS").as_deref() {
        Ok("1") => model_threads(),
        _ => 1,
    }
}

/// Turns texts into unit vectors of a fixed dimension.
pub trait Embedder: Send + Sync {
    /// A stable name of the model (stored with the database, so that vectors
    /// of two models are never compared).
    fn model_id(&self) -> &str;

    /// The length of every vector.
    fn dim(&self) -> usize;

    /// One L2-normalised vector of [`Embedder::dim`] floats per text, in
    /// order. A text's vector does not depend on the other texts of the
    /// call (so that the same conversation indexed alone, in a batch of an
    /// import or in another batch ranks the same way).
    ///
    /// # Errors
    /// [`MemoryError::Embed`] when the model fails.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>>;

    /// The vector of one text.
    ///
    /// # Errors
    /// As [`Embedder::embed`].
    fn embed_one(&self, text: &str) -> Result<Vec<f32>> {
        self.embed(&[text])?
            .pop()
            .ok_or_else(|| MemoryError::Embed("the model returned no vector".into()))
    }
}

/// all-MiniLM-L6-v2 on the CPU.
pub struct MiniLm {
    model: encoder::Encoder,
    precision: Precision,
    // `Tokenizer::encode_batch` needs `&mut` for padding settings set once;
    // the lock is held for tokenisation only.
    tokenizer: Mutex<Tokenizer>,
    dim: usize,
    device: Device,
}

impl std::fmt::Debug for MiniLm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MiniLm")
            .field("dim", &self.dim)
            .field("precision", &self.precision)
            .finish()
    }
}

fn model_err(path: &Path, reason: impl std::fmt::Display) -> MemoryError {
    MemoryError::Model {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

fn read_bounded(path: &Path) -> Result<Vec<u8>> {
    let meta = std::fs::metadata(path).map_err(|e| model_err(path, e))?;
    if !meta.is_file() {
        return Err(model_err(path, "not a regular file"));
    }
    if meta.len() > MAX_MODEL_BYTES {
        return Err(model_err(
            path,
            format!("{} bytes, over the limit of {MAX_MODEL_BYTES}", meta.len()),
        ));
    }
    std::fs::read(path).map_err(|e| model_err(path, e))
}

impl MiniLm {
    /// Load the model from `dir` with 8-bit dense layers where this CPU
    /// runs them fast, else f32 ones ([`Precision::auto`]):
    /// [`MiniLm::load_with`].
    ///
    /// # Errors
    /// As [`MiniLm::load_with`].
    pub fn load(dir: &Path) -> Result<MiniLm> {
        MiniLm::load_with(dir, Precision::auto())
    }

    /// Load the model from `dir`: `config.json` (optional: all-MiniLM-L6-v2's
    /// own values are used without it), `model.safetensors`, `tokenizer.json`,
    /// its dense layers held at `precision`.
    ///
    /// # Errors
    /// [`MemoryError::Model`] naming the file that is missing, unreadable or
    /// malformed (a Git LFS pointer, a truncated download, another
    /// architecture).
    pub fn load_with(dir: &Path, precision: Precision) -> Result<MiniLm> {
        let config_path = dir.join("config.json");
        let config: BertConfig = if config_path.exists() {
            let bytes = read_bounded(&config_path)?;
            serde_json::from_slice(&bytes).map_err(|e| model_err(&config_path, e))?
        } else {
            serde_json::from_str(MINILM_CONFIG).map_err(|e| model_err(&config_path, e))?
        };
        let weights_path = dir.join("model.safetensors");
        let weights = read_bounded(&weights_path)?;
        let device = Device::Cpu;
        let shape = config.shape().map_err(|e| model_err(&config_path, e))?;
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &device)
            .map_err(|e| model_err(&weights_path, e))?;
        let model = encoder::Encoder::load(vb, shape, precision)
            .map_err(|e| model_err(&weights_path, e))?;
        let tok_path = dir.join("tokenizer.json");
        let tok_bytes = read_bounded(&tok_path)?;
        let mut tokenizer =
            Tokenizer::from_bytes(&tok_bytes).map_err(|e| model_err(&tok_path, e))?;
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS,
                ..Default::default()
            }))
            .map_err(|e| model_err(&tok_path, e))?;
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            ..Default::default()
        }));
        let dim = config.hidden_size;
        let me = MiniLm {
            model,
            precision,
            tokenizer: Mutex::new(tokenizer),
            dim,
            device,
        };
        // A model that loads but cannot run (a tensor of the wrong shape)
        // fails here, at load, not in the first turn.
        let probe = me.embed(&["probe"])?;
        if probe.first().map(Vec::len) != Some(me.dim) {
            return Err(model_err(
                &weights_path,
                "the model's output is not a sentence vector",
            ));
        }
        Ok(me)
    }

    /// The default model directory under a project root:
    /// `target/models/all-MiniLM-L6-v2` (where `scripts/setup` puts it).
    pub fn default_dir(root: &Path) -> PathBuf {
        root.join("target/models/all-MiniLM-L6-v2")
    }

    /// The encoder's last hidden states for a batch: `(batch, tokens, dim)`
    /// and the attention mask `(batch, tokens)`. Public so the benchmark can
    /// time the raw forward pass next to the whole embedding.
    ///
    /// # Errors
    /// [`MemoryError::Embed`].
    pub fn forward(&self, texts: &[&str]) -> Result<(Tensor, Tensor)> {
        let enc = {
            let tok = self
                .tokenizer
                .lock()
                .map_err(|_| MemoryError::Embed("tokenizer lock poisoned".into()))?;
            tok.encode_batch(texts.to_vec(), true)
                .map_err(|e| MemoryError::Embed(e.to_string()))?
        };
        self.run(&enc.iter().collect::<Vec<_>>())
    }

    /// The encoder over tokenised texts (padded to one length).
    fn run(&self, enc: &[&tokenizers::Encoding]) -> Result<(Tensor, Tensor)> {
        let e = |e: candle_core::Error| MemoryError::Embed(e.to_string());
        let rows = enc.len();
        let len = enc.first().map(|x| x.get_ids().len()).unwrap_or(0);
        let mut ids = Vec::with_capacity(rows * len);
        let mut mask = Vec::with_capacity(rows * len);
        for x in enc {
            ids.extend(x.get_ids().iter().map(|&v| v as i64));
            mask.extend(x.get_attention_mask().iter().map(|&v| v as i64));
        }
        let ids = Tensor::from_vec(ids, (rows, len), &self.device).map_err(e)?;
        let mask = Tensor::from_vec(mask, (rows, len), &self.device).map_err(e)?;
        let hidden = self.model.forward(&ids, &mask).map_err(e)?;
        Ok((hidden, mask))
    }

    /// The mean-pooled, normalised vectors of token sequences run as one
    /// packed group ([`encoder::Encoder::forward_packed`]).
    fn pool_packed(&self, seqs: &[&[u32]]) -> Result<Vec<Vec<f32>>> {
        let e = |e: candle_core::Error| MemoryError::Embed(e.to_string());
        let hidden = self.model.forward_packed(seqs).map_err(e)?;
        let mut out = Vec::with_capacity(seqs.len());
        let mut start = 0;
        for s in seqs {
            let len = s.len().max(1);
            let mean = (hidden
                .narrow(0, start, s.len())
                .map_err(e)?
                .sum(0)
                .map_err(e)?
                / len as f64)
                .map_err(e)?;
            start += s.len();
            out.push(normalise(mean.to_vec1().map_err(e)?));
        }
        Ok(out)
    }

    /// How the dense layers' weights are held.
    pub fn precision(&self) -> Precision {
        self.precision
    }
}

/// The fields of a Hugging Face BERT `config.json` the encoder needs; an
/// architecture it cannot run (another activation, another position
/// embedding) is refused at load.
#[derive(Debug, serde::Deserialize)]
struct BertConfig {
    hidden_size: usize,
    intermediate_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    vocab_size: usize,
    max_position_embeddings: usize,
    #[serde(default = "default_types")]
    type_vocab_size: usize,
    #[serde(default = "default_eps")]
    layer_norm_eps: f64,
    #[serde(default = "default_act")]
    hidden_act: String,
    #[serde(default = "default_position")]
    position_embedding_type: String,
}

fn default_eps() -> f64 {
    1e-12
}

fn default_types() -> usize {
    2
}

fn default_act() -> String {
    "gelu".into()
}

fn default_position() -> String {
    "absolute".into()
}

impl BertConfig {
    fn shape(&self) -> std::result::Result<encoder::Shape, String> {
        if self.hidden_act != "gelu" {
            return Err(format!(
                "hidden_act {:?}: only \"gelu\" (erf) is supported",
                self.hidden_act
            ));
        }
        if self.position_embedding_type != "absolute" {
            return Err(format!(
                "position_embedding_type {:?}: only \"absolute\" is supported",
                self.position_embedding_type
            ));
        }
        if self.num_attention_heads == 0
            || !self.hidden_size.is_multiple_of(self.num_attention_heads)
        {
            return Err(format!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                self.hidden_size, self.num_attention_heads
            ));
        }
        Ok(encoder::Shape {
            hidden: self.hidden_size,
            intermediate: self.intermediate_size,
            layers: self.num_hidden_layers,
            heads: self.num_attention_heads,
            layer_norm_eps: self.layer_norm_eps,
            vocab: self.vocab_size,
            max_positions: self.max_position_embeddings,
            type_vocab: self.type_vocab_size,
        })
    }
}

/// all-MiniLM-L6-v2's `config.json`, used when the directory has none.
const MINILM_CONFIG: &str = r#"{"attention_probs_dropout_prob":0.1,"hidden_act":"gelu","hidden_dropout_prob":0.1,"hidden_size":384,"initializer_range":0.02,"intermediate_size":1536,"layer_norm_eps":1e-12,"max_position_embeddings":512,"model_type":"bert","num_attention_heads":12,"num_hidden_layers":6,"pad_token_id":0,"position_embedding_type":"absolute","type_vocab_size":2,"vocab_size":30522}"#;

impl Embedder for MiniLm {
    fn model_id(&self) -> &str {
        "all-MiniLM-L6-v2"
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        // Each text tokenised alone, then run in packed groups of about
        // PACK_TOKENS tokens (longest first): no padding, so a text's
        // vector does not depend on the other texts of its group (padding
        // changes a vector's last bits, about 4e-8 here, and would make
        // equal scores unequal), and one product per layer serves the
        // whole group.
        let enc = {
            let tok = self
                .tokenizer
                .lock()
                .map_err(|_| MemoryError::Embed("tokenizer lock poisoned".into()))?;
            texts
                .iter()
                .map(|t| tok.encode(*t, true))
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|e| MemoryError::Embed(e.to_string()))?
        };
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(enc[i].get_ids().len()));
        let mut out = vec![Vec::new(); texts.len()];
        let mut group: Vec<usize> = Vec::new();
        let mut tokens = 0;
        let mut run = |group: &mut Vec<usize>| -> Result<()> {
            let seqs: Vec<&[u32]> = group.iter().map(|&i| enc[i].get_ids()).collect();
            for (&i, v) in group.iter().zip(self.pool_packed(&seqs)?) {
                out[i] = v;
            }
            group.clear();
            Ok(())
        };
        for i in order {
            let n = enc[i].get_ids().len();
            if !group.is_empty() && (tokens + n > PACK_TOKENS || group.len() >= MAX_GROUP) {
                run(&mut group)?;
                tokens = 0;
            }
            group.push(i);
            tokens += n;
        }
        if !group.is_empty() {
            run(&mut group)?;
        }
        Ok(out)
    }
}

/// `v / max(‖v‖, 1e-12)`, as `torch.nn.functional.normalize`.
pub fn normalise(mut v: Vec<f32>) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    for x in &mut v {
        *x /= n;
    }
    v
}

/// Vectors as stored: little-endian f32s.
pub fn to_blob(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A stored vector back, checked against the expected dimension.
///
/// # Errors
/// [`MemoryError::Dimension`] when its length is not `dim` floats.
pub fn from_blob(what: &str, blob: &[u8], dim: usize) -> Result<Vec<f32>> {
    if blob.len() != dim * 4 {
        return Err(MemoryError::Dimension {
            what: what.to_string(),
            expected: dim,
            found: blob.len() / 4,
        });
    }
    Ok(blob
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blob_round_trip_and_dimension_check() {
        let v = vec![0.25_f32, -1.0, 3.5];
        assert_eq!(from_blob("x", &to_blob(&v), 3).unwrap(), v);
        let err = from_blob("fact f-1", &to_blob(&v), 384).unwrap_err();
        assert!(
            matches!(
                err,
                MemoryError::Dimension {
                    expected: 384,
                    found: 3,
                    ..
                }
            ),
            "{err}"
        );
        assert!(from_blob("x", &[1, 2, 3], 1).is_err());
    }

    #[test]
    fn normalise_unit_and_zero() {
        let v = normalise(vec![3.0, 4.0]);
        assert!((v[0] - 0.6).abs() < 1e-6 && (v[1] - 0.8).abs() < 1e-6);
        assert_eq!(normalise(vec![0.0, 0.0]), vec![0.0, 0.0]);
    }
}
