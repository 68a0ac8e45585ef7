#!/usr/bin/env python3
"""Reference sentence embeddings of all-MiniLM-L6-v2, computed without capsaga.

A plain numpy forward pass of the BERT encoder (the model's safetensors read
with the `safetensors` package, the text tokenised with Hugging Face's
`tokenizers` package from the model's own tokenizer.json), then mean pooling
over the attention mask and L2 normalisation, as sentence-transformers'
Pooling(mean) + Normalize modules do. No torch: the same arithmetic, written
independently of candle, so the Rust embedder is checked against a second
implementation.

usage: scripts/memory-reference-vectors.py MODEL_DIR OUT_JSON
       (needs: pip install numpy safetensors tokenizers)

The output is committed as host/memory/tests/data/reference_vectors.json and
read by the embedder test (cosine >= 0.999 for every sentence).
"""
import json
import math
import sys

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

SENTENCES = [
    "The quarterly report for March is in the shared drive.",
    "Roberto prefers his coffee without sugar.",
    "How do I roll back a saga after a failed step?",
    "Il rapporto di marzo è stato scaricato ieri sera.",
    "a",
    "SELECT * FROM episodes WHERE 1=1; -- \"NEAR\" OR ^col:*",
    "The deploy to staging failed because the disk was full, so we freed 20 GB and retried.",
]

MAX_SEQ = 256


def layer_norm(x, w, b, eps=1e-12):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def gelu(x):
    # BERT's exact gelu (erf form).
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def embed(w, cfg, ids):
    n = len(ids)
    h = cfg["hidden_size"]
    heads = cfg["num_attention_heads"]
    d = h // heads
    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][np.arange(n)]
        + w["embeddings.token_type_embeddings.weight"][np.zeros(n, dtype=np.int64)]
    )
    x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        lin = lambda t, name: t @ w[p + name + ".weight"].T + w[p + name + ".bias"]
        q = lin(x, "attention.self.query").reshape(n, heads, d).transpose(1, 0, 2)
        k = lin(x, "attention.self.key").reshape(n, heads, d).transpose(1, 0, 2)
        v = lin(x, "attention.self.value").reshape(n, heads, d).transpose(1, 0, 2)
        s = q @ k.transpose(0, 2, 1) / math.sqrt(d)
        s = s - s.max(-1, keepdims=True)
        a = np.exp(s)
        a = a / a.sum(-1, keepdims=True)
        ctx = (a @ v).transpose(1, 0, 2).reshape(n, h)
        x = layer_norm(
            lin(ctx, "attention.output.dense") + x,
            w[p + "attention.output.LayerNorm.weight"],
            w[p + "attention.output.LayerNorm.bias"],
        )
        inter = gelu(lin(x, "intermediate.dense"))
        x = layer_norm(
            lin(inter, "output.dense") + x,
            w[p + "output.LayerNorm.weight"],
            w[p + "output.LayerNorm.bias"],
        )
    pooled = x.mean(0)
    return pooled / max(np.linalg.norm(pooled), 1e-12)


def main():
    model_dir, out = sys.argv[1], sys.argv[2]
    cfg = json.load(open(f"{model_dir}/config.json"))
    raw = load_file(f"{model_dir}/model.safetensors")
    # Some exports prefix every tensor with "bert.".
    w = {k.removeprefix("bert."): v.astype(np.float64) for k, v in raw.items()}
    tok = Tokenizer.from_file(f"{model_dir}/tokenizer.json")
    tok.no_padding()
    tok.enable_truncation(MAX_SEQ)
    rows = []
    for s in SENTENCES:
        ids = tok.encode(s).ids
        rows.append({"text": s, "ids": ids, "embedding": [round(float(v), 7) for v in embed(w, cfg, ids)]})
    json.dump({"model": "all-MiniLM-L6-v2", "dim": cfg["hidden_size"], "sentences": rows}, open(out, "w"))
    print(f"wrote {len(rows)} reference vectors to {out}")


if __name__ == "__main__":
    main()
