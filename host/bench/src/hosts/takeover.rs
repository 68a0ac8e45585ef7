//! `capsaga-bench --hosts`, takeover: how long after a host dies (SIGKILL)
//! or is paused (SIGSTOP) another host has rolled back the saga it held,
//! with real `capsaga serve` processes on the run's PostgreSQL (see the
//! parent module).

use super::Takeover;
use crate::mcp::{call, client, open_session};
use capsaga_store::postgres::{PgOptions, PgStore};
use capsaga_store::{OwnerStore, SagaStore};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `capsaga serve` child, killed when dropped.
struct Serve {
    child: Child,
    addr: String,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start `capsaga serve` on `config` and the store `url`.
fn serve(exe: &Path, config: &Path, url: &str) -> Result<Serve, String> {
    let mut child = Command::new(exe)
        .args(["--json", "--config"])
        .arg(config)
        .args(["serve", "--listen", "127.0.0.1:0", "--catalog-poll-ms", "0"])
        .env("CAPSAGA_STORE", url)
        .env_remove("CAPSAGA_TOKEN")
        .env_remove("CAPSAGA_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("{}: {e}", exe.display()))?;
    let mut line = String::new();
    if let Some(out) = child.stdout.take() {
        let _ = BufReader::new(out).read_line(&mut line);
    }
    let v: serde_json::Value = serde_json::from_str(&line)
        .map_err(|_| format!("capsaga serve did not start: `{}`", line.trim()))?;
    let addr = v["listening"]
        .as_str()
        .ok_or_else(|| format!("capsaga serve did not say where it listens: {v}"))?
        .to_string();
    Ok(Serve { child, addr })
}

/// `kill -SIG pid`.
fn signal(child: &Child, sig: &str) -> Result<(), String> {
    let st = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(child.id().to_string())
        .status()
        .map_err(|e| format!("kill: {e}"))?;
    if st.success() {
        Ok(())
    } else {
        Err(format!("kill -{sig} failed: {st}"))
    }
}

/// The workspace of the hosts: `component` as the tool `time_now`, the
/// lease at `lease_ms`.
fn workspace(dir: &Path, component: &Path, lease_ms: u64) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir.join("tools")).map_err(|e| e.to_string())?;
    std::fs::copy(component, dir.join("tools/time_now.wasm"))
        .map_err(|e| format!("{}: {e}", component.display()))?;
    let config = dir.join("capsaga.toml");
    std::fs::write(
        &config,
        format!(
            "home = \".\"\ntools_dir = \"tools\"\nstate_dir = \".capsaga\"\nstore_lease_ms = {lease_ms}\n[tools.time_now]\n"
        ),
    )
    .map_err(|e| e.to_string())?;
    Ok(config)
}

/// One takeover on the fresh database `url`: a survivor and a victim,
/// the victim's session saga with one committed step, then `fault`
/// (`kill` or `pause`) on the victim.
pub(super) async fn takeover(
    exe: &Path,
    url: &str,
    component: &Path,
    lease_ms: u64,
    fault: &'static str,
) -> Result<Takeover, String> {
    let dir = std::env::temp_dir().join(format!("capsaga-bench-takeover-{}", uuid::Uuid::new_v4()));
    let r = async {
        let config = workspace(&dir, component, lease_ms)?;
        let _survivor = serve(exe, &config, url)?;
        let mut victim = serve(exe, &config, url)?;
        let store = PgStore::open(url, &PgOptions::default())
            .await
            .map_err(|e| e.to_string())?;
        let http = client()?;
        let mcp = format!("http://{}/mcp", victim.addr);
        let session = open_session(&http, &mcp).await?;
        call(&http, &mcp, Some(&session)).await?;
        let saga = store
            .unfinished_sagas()
            .await
            .map_err(|e| e.to_string())?
            .into_iter()
            .next()
            .ok_or("the session's saga is not in the store")?;
        let owner = saga
            .owner
            .clone()
            .ok_or("the session's saga has no owner")?;
        let t0 = Instant::now();
        match fault {
            "kill" => {
                victim.child.kill().map_err(|e| e.to_string())?;
                let _ = victim.child.wait();
            }
            _ => signal(&victim.child, "STOP")?,
        }
        let mut expired = None;
        let recovered = loop {
            if expired.is_none() && !store.owner_alive(&owner).await.map_err(|e| e.to_string())? {
                expired = Some(t0.elapsed());
            }
            let row = store.saga(&saga.saga_id).await.map_err(|e| e.to_string())?;
            if row.is_some_and(|s| s.state.is_terminal()) {
                break t0.elapsed();
            }
            if t0.elapsed() > Duration::from_millis(lease_ms) + Duration::from_secs(120) {
                return Err(format!(
                    "saga {} not recovered in {:?}",
                    saga.saga_id,
                    t0.elapsed()
                ));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let expired = expired.unwrap_or(recovered);
        let (mut woke_exit_s, mut woke_exit_code) = (None, None);
        if fault == "pause" {
            let t1 = Instant::now();
            signal(&victim.child, "CONT")?;
            while t1.elapsed() < Duration::from_secs(60) {
                if let Ok(Some(st)) = victim.child.try_wait() {
                    woke_exit_s = Some(t1.elapsed().as_secs_f64());
                    woke_exit_code = st.code();
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        Ok(Takeover {
            fault,
            expired_s: expired.as_secs_f64(),
            recovered_s: recovered.as_secs_f64(),
            after_expiry_s: (recovered - expired).as_secs_f64(),
            woke_exit_s,
            woke_exit_code,
        })
    }
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    r
}
