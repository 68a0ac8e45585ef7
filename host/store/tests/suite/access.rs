//! What the operator manages (issue 24) on both back ends: tokens (hashes
//! only, revoked for good, names never reused), sealed provider keys (never
//! in the clear), the kill switch, and the principal of each saga; a token,
//! a key or a pause made on one host is seen by the others.

use super::{Db, suite};
use capsaga_core::pause::Mode;
use capsaga_core::principal::Role;
use capsaga_secrets::sealed::{Fresh, Kek, open, seal};
use capsaga_store::*;
use zeroize::Zeroizing;

async fn tokens_are_hashes_revoked_for_good_and_never_renamed(db: &Db) {
    let a = db.open().await;
    let b = db.open().await;
    assert!(!a.any_token_ever().await.unwrap());
    let h = [7u8; 32];
    let row = a
        .create_token("alice", Role::Operator, &h, "cli:root")
        .await
        .unwrap();
    assert_eq!((row.role, row.revoked_at.clone()), (Role::Operator, None));
    assert!(matches!(
        b.create_token("alice", Role::Client, &[8; 32], "x").await,
        Err(TokenOpError::NameTaken(n)) if n == "alice"
    ));
    assert!(
        matches!(
            b.create_token("bob", Role::Client, &h, "x").await,
            Err(TokenOpError::NameTaken(_))
        ),
        "the same secret twice is refused"
    );
    b.create_token("bob", Role::Client, &[9; 32], "x")
        .await
        .unwrap();
    let active = a.active_tokens().await.unwrap();
    assert_eq!(active.len(), 2, "{}", db.name());
    assert_eq!(active[0].secret_sha256, h);
    // Revoked on one host: gone from the other's next check.
    b.revoke_token("alice", "cli:root").await.unwrap();
    assert!(matches!(
        a.revoke_token("alice", "x").await,
        Err(TokenOpError::AlreadyRevoked(_))
    ));
    assert!(matches!(
        a.revoke_token("nobody", "x").await,
        Err(TokenOpError::NotFound(_))
    ));
    assert_eq!(a.active_tokens().await.unwrap().len(), 1);
    assert!(
        matches!(
            a.create_token("alice", Role::Client, &[1; 32], "x").await,
            Err(TokenOpError::NameTaken(_))
        ),
        "a revoked name is not reused"
    );
    assert!(a.any_token_ever().await.unwrap());
    let tokens = a.tokens().await.unwrap();
    assert_eq!(
        tokens.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
        ["alice", "bob"]
    );
    assert_eq!(tokens[0].revoked_by.as_deref(), Some("cli:root"));
    let log = a.log(Some("token:alice")).await.unwrap();
    assert_eq!(log.len(), 2, "created and revoked are logged");
    assert!(audit::verify(&*b, None).await.unwrap().ok());
    drop((a, b));
    // The file never holds anything but the hash.
    if let Some(bytes) = db.sqlite_bytes() {
        assert!(
            !bytes.windows(32).any(|w| w == [7u8; 32]),
            "raw digest bytes not stored either"
        );
    }
}

/// Two hosts creating one name at once: one token.
async fn one_token_name_is_created_once_across_hosts(db: &Db) {
    let a = db.open().await;
    let b = db.open().await;
    for i in 0..10u8 {
        let name = format!("t{i}");
        let (ha, hb) = ([i; 32], [i + 100; 32]);
        let (ra, rb) = tokio::join!(
            a.create_token(&name, Role::Client, &ha, "a"),
            b.create_token(&name, Role::Client, &hb, "b"),
        );
        assert_eq!(
            usize::from(ra.is_ok()) + usize::from(rb.is_ok()),
            1,
            "{} {name}: {ra:?} {rb:?}",
            db.name()
        );
        let loser = if ra.is_ok() { rb } else { ra };
        assert!(matches!(loser, Err(TokenOpError::NameTaken(_))));
    }
    assert_eq!(a.active_tokens().await.unwrap().len(), 10);
}

async fn sealed_keys_round_trip_and_are_listed_by_last_four(db: &Db) {
    let a = db.open().await;
    let b = db.open().await;
    let kek = Kek::parse(&"5a".repeat(32)).unwrap();
    let secret = "sk-test-0123456789-ABCD";
    let fresh = Fresh {
        dek: Zeroizing::new([3; 32]),
        dek_nonce: [1; 12],
        nonce: [2; 12],
    };
    let sealed = seal(&kek, "org-openai", secret, &fresh).unwrap();
    let row = a.put_key("org-openai", &sealed, "cli:root").await.unwrap();
    assert_eq!(row.last4, "ABCD");
    // Sealed on one host, opened on another with the same KEK.
    let back = b.sealed_key("org-openai").await.unwrap().unwrap();
    assert_eq!(back, sealed);
    assert_eq!(open(&kek, "org-openai", &back).unwrap().as_str(), secret);
    let listed = serde_json::to_string(&b.keys().await.unwrap()).unwrap();
    assert!(
        listed.contains("ABCD") && !listed.contains("0123456789"),
        "{listed}"
    );
    // Replaced in place.
    let again = seal(&kek, "org-openai", "sk-other-WXYZ", &fresh).unwrap();
    b.put_key("org-openai", &again, "cli:root").await.unwrap();
    assert_eq!(a.keys().await.unwrap()[0].last4, "WXYZ");
    assert!(a.remove_key("org-openai", "x").await.unwrap());
    assert!(!b.remove_key("org-openai", "x").await.unwrap());
    assert!(b.sealed_key("org-openai").await.unwrap().is_none());
    let log = serde_json::to_string(&a.log(None).await.unwrap()).unwrap();
    assert!(!log.contains("0123456789"));
    assert!(audit::verify(&*a, None).await.unwrap().ok());
    drop((a, b));
    if let Some(bytes) = db.sqlite_bytes() {
        assert!(
            !bytes.windows(10).any(|w| w == b"0123456789"),
            "no clear key in the file"
        );
    }
}

async fn the_switch_and_saga_principals(db: &Db) {
    let a = db.open().await;
    let b = db.open().await;
    assert_eq!(a.switch().await.unwrap().mode, Mode::Running);
    let s = a
        .set_switch(Mode::Paused, "token:alice", Some("incident"))
        .await
        .unwrap();
    assert_eq!(
        (s.mode, s.by.as_deref()),
        (Mode::Paused, Some("token:alice"))
    );
    // A pause set on one host is what every host reads.
    let seen = b.switch().await.unwrap();
    assert_eq!(
        (seen.mode, seen.note.as_deref()),
        (Mode::Paused, Some("incident"))
    );
    b.set_switch(Mode::ReadOnly, "cli:root", None)
        .await
        .unwrap();
    assert_eq!(a.switch().await.unwrap().mode, Mode::ReadOnly);
    a.set_switch(Mode::Running, "cli:root", None).await.unwrap();
    assert_eq!(b.log(Some("host:switch")).await.unwrap().len(), 3);
    for (id, who) in [
        ("s1", Some("token:bob")),
        ("s2", Some("token:eve")),
        ("s3", None),
        ("s4", Some("token:bob")),
    ] {
        a.create_saga(&NewSaga {
            saga_id: id,
            scope: Scope::Session,
            label: "t",
            state: capsaga_core::fsm::State::Planning,
            owner: "o",
            plan: None,
            principal: who,
        })
        .await
        .unwrap();
    }
    let bobs = b.sagas_of("token:bob", 10).await.unwrap();
    assert_eq!(
        bobs.iter().map(|s| s.saga_id.as_str()).collect::<Vec<_>>(),
        ["s4", "s1"],
        "{}: newest first",
        db.name()
    );
    assert_eq!(b.sagas_of("token:bob", 1).await.unwrap().len(), 1);
    assert!(b.sagas_of("token:nobody", 10).await.unwrap().is_empty());
    assert_eq!(bobs[0].principal.as_deref(), Some("token:bob"));
    assert_eq!(b.saga("s3").await.unwrap().unwrap().principal, None);
    let first = &b.log(Some("s1")).await.unwrap()[0];
    assert_eq!(first.detail["principal"], "token:bob", "in the chained log");
    assert!(audit::verify(&*a, None).await.unwrap().ok());
}

suite!(
    tokens_are_hashes_revoked_for_good_and_never_renamed,
    one_token_name_is_created_once_across_hosts,
    sealed_keys_round_trip_and_are_listed_by_last_four,
    the_switch_and_saga_principals,
);
