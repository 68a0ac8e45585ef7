//! The embedder against an independent reference (a numpy forward pass of
//! the same weights, `scripts/memory-reference-vectors.py`, committed as
//! `tests/data/reference_vectors.json`), and its errors on bad model files.

mod common;

use capsaga_memory::embed::{MINILM_DIM, MiniLm, Precision};
use capsaga_memory::score::cosine;
use capsaga_memory::{Embedder, MemoryError};

/// The encoder itself, with the stored f32 weights: the numpy reference's
/// vectors to a cosine of 0.999.
#[test]
fn embeddings_match_the_reference_forward_pass() {
    require_model!("embeddings_match_the_reference_forward_pass");
    let m = MiniLm::load_with(&common::model_dir(), Precision::F32).unwrap();
    assert_eq!(m.precision(), Precision::F32);
    match_reference(&m, 0.999);
}

/// The default 8-bit dense layers: the same vectors to a cosine of 0.995
/// (measured: 0.9987 at worst on these sentences), and the same vectors as
/// the f32 weights to 0.995.
#[test]
fn eight_bit_embeddings_stay_close_to_the_reference() {
    require_model!("eight_bit_embeddings_stay_close_to_the_reference");
    let q = MiniLm::load(&common::model_dir()).unwrap();
    assert_eq!(q.precision(), Precision::Q8);
    match_reference(&q, 0.995);
    let f = MiniLm::load_with(&common::model_dir(), Precision::F32).unwrap();
    for t in [
        "deploy",
        "A man is eating food.",
        "what did Alice say about the quarterly budget review",
        "ÉTÉ à Paris — 東京 🚀",
    ] {
        let c = cosine(&q.embed_one(t).unwrap(), &f.embed_one(t).unwrap());
        assert!(c >= 0.995, "{t:?}: cosine {c} between 8-bit and f32");
    }
}

fn match_reference(m: &MiniLm, least: f32) {
    let data: serde_json::Value =
        serde_json::from_str(include_str!("data/reference_vectors.json")).unwrap();
    assert_eq!(m.dim(), MINILM_DIM);
    let rows = data["sentences"].as_array().unwrap();
    assert!(rows.len() >= 5);
    let texts: Vec<&str> = rows.iter().map(|r| r["text"].as_str().unwrap()).collect();
    // One at a time and as one padded batch: both must match.
    let batch = m.embed(&texts).unwrap();
    for (i, r) in rows.iter().enumerate() {
        let want: Vec<f32> = r["embedding"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect();
        let one = m.embed_one(texts[i]).unwrap();
        let c1 = cosine(&one, &want);
        let c2 = cosine(&batch[i], &want);
        assert!(
            c1 >= least && c2 >= least,
            "{:?}: cosine {c1} alone, {c2} in a batch",
            texts[i]
        );
        let norm: f32 = one.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "not unit: {norm}");
    }
}

#[test]
fn paraphrases_are_closer_than_unrelated_sentences() {
    require_model!("paraphrases_are_closer_than_unrelated_sentences");
    let m = common::model();
    let a = m.embed_one("A man is eating food.").unwrap();
    let b = m.embed_one("A man is eating a piece of bread.").unwrap();
    let c = m.embed_one("The girl is carrying a baby.").unwrap();
    // sentence-transformers' documented figure for this pair is 0.7553.
    assert!((cosine(&a, &b) - 0.7553).abs() < 0.01, "{}", cosine(&a, &b));
    assert!(cosine(&a, &c) < 0.1);
}

/// A text's vector is the same alone and in any batch (bit for bit: a
/// padded batch moved it by about 4e-8, enough to order equal scores by
/// chance), in the model's default precision and in f32.
#[test]
fn a_texts_vector_does_not_depend_on_the_rest_of_its_batch() {
    require_model!("a_texts_vector_does_not_depend_on_the_rest_of_its_batch");
    let a = "Remind me to buy milk.\nWill do.";
    let long = "How do I descale a kettle? I tried many things and nothing works, give me many steps.\nUse vinegar.";
    for m in [
        MiniLm::load(&common::model_dir()).unwrap(),
        MiniLm::load_with(&common::model_dir(), Precision::F32).unwrap(),
    ] {
        let alone = m.embed_one(a).unwrap();
        let batch = m
            .embed(&[long, a, "x", long, "Remind me to buy eggs.\nWill do."])
            .unwrap();
        assert_eq!(batch[1], alone, "{:?}", m.precision());
        assert_eq!(batch[0], batch[3]);
        assert_eq!(batch[0], m.embed_one(long).unwrap());
    }
}

#[test]
fn long_input_is_truncated_not_refused() {
    require_model!("long_input_is_truncated_not_refused");
    let m = common::model();
    let long = "capsaga remembers ".repeat(2000);
    assert_eq!(m.embed_one(&long).unwrap().len(), MINILM_DIM);
    assert_eq!(m.embed_one("").unwrap().len(), MINILM_DIM);
}

fn copy_model(to: &std::path::Path) {
    let from = MiniLm::default_dir(&common::root());
    for f in ["config.json", "model.safetensors", "tokenizer.json"] {
        std::fs::copy(from.join(f), to.join(f)).unwrap();
    }
}

#[test]
fn missing_damaged_or_foreign_model_files_are_clear_errors() {
    require_model!("missing_damaged_or_foreign_model_files_are_clear_errors");
    let d = tempfile::tempdir().unwrap();
    // Nothing there.
    let e = MiniLm::load(d.path()).unwrap_err();
    assert!(
        matches!(&e, MemoryError::Model { path, .. } if path.ends_with("model.safetensors")),
        "{e}"
    );
    assert!(e.to_string().contains("scripts/setup"), "{e}");
    copy_model(d.path());
    // A Git LFS pointer where the weights should be.
    std::fs::write(
        d.path().join("model.safetensors"),
        "version https://git-lfs.github.com/spec/v1\noid sha256:53aa\nsize 90868376\n",
    )
    .unwrap();
    let e = MiniLm::load(d.path()).unwrap_err();
    assert!(
        matches!(&e, MemoryError::Model { path, .. } if path.ends_with("model.safetensors")),
        "{e}"
    );
    // Weights cut short.
    let full =
        std::fs::read(MiniLm::default_dir(&common::root()).join("model.safetensors")).unwrap();
    std::fs::write(d.path().join("model.safetensors"), &full[..full.len() / 2]).unwrap();
    assert!(matches!(
        MiniLm::load(d.path()).unwrap_err(),
        MemoryError::Model { .. }
    ));
    // Good weights, missing tokenizer.
    std::fs::write(d.path().join("model.safetensors"), &full).unwrap();
    std::fs::remove_file(d.path().join("tokenizer.json")).unwrap();
    let e = MiniLm::load(d.path()).unwrap_err();
    assert!(
        matches!(&e, MemoryError::Model { path, .. } if path.ends_with("tokenizer.json")),
        "{e}"
    );
    // A tokenizer that is not JSON.
    std::fs::write(d.path().join("tokenizer.json"), [0xff, 0xfe, 0x00]).unwrap();
    assert!(matches!(
        MiniLm::load(d.path()).unwrap_err(),
        MemoryError::Model { .. }
    ));
    // A config of another shape than the weights.
    copy_model(d.path());
    let cfg = std::fs::read_to_string(d.path().join("config.json")).unwrap();
    std::fs::write(
        d.path().join("config.json"),
        cfg.replace("\"hidden_size\": 384", "\"hidden_size\": 768"),
    )
    .unwrap();
    let e = MiniLm::load(d.path()).unwrap_err();
    assert!(matches!(&e, MemoryError::Model { .. }), "{e}");
    // An architecture the encoder does not run: refused, naming the config.
    for (from, to) in [
        ("\"hidden_act\": \"gelu\"", "\"hidden_act\": \"relu\""),
        ("\"num_attention_heads\": 12", "\"num_attention_heads\": 7"),
    ] {
        assert!(cfg.contains(from), "{from}");
        std::fs::write(d.path().join("config.json"), cfg.replace(from, to)).unwrap();
        let e = MiniLm::load(d.path()).unwrap_err();
        assert!(
            matches!(&e, MemoryError::Model { path, .. } if path.ends_with("config.json")),
            "{to}: {e}"
        );
    }
    // A directory where a file should be.
    copy_model(d.path());
    std::fs::remove_file(d.path().join("model.safetensors")).unwrap();
    std::fs::create_dir(d.path().join("model.safetensors")).unwrap();
    assert!(matches!(
        MiniLm::load(d.path()).unwrap_err(),
        MemoryError::Model { .. }
    ));
}
