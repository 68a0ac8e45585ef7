//! Two hosts deciding one approval at the same moment, over their REST
//! APIs (`POST /v1/approvals/{id}/approve` on one, `.../deny` on the
//! other): one decides, the other is refused, and the log holds one
//! decision.

use super::rig::{LEASE_MS, Rig, runtime};
use capsaga_tests::mcp_rig::{connect, http};
use rmcp::model::{CallToolRequestParams, ClientConfig};
use serde_json::json;

#[test]
fn two_hosts_deciding_one_approval_at_once_decide_it_once() {
    let policy = format!(
        "store_lease_ms = {LEASE_MS}\n[tools.ledger]\ngrants = [\"fs:write:~/ws/**\"]\napproval = \"always\"\n"
    );
    let Some(rig) = Rig::with_policy("multi_host::approvals", 3, &policy) else {
        return;
    };
    let (ledger, _) = rig.ledger("ledger.txt");
    let rt = runtime();
    rt.block_on(async {
        let store = rig.store().await;
        let client = connect(rig.mcp(0), ClientConfig::default()).await;
        for round in 0..4 {
            // The call parks its saga (no human on this client) and names
            // the pending approval.
            let args = json!({"path": ledger, "entry": format!("e{round}")});
            let _ = client
                .call_tool(
                    CallToolRequestParams::new("ledger")
                        .with_arguments(args.as_object().cloned().unwrap_or_default()),
                )
                .await;
            let pending = store.approvals(false).await.unwrap();
            assert_eq!(pending.len(), 1, "round {round}: {pending:?}");
            let id = pending[0].approval_id.clone();
            let (a, b) = tokio::join!(
                http()
                    .post(format!("{}/v1/approvals/{id}/approve", rig.base(1)))
                    .json(&json!({"by": "alice"}))
                    .send(),
                http()
                    .post(format!("{}/v1/approvals/{id}/deny", rig.base(2)))
                    .json(&json!({"by": "bob"}))
                    .send(),
            );
            let (a, b) = (a.unwrap().status(), b.unwrap().status());
            assert!(
                (a.is_success() && b.is_client_error()) || (b.is_success() && a.is_client_error()),
                "round {round}: approve {a}, deny {b}"
            );
            let row = store.approval(&id).await.unwrap();
            let want = if a.is_success() { "approved" } else { "denied" };
            assert_eq!(row.status.as_str(), want, "round {round}");
            let decisions = store
                .log(None)
                .await
                .unwrap()
                .into_iter()
                .filter(|r| {
                    matches!(r.record.as_str(), "APPROVAL_APPROVED" | "APPROVAL_DENIED")
                        && r.detail["approval_id"] == id.as_str()
                })
                .count();
            assert_eq!(decisions, 1, "round {round}");
            // End this saga before the next round.
            let _ = client
                .call_tool(CallToolRequestParams::new("capsaga_rollback"))
                .await;
        }
        let report = capsaga_store::audit::verify(&*store, None).await.unwrap();
        assert!(report.ok(), "{report:?}");
    });
}
