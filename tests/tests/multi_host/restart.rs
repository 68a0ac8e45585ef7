//! The database restarted under load (`pg_ctl stop -m immediate`, as a
//! crash, then started again): the calls in flight fail cleanly (an error,
//! no hang), the hosts stay up and reconnect (new sessions on both succeed),
//! nothing acknowledged as committed is lost, no step runs twice, and the
//! log verifies.

use super::chaos::one_saga;
use super::rig::{Rig, eventually, lines, runtime};
use capsaga_store::audit;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[test]
fn the_database_restarted_under_load_loses_nothing_committed() {
    // A lease longer than the restart: the hosts keep their sagas.
    let Some(mut rig) = Rig::with_lease("multi_host::restart", 2, 10_000) else {
        return;
    };
    // One ledger file per saga (see `chaos`).
    let base = rig.ws.ws_path("");
    let base = base.trim_end_matches('/').to_string();
    let ledger_of = move |n: u64| {
        let path = format!("{base}/ledger-{n}.txt");
        let journal = std::path::PathBuf::from(format!("{path}.journal"));
        (path, journal)
    };
    let rt = runtime();
    let acked: Arc<Mutex<BTreeSet<u64>>> = Arc::default();
    let failed = Arc::new(Mutex::new(0usize));
    rt.block_on(async {
        let urls = [rig.mcp(0), rig.mcp(1)];
        let mut load = tokio::task::JoinSet::new();
        for n in 0..24u64 {
            let (url, ledger) = (urls[n as usize % 2].clone(), ledger_of(n).0);
            let (acked, failed) = (acked.clone(), failed.clone());
            load.spawn(async move {
                // Spread the sessions over the restart.
                tokio::time::sleep(Duration::from_millis(n * 60)).await;
                let r = tokio::time::timeout(Duration::from_secs(40), one_saga(url, ledger, n, 4))
                    .await;
                match r {
                    Ok(Ok(())) => {
                        acked.lock().unwrap().insert(n);
                    }
                    Ok(Err(_)) => *failed.lock().unwrap() += 1,
                    Err(_) => panic!("session {n} hung: an in-flight call must fail cleanly"),
                }
            });
        }
        // Restart the database in the middle of the load.
        tokio::time::sleep(Duration::from_millis(500)).await;
        rig.cluster.stop().expect("pg_ctl stop");
        tokio::time::sleep(Duration::from_millis(300)).await;
        rig.cluster.start_again().expect("pg_ctl start");
        while let Some(r) = load.join_next().await {
            r.unwrap();
        }
        eprintln!(
            "restart: {} sessions acknowledged, {} failed cleanly across the restart",
            acked.lock().unwrap().len(),
            failed.lock().unwrap()
        );
        assert!(rig.running(0) && rig.running(1), "the hosts stayed up");
        // Both hosts serve again.
        for (i, url) in urls.iter().enumerate() {
            let ledger = ledger_of(1000 + i as u64).0;
            eventually(Duration::from_secs(30), "a host serves again", || {
                let (url, ledger) = (url.clone(), ledger.clone());
                async move { one_saga(url, ledger, 1000 + i as u64, 1).await.is_ok() }
            })
            .await;
        }
        let store = rig.store().await;
        let mut entries: BTreeSet<String> = BTreeSet::new();
        let mut j: Vec<String> = Vec::new();
        for n in 0..24 {
            let (ledger, journal) = ledger_of(n);
            entries.extend(lines(std::path::Path::new(&ledger)));
            j.extend(lines(&journal));
        }
        for n in acked.lock().unwrap().iter() {
            for i in 0..4 {
                let entry = format!("saga{n}-step{i} ");
                assert!(
                    entries.iter().any(|e| e.starts_with(&entry)),
                    "acknowledged {entry}is lost"
                );
            }
        }
        let mut seen = BTreeSet::new();
        for l in j.iter().filter(|l| l.starts_with("execute ")) {
            assert!(seen.insert(l.clone()), "{l} twice");
        }
        let report = audit::verify(&*store, None).await.unwrap();
        assert!(report.ok(), "{report:?}");
    });
}
