//! The embedder against an independent reference (a numpy forward pass of
//! the same weights, `scripts/memory-reference-vectors.py`, committed as
//! `tests/data/reference_vectors.json`), and its errors on bad model files.

mod common;

use capsaga_memory::MemoryError;
use capsaga_memory::embed::{MINILM_DIM, MiniLm};
use capsaga_memory::score::cosine;

#[test]
fn embeddings_match_the_reference_forward_pass() {
    require_model!("embeddings_match_the_reference_forward_pass");
    let data: serde_json::Value =
        serde_json::from_str(include_str!("data/reference_vectors.json")).unwrap();
    let m = common::model();
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
            c1 >= 0.999 && c2 >= 0.999,
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
    // A directory where a file should be.
    copy_model(d.path());
    std::fs::remove_file(d.path().join("model.safetensors")).unwrap();
    std::fs::create_dir(d.path().join("model.safetensors")).unwrap();
    assert!(matches!(
        MiniLm::load(d.path()).unwrap_err(),
        MemoryError::Model { .. }
    ));
}
