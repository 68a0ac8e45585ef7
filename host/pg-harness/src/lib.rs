//! # capsaga-pg-harness
//!
//! A throw-away PostgreSQL cluster for tests and benchmarks (the store's
//! suite, `tests/tests/multi_host`, `capsaga-bench --pg`; never the
//! `capsaga` binary): `initdb` and `pg_ctl` from Debian's `postgresql` package
//! in a temp dir, listening on 127.0.0.1 on a free port (and a Unix socket
//! in the same dir), password authentication over TCP, no system service.
//!
//! `initdb` refuses to run as root: when this process is root the cluster
//! is made and run as the `postgres` user (`setpriv`), in a directory
//! handed to it. A guardian process holds the read end of a pipe whose
//! write end is this process's: when this process exits, however it exits,
//! the guardian stops the cluster and removes its directory, so no server
//! outlives its test run.
//!
//! [`Cluster::start`] returns `Ok(None)` when PostgreSQL is not installed
//! (the caller says SKIPPED, loudly); `CAPSAGA_PG_BIN` names another bin
//! directory.

#![warn(missing_docs)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Mutex;

/// The user tests connect as.
pub const USER: &str = "capsaga";

/// A running cluster. Dropping it stops the server and removes its files.
#[derive(Debug)]
pub struct Cluster {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    password: String,
    /// `(uid, gid)` the server runs as, when this process is root.
    run_as: Option<(u32, u32)>,
    guardian: Mutex<Option<(Child, ChildStdin)>>,
}

/// The directory of PostgreSQL's programs: `CAPSAGA_PG_BIN`, else the
/// newest `/usr/lib/postgresql/<version>/bin` with `initdb`.
pub fn bin_dir() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CAPSAGA_PG_BIN") {
        let p = PathBuf::from(p);
        return p.join("initdb").exists().then_some(p);
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, b)| b)
}

fn passwd_ids(user: &str) -> Option<(u32, u32)> {
    let text = std::fs::read_to_string("/etc/passwd").ok()?;
    text.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.first() == Some(&user) && f.len() > 3)
            .then(|| Some((f[2].parse().ok()?, f[3].parse().ok()?)))
            .flatten()
    })
}

fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

impl Cluster {
    /// Make and start a cluster; `Ok(None)` when PostgreSQL is absent.
    ///
    /// # Errors
    /// Why it could not start (the server's log is included).
    pub fn start() -> Result<Option<Cluster>, String> {
        let Some(bin) = bin_dir() else {
            return Ok(None);
        };
        let root = is_root();
        let run_as = if root {
            Some(passwd_ids("postgres").ok_or(
                "running as root and there is no `postgres` user to run initdb as (install Debian's postgresql package)",
            )?)
        } else {
            None
        };
        let dir = tempfile::Builder::new()
            .prefix("capsaga-pg-")
            .tempdir()
            .map_err(|e| e.to_string())?
            .keep();
        if let Some((uid, gid)) = run_as {
            std::os::unix::fs::chown(&dir, Some(uid), Some(gid)).map_err(|e| e.to_string())?;
        }
        let password = uuid::Uuid::new_v4().simple().to_string();
        let pwfile = dir.join("pw");
        std::fs::write(&pwfile, &password).map_err(|e| e.to_string())?;
        if let Some((uid, gid)) = run_as {
            std::os::unix::fs::chown(&pwfile, Some(uid), Some(gid)).map_err(|e| e.to_string())?;
        }
        let c = Cluster {
            bin,
            port: 0,
            dir,
            password,
            run_as,
            guardian: Mutex::new(None),
        };
        let data = c.dir.join("data");
        c.run(
            "initdb",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-U".as_ref(),
                USER.as_ref(),
                "--pwfile".as_ref(),
                pwfile.as_os_str(),
                "--auth-local=trust".as_ref(),
                "--auth-host=scram-sha-256".as_ref(),
                "-E".as_ref(),
                "UTF8".as_ref(),
                "--no-sync".as_ref(),
            ],
        )?;
        let _ = std::fs::remove_file(&pwfile);
        let mut c = c;
        c.port = free_port().map_err(|e| e.to_string())?;
        c.pg_ctl_start()?;
        c.start_guardian()?;
        Ok(Some(c))
    }

    fn command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        let mut cmd = match self.run_as {
            Some((uid, gid)) => {
                let mut c = Command::new("setpriv");
                c.arg(format!("--reuid={uid}"))
                    .arg(format!("--regid={gid}"))
                    .arg("--clear-groups")
                    .arg("--")
                    .arg(path);
                c
            }
            None => Command::new(path),
        };
        cmd.current_dir(&self.dir).stdin(Stdio::null());
        cmd
    }

    fn run(&self, program: &str, args: &[&std::ffi::OsStr]) -> Result<(), String> {
        let out = self
            .command(program)
            .args(args)
            .output()
            .map_err(|e| format!("{program}: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{program} failed ({}): {}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    fn pg_ctl_start(&self) -> Result<(), String> {
        let data = self.dir.join("data");
        let log = self.dir.join("server.log");
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=on",
            self.port,
            self.dir.display()
        );
        self.run(
            "pg_ctl",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-l".as_ref(),
                log.as_os_str(),
                "-o".as_ref(),
                opts.as_ref(),
                "-w".as_ref(),
                "-t".as_ref(),
                "60".as_ref(),
                "start".as_ref(),
            ],
        )
        .map_err(|e| format!("{e}\nserver log:\n{}", self.log()))
    }

    /// The guardian: stops the server and removes the directory once this
    /// process's end of the pipe closes.
    fn start_guardian(&self) -> Result<(), String> {
        let script = format!(
            "read _ ; '{}' -D '{}' stop -m immediate >/dev/null 2>&1 ; rm -rf '{}'",
            self.bin.join("pg_ctl").display(),
            self.dir.join("data").display(),
            self.dir.display()
        );
        let mut cmd = match self.run_as {
            Some((uid, gid)) => {
                let mut c = Command::new("setpriv");
                c.arg(format!("--reuid={uid}"))
                    .arg(format!("--regid={gid}"))
                    .arg("--clear-groups")
                    .args(["--", "sh", "-c", &script]);
                c
            }
            None => {
                let mut c = Command::new("sh");
                c.args(["-c", &script]);
                c
            }
        };
        // A process group of its own: a signal to the test run's group
        // (Ctrl-C, `timeout`) must not take the guardian down before it
        // has stopped the server.
        let mut child = std::os::unix::process::CommandExt::process_group(&mut cmd, 0)
            .current_dir("/")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("guardian: {e}"))?;
        let stdin = child.stdin.take().ok_or("guardian: no stdin")?;
        *self.guardian.lock().map_err(|_| "poisoned")? = Some((child, stdin));
        Ok(())
    }

    /// The TCP port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The password of [`USER`].
    pub fn password(&self) -> &str {
        &self.password
    }

    /// A connection string for database `db` over TCP, with the password.
    pub fn url(&self, db: &str) -> String {
        format!(
            "postgres://{USER}:{}@127.0.0.1:{}/{db}",
            self.password, self.port
        )
    }

    /// Create database `name` (a fresh, empty one per test).
    ///
    /// # Errors
    /// `psql`'s message.
    pub fn create_database(&self, name: &str) -> Result<(), String> {
        self.psql("postgres", &format!("CREATE DATABASE \"{name}\""))
    }

    /// A fresh database with a unique name; its connection string.
    ///
    /// # Errors
    /// As [`Cluster::create_database`].
    pub fn fresh_database(&self) -> Result<String, String> {
        let name = format!("t_{}", uuid::Uuid::new_v4().simple());
        self.create_database(&name)?;
        Ok(self.url(&name))
    }

    /// Run SQL in database `db` as [`USER`] (over the Unix socket).
    ///
    /// # Errors
    /// `psql`'s message.
    pub fn psql(&self, db: &str, sql: &str) -> Result<(), String> {
        let dir = self.dir.display().to_string();
        let port = self.port.to_string();
        self.run(
            "psql",
            &[
                "-X".as_ref(),
                "-q".as_ref(),
                "-v".as_ref(),
                "ON_ERROR_STOP=1".as_ref(),
                "-h".as_ref(),
                dir.as_ref(),
                "-p".as_ref(),
                port.as_ref(),
                "-U".as_ref(),
                USER.as_ref(),
                "-d".as_ref(),
                db.as_ref(),
                "-c".as_ref(),
                sql.as_ref(),
            ],
        )
    }

    /// Stop the server now (`immediate`: as a crash would), keeping its
    /// files.
    ///
    /// # Errors
    /// `pg_ctl`'s message.
    pub fn stop(&self) -> Result<(), String> {
        let data = self.dir.join("data");
        self.run(
            "pg_ctl",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-m".as_ref(),
                "immediate".as_ref(),
                "-w".as_ref(),
                "stop".as_ref(),
            ],
        )
    }

    /// Start the server again (after [`Cluster::stop`]), on the same port.
    ///
    /// # Errors
    /// `pg_ctl`'s message.
    pub fn start_again(&self) -> Result<(), String> {
        self.pg_ctl_start()
    }

    /// The server's log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// The cluster's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Ok(mut g) = self.guardian.lock()
            && let Some((mut child, mut stdin)) = g.take()
        {
            let _ = stdin.write_all(b"stop\n");
            drop(stdin);
            let _ = child.wait();
        }
    }
}

fn is_root() -> bool {
    // The effective uid, without a libc binding: /proc/self/status's `Uid:`
    // line (real, effective, saved, fs).
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}
