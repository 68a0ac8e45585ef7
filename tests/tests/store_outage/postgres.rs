//! The outage on PostgreSQL: the real server stopped (`pg_ctl stop -m
//! immediate`, as a crash) after the steps' BEGIN and effects, and started
//! again after the host tried to write their outcome.

use super::outage::{Fault, run};
use super::rig::{Server, runtime, workspace};
use capsaga_pg_harness::Cluster;
use capsaga_store::Store;
use capsaga_store::postgres::{PgOptions, PgStore};
use std::sync::Arc;

struct Stopped<'a> {
    cluster: &'a Cluster,
}

impl Fault for Stopped<'_> {
    fn apply(&mut self) {
        self.cluster.stop().expect("pg_ctl stop");
    }

    fn lift(&mut self) {
        self.cluster.start_again().expect("pg_ctl start");
    }
}

#[test]
fn postgres_stopped_during_a_step_never_ends_in_done() {
    let cluster = match Cluster::start() {
        Ok(Some(c)) => c,
        Ok(None) => {
            eprintln!(
                "SKIPPED store_outage::postgres: PostgreSQL is not installed (apt-get install postgresql; CI does)"
            );
            return;
        }
        Err(e) => panic!("PostgreSQL is installed but did not start: {e}"),
    };
    let url = cluster.fresh_database().expect("a database");
    let ws = workspace();
    let mut server = Server::start(&ws, Some(&url));
    let mut fault = Stopped { cluster: &cluster };
    let open = || {
        let url = url.clone();
        async move {
            let s: Arc<dyn Store> = Arc::new(
                PgStore::open(&url, &PgOptions::default())
                    .await
                    .expect("the store opens"),
            );
            s
        }
    };
    runtime().block_on(run(&ws, &mut server, &mut fault, open));
}
