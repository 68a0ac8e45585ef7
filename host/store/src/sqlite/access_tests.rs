//! Tokens, sealed keys, the switch and sagas' principals in a real SQLite
//! file.

use super::super::*;
use super::*;
use capsaga_core::pause::Mode;
use capsaga_core::principal::Role;
use capsaga_core::sealed::{Fresh, Kek, open, seal};
use zeroize::Zeroizing;

fn block<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
        .block_on(f)
}

fn store() -> (tempfile::TempDir, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let db = SqliteStore::open(&dir.path().join("state.db")).unwrap();
    (dir, db)
}

#[test]
fn tokens_are_hashes_revoked_for_good_and_never_renamed() {
    let (dir, db) = store();
    block(async {
        assert!(!db.any_token_ever().await.unwrap());
        let h = [7u8; 32];
        let row = db
            .create_token("alice", Role::Operator, &h, "cli:root")
            .await
            .unwrap();
        assert_eq!((row.role, row.revoked_at.clone()), (Role::Operator, None));
        assert!(matches!(
            db.create_token("alice", Role::Client, &[8; 32], "x").await,
            Err(TokenOpError::NameTaken(n)) if n == "alice"
        ));
        assert!(
            matches!(
                db.create_token("bob", Role::Client, &h, "x").await,
                Err(TokenOpError::NameTaken(_))
            ),
            "the same secret twice is refused"
        );
        db.create_token("bob", Role::Client, &[9; 32], "x")
            .await
            .unwrap();
        let active = db.active_tokens().await.unwrap();
        assert_eq!(active.len(), 2);
        assert_eq!(active[0].secret_sha256, h);
        db.revoke_token("alice", "cli:root").await.unwrap();
        assert!(matches!(
            db.revoke_token("alice", "x").await,
            Err(TokenOpError::AlreadyRevoked(_))
        ));
        assert!(matches!(
            db.revoke_token("nobody", "x").await,
            Err(TokenOpError::NotFound(_))
        ));
        assert_eq!(db.active_tokens().await.unwrap().len(), 1);
        assert!(
            matches!(
                db.create_token("alice", Role::Client, &[1; 32], "x").await,
                Err(TokenOpError::NameTaken(_))
            ),
            "a revoked name is not reused"
        );
        assert!(db.any_token_ever().await.unwrap());
        let log = db.log(Some("token:alice")).await.unwrap();
        assert_eq!(log.len(), 2, "created and revoked are logged");
    });
    drop(db);
    // The file never holds anything but the hash.
    let bytes = std::fs::read(dir.path().join("state.db")).unwrap();
    assert!(
        !bytes.windows(32).any(|w| w == [7u8; 32]),
        "raw digest bytes not stored either"
    );
}

#[test]
fn sealed_keys_round_trip_through_the_file_and_are_listed_by_last_four() {
    let (dir, db) = store();
    let kek = Kek::parse(&"5a".repeat(32)).unwrap();
    let secret = "sk-test-0123456789-ABCD";
    let fresh = Fresh {
        dek: Zeroizing::new([3; 32]),
        dek_nonce: [1; 12],
        nonce: [2; 12],
    };
    let sealed = seal(&kek, "org-openai", secret, &fresh).unwrap();
    block(async {
        let row = db.put_key("org-openai", &sealed, "cli:root").await.unwrap();
        assert_eq!(row.last4, "ABCD");
        let back = db.sealed_key("org-openai").await.unwrap().unwrap();
        assert_eq!(open(&kek, "org-openai", &back).unwrap().as_str(), secret);
        let listed = serde_json::to_string(&db.keys().await.unwrap()).unwrap();
        assert!(
            listed.contains("ABCD") && !listed.contains("0123456789"),
            "{listed}"
        );
        assert!(db.remove_key("org-openai", "x").await.unwrap());
        assert!(!db.remove_key("org-openai", "x").await.unwrap());
        assert!(db.sealed_key("org-openai").await.unwrap().is_none());
        let log = serde_json::to_string(&db.log(None).await.unwrap()).unwrap();
        assert!(!log.contains("0123456789"));
    });
    drop(db);
    let bytes = std::fs::read(dir.path().join("state.db")).unwrap();
    assert!(
        !bytes.windows(10).any(|w| w == b"0123456789"),
        "no clear key in the file"
    );
}

#[test]
fn the_switch_and_saga_principals() {
    let (_dir, db) = store();
    block(async {
        assert_eq!(db.switch().await.unwrap().mode, Mode::Running);
        let s = db
            .set_switch(Mode::Paused, "token:alice", Some("incident"))
            .await
            .unwrap();
        assert_eq!(
            (s.mode, s.by.as_deref()),
            (Mode::Paused, Some("token:alice"))
        );
        assert_eq!(db.switch().await.unwrap().note.as_deref(), Some("incident"));
        db.set_switch(Mode::Running, "cli:root", None)
            .await
            .unwrap();
        assert_eq!(db.log(Some("host:switch")).await.unwrap().len(), 2);
        for (id, who) in [
            ("s1", Some("token:bob")),
            ("s2", Some("token:eve")),
            ("s3", None),
        ] {
            db.create_saga(&NewSaga {
                saga_id: id,
                origin: Origin::Mcp,
                label: "t",
                state: capsaga_core::fsm::State::Planning,
                owner: "o",
                plan: None,
                principal: who,
            })
            .await
            .unwrap();
        }
        let bobs = db.sagas_of("token:bob", 10).await.unwrap();
        assert_eq!(bobs.len(), 1);
        assert_eq!(bobs[0].principal.as_deref(), Some("token:bob"));
        assert_eq!(db.saga("s3").await.unwrap().unwrap().principal, None);
        let first = &db.log(Some("s1")).await.unwrap()[0];
        assert_eq!(first.detail["principal"], "token:bob", "in the chained log");
    });
}
