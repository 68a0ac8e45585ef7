//! The BERT encoder of all-MiniLM-L6-v2 (Devlin et al. 2019, "BERT", §3;
//! the layer layout of Hugging Face's `BertModel`, whose tensor names the
//! safetensors file uses), written over candle's tensor operations so that
//! its dense layers can run on 8-bit weights.
//!
//! Why not candle-transformers' `BertModel`: its dense layers are
//! `candle_nn::Linear` over f32 weights, and with the ~10 rows of a query
//! the `gemm` crate under them spends most of an embedding repacking the
//! 42 MB of weights at every product (`perf`: about 60% of the time, one
//! thread). candle's 8-bit kernels for AVX-512 VNNI read weights packed once
//! at load, but only for inner dimensions that are multiples of 256: the
//! model's are 384 and 1536, so the 384-wide layers are zero-padded to 512
//! (exact: the padding multiplies zeros). The six layers' 36 dense products
//! for a 10-token query took 2.3 ms instead of 5.5 ms (a probe, 2 threads;
//! see README "Performance" for the whole embedding). Here the query, key
//! and value layers run as one product, so a layer makes four.
//!
//! [`Precision::F32`] keeps the stored f32 weights and is what the tests
//! check this code against (an independent numpy forward pass of the same
//! weights, `tests/embedder.rs`); [`Precision::Q8`]
//! quantises each dense weight matrix to ggml's `Q8_0` (blocks of 32 values
//! with one scale) at load, the activations are quantised per row by the
//! kernel. Embedding tables, layer norms and attention stay f32.

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{D, DType, Module, Result, Tensor};
use candle_nn::{Embedding, LayerNorm, VarBuilder};

/// How the dense layers' weights are held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    /// The stored f32 weights, products by candle's `gemm`.
    F32,
    /// Weights quantised to `Q8_0` at load (a quarter of the bytes).
    Q8,
}

impl Precision {
    /// [`Precision::Q8`] where candle has its packed 8-bit kernels (x86-64
    /// with AVX-512 VNNI or AVX-VNNI, the condition under which candle
    /// 0.11's `repack_x86` takes `Q8_0` products), else [`Precision::F32`]:
    /// without them the 8-bit products are slower than f32 ones (10.1 ms
    /// against 7.4 ms per query with the kernels disabled,
    /// `MISTRALRS_FORCE_AVX2=1`, on the benchmark machine).
    pub fn auto() -> Precision {
        if fast_q8() {
            Precision::Q8
        } else {
            Precision::F32
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn fast_q8() -> bool {
    let avx512 = is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512vnni");
    let avx_vnni = is_x86_feature_detected!("avxvnni") && is_x86_feature_detected!("avx2");
    let forced_off = std::env::var("MISTRALRS_FORCE_AVX2").as_deref() == Ok("1");
    (avx512 || avx_vnni) && !forced_off
}

#[cfg(not(target_arch = "x86_64"))]
fn fast_q8() -> bool {
    false
}

/// The shape of the encoder (from `config.json`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    pub hidden: usize,
    pub intermediate: usize,
    pub layers: usize,
    pub heads: usize,
    pub layer_norm_eps: f64,
    /// Rows of the word embedding table.
    pub vocab: usize,
    /// Rows of the position embedding table (the longest input).
    pub max_positions: usize,
    /// Rows of the token type embedding table.
    pub type_vocab: usize,
}

/// The block of inner dimension candle's packed 8-bit kernels need.
const Q8_K_MULTIPLE: usize = 256;

/// One dense layer `x · Wᵀ + b` on rows `x` of shape `(rows, k)`.
struct Dense {
    weight: Weight,
    bias: Tensor,
    /// The inner dimension as stored.
    k: usize,
    /// The inner dimension the weight was padded to (`k` for f32).
    k_padded: usize,
}

enum Weight {
    F32(Tensor),
    Q8(QMatMul),
}

impl Dense {
    /// The layers named `names` under `vb`, concatenated along their outputs
    /// (one product for several layers reading the same input).
    fn load(vb: &VarBuilder, names: &[&str], out: usize, k: usize, p: Precision) -> Result<Dense> {
        let mut ws = Vec::with_capacity(names.len());
        let mut bs = Vec::with_capacity(names.len());
        for n in names {
            let v = vb.pp(n);
            ws.push(v.get((out, k), "weight")?);
            bs.push(v.get(out, "bias")?);
        }
        let w = Tensor::cat(&ws, 0)?;
        let bias = Tensor::cat(&bs, 0)?;
        let (weight, k_padded) = match p {
            Precision::F32 => (Weight::F32(w), k),
            Precision::Q8 => {
                let k_padded = k.div_ceil(Q8_K_MULTIPLE) * Q8_K_MULTIPLE;
                let w = pad_columns(&w, k_padded)?;
                let q = QTensor::quantize(&w, GgmlDType::Q8_0)?;
                (Weight::Q8(QMatMul::from_qtensor(q)?), k_padded)
            }
        };
        Ok(Dense {
            weight,
            bias,
            k,
            k_padded,
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let y = match &self.weight {
            Weight::F32(w) => x.matmul(&w.t()?)?,
            Weight::Q8(q) => {
                debug_assert_eq!(x.dim(D::Minus1)?, self.k);
                q.forward(&pad_columns(x, self.k_padded)?)?
            }
        };
        y.broadcast_add(&self.bias)
    }
}

/// `t` (2-D) with zero columns appended up to `k` columns.
fn pad_columns(t: &Tensor, k: usize) -> Result<Tensor> {
    let (rows, cols) = t.dims2()?;
    if cols >= k {
        return Ok(t.clone());
    }
    let zeros = Tensor::zeros((rows, k - cols), t.dtype(), t.device())?;
    Tensor::cat(&[t, &zeros], 1)
}

struct Layer {
    qkv: Dense,
    attention_out: Dense,
    attention_norm: LayerNorm,
    intermediate: Dense,
    output: Dense,
    output_norm: LayerNorm,
}

impl Layer {
    /// The rest of the layer after self-attention, row by row: the
    /// attention's output projection, residual and norm, then the
    /// feed-forward block (GELU, erf form), residual and norm.
    fn after_attention(&self, context: &Tensor, x: &Tensor) -> Result<Tensor> {
        let attended = self
            .attention_norm
            .forward(&(self.attention_out.forward(context)? + x)?)?;
        let inner = super::gelu::gelu_erf(&self.intermediate.forward(&attended)?)?;
        self.output_norm
            .forward(&(self.output.forward(&inner)? + &attended)?)
    }
}

/// The encoder: embeddings, then [`Shape::layers`] transformer layers.
pub(crate) struct Encoder {
    words: Embedding,
    positions: Tensor,
    token_type: Tensor,
    embeddings_norm: LayerNorm,
    layers: Vec<Layer>,
    shape: Shape,
}

fn layer_norm(vb: VarBuilder, size: usize, eps: f64) -> Result<LayerNorm> {
    Ok(LayerNorm::new(
        vb.get(size, "weight")?,
        vb.get(size, "bias")?,
        eps,
    ))
}

impl Encoder {
    /// Load from the tensors of a Hugging Face `BertModel` checkpoint
    /// (`embeddings.*`, `encoder.layer.N.*`; the pooler is not used).
    ///
    /// # Errors
    /// candle's error for a missing tensor or one of another shape.
    pub(crate) fn load(vb: VarBuilder, shape: Shape, p: Precision) -> Result<Encoder> {
        let h = shape.hidden;
        let e = vb.pp("embeddings");
        let words = Embedding::new(e.get((shape.vocab, h), "word_embeddings.weight")?, h);
        let positions = e.get((shape.max_positions, h), "position_embeddings.weight")?;
        let token_type = e
            .get((shape.type_vocab, h), "token_type_embeddings.weight")?
            .narrow(0, 0, 1)?;
        let embeddings_norm = layer_norm(e.pp("LayerNorm"), h, shape.layer_norm_eps)?;
        let mut layers = Vec::with_capacity(shape.layers);
        for i in 0..shape.layers {
            let l = vb.pp(format!("encoder.layer.{i}"));
            let a = l.pp("attention");
            layers.push(Layer {
                qkv: Dense::load(&a.pp("self"), &["query", "key", "value"], h, h, p)?,
                attention_out: Dense::load(&a.pp("output"), &["dense"], h, h, p)?,
                attention_norm: layer_norm(a.pp("output.LayerNorm"), h, shape.layer_norm_eps)?,
                intermediate: Dense::load(
                    &l.pp("intermediate"),
                    &["dense"],
                    shape.intermediate,
                    h,
                    p,
                )?,
                output: Dense::load(&l.pp("output"), &["dense"], h, shape.intermediate, p)?,
                output_norm: layer_norm(l.pp("output.LayerNorm"), h, shape.layer_norm_eps)?,
            });
        }
        Ok(Encoder {
            words,
            positions,
            token_type,
            embeddings_norm,
            layers,
            shape,
        })
    }

    /// The last hidden states `(batch, tokens, hidden)` for token ids and an
    /// attention mask, both `(batch, tokens)` (the mask 1 for a token, 0 for
    /// padding). Every token has token type 0 (one segment).
    ///
    /// # Errors
    /// candle's error; an input longer than the position table.
    pub(crate) fn forward(&self, ids: &Tensor, mask: &Tensor) -> Result<Tensor> {
        let (batch, len) = ids.dims2()?;
        let h = self.shape.hidden;
        let heads = self.shape.heads;
        let head_dim = h / heads;
        let x = self
            .words
            .forward(ids)?
            .broadcast_add(&self.positions.narrow(0, 0, len)?)?
            .broadcast_add(&self.token_type)?;
        let mut x = self
            .embeddings_norm
            .forward(&x)?
            .reshape((batch * len, h))?;
        // Padding gets the most negative score, hence no weight.
        let bias = ((mask.to_dtype(DType::F32)? - 1.0)? * f64::from(f32::MAX))?
            .reshape((batch, 1, 1, len))?;
        let scale = 1.0 / (head_dim as f64).sqrt();
        let split = |t: Tensor| -> Result<Tensor> {
            t.reshape((batch, len, heads, head_dim))?
                .transpose(1, 2)?
                .contiguous()
        };
        for l in &self.layers {
            let qkv = l.qkv.forward(&x)?;
            let q = split(qkv.narrow(1, 0, h)?)?;
            let k = split(qkv.narrow(1, h, h)?)?;
            let v = split(qkv.narrow(1, 2 * h, h)?)?;
            let scores = (q.matmul(&k.t()?)? * scale)?.broadcast_add(&bias)?;
            let probs = candle_nn::ops::softmax_last_dim(&scores)?;
            let context = probs
                .matmul(&v)?
                .transpose(1, 2)?
                .reshape((batch * len, h))?;
            x = l.after_attention(&context, &x)?;
        }
        x.reshape((batch, len, h))
    }

    /// The last hidden states of several token sequences run together,
    /// without padding: their rows concatenated, `(Σ lens, hidden)`. The
    /// dense layers, norms and activations work row by row over all the
    /// sequences' tokens at once (one product per layer for the whole
    /// group); attention is computed within each sequence. A sequence's
    /// states are those it has alone (no padding enters its attention, and
    /// a row's product does not depend on the other rows).
    ///
    /// # Errors
    /// candle's error; a sequence longer than the position table.
    pub(crate) fn forward_packed(&self, seqs: &[&[u32]]) -> Result<Tensor> {
        let h = self.shape.hidden;
        let heads = self.shape.heads;
        let head_dim = h / heads;
        let total: usize = seqs.iter().map(|s| s.len()).sum();
        let device = self.positions.device();
        let ids: Vec<u32> = seqs.iter().flat_map(|s| s.iter().copied()).collect();
        let positions: Vec<u32> = seqs.iter().flat_map(|s| 0..s.len() as u32).collect();
        let ids = Tensor::from_vec(ids, total, device)?;
        let positions = Tensor::from_vec(positions, total, device)?;
        let x = self
            .words
            .forward(&ids)?
            .add(&self.positions.index_select(&positions, 0)?)?
            .broadcast_add(&self.token_type)?;
        let mut x = self.embeddings_norm.forward(&x)?;
        let scale = 1.0 / (head_dim as f64).sqrt();
        for l in &self.layers {
            let qkv = l.qkv.forward(&x)?;
            let mut parts = Vec::with_capacity(seqs.len());
            let mut start = 0;
            for s in seqs {
                let len = s.len();
                let one = qkv.narrow(0, start, len)?;
                start += len;
                let split = |t: Tensor| -> Result<Tensor> {
                    t.reshape((1, len, heads, head_dim))?
                        .transpose(1, 2)?
                        .contiguous()
                };
                let q = split(one.narrow(1, 0, h)?)?;
                let k = split(one.narrow(1, h, h)?)?;
                let v = split(one.narrow(1, 2 * h, h)?)?;
                let scores = (q.matmul(&k.t()?)? * scale)?;
                let probs = candle_nn::ops::softmax_last_dim(&scores)?;
                parts.push(probs.matmul(&v)?.transpose(1, 2)?.reshape((len, h))?);
            }
            let context = Tensor::cat(&parts, 0)?;
            x = l.after_attention(&context, &x)?;
        }
        Ok(x)
    }
}
