//! The batching writer: PostgreSQL's equivalent of the SQLite store's group
//! commit (DESIGN §8d).
//!
//! Every write of the store appends to the hash-chained log, and each
//! writer has a chain of its own (`super::log`), whose head is one row of
//! `wal_chains` locked by every transaction that appends to it. One
//! transaction per write would then be one durable commit at a time per
//! host, whatever the concurrency. So each host runs one writer task: it
//! takes the first write waiting and every other one already queued (at
//! most [`MAX_BATCH`]), runs them in one transaction that locks its chain's
//! head first, each inside its own savepoint (a write that fails, e.g.
//! refused by fencing, is rolled back alone and gets its own error), then
//! commits once: one durable commit makes the whole batch durable, and
//! every caller is answered only after it. While one batch commits the next
//! one queues, so steps/s grows with the number of concurrent writers; the
//! hosts' batches lock different head rows, so they run and commit side by
//! side (PostgreSQL flushes commits that arrive together in one WAL flush).
//! At most every `super::log::ANCHOR_EVERY` a batch also anchors the other
//! chains' heads in this one. No LISTEN/NOTIFY anywhere on this path.
//!
//! A broken connection (the server restarted, a network partition) fails
//! every write of the batch with [`StoreError::Unreachable`]: the server
//! rolls the open transaction back, so none of it is durable. The next
//! batch takes a fresh connection from the pool.

use super::super::StoreError;
use super::{Conn, log};
use capsaga_core::wal_row::chain_genesis;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Most writes one transaction carries.
pub const MAX_BATCH: usize = 256;

/// A write's work, run on the writer's connection inside the batch's
/// transaction.
pub(super) type BoxFut<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

struct Ran {
    ok: bool,
    answer: Box<dyn FnOnce(Result<(), StoreError>) + Send>,
}

trait Work: Send {
    fn run<'a>(self: Box<Self>, c: &'a Conn) -> Pin<Box<dyn Future<Output = Ran> + Send + 'a>>;
    fn refuse(self: Box<Self>, e: StoreError);
}

struct Pending<F, T> {
    f: F,
    reply: tokio::sync::oneshot::Sender<Result<T, StoreError>>,
}

impl<F, T> Work for Pending<F, T>
where
    F: for<'a> FnOnce(&'a Conn) -> BoxFut<'a, T> + Send + 'static,
    T: Send + 'static,
{
    fn run<'a>(self: Box<Self>, c: &'a Conn) -> Pin<Box<dyn Future<Output = Ran> + Send + 'a>> {
        let Pending { f, reply } = *self;
        Box::pin(async move {
            let r = f(c).await;
            Ran {
                ok: r.is_ok(),
                answer: Box::new(move |commit: Result<(), StoreError>| {
                    let _ = reply.send(commit.and(r));
                }),
            }
        })
    }

    fn refuse(self: Box<Self>, e: StoreError) {
        let _ = self.reply.send(Err(e));
    }
}

type Job = Box<dyn Work>;

/// The writer task's handle.
pub(super) struct Writer {
    queue: tokio::sync::mpsc::UnboundedSender<Job>,
    commits: Arc<AtomicU64>,
    chain: Arc<str>,
}

impl Writer {
    /// Start the writer task on the current runtime; batches of at most
    /// `max_batch` writes (1: one transaction, and one durable commit, per
    /// write).
    /// Its chain is `chain` (checked by the caller: letters, digits, `-`
    /// and `_`), else `w-` and a fresh UUID, never shared by two writers.
    pub fn start(pool: deadpool_postgres::Pool, max_batch: usize, chain: Option<String>) -> Writer {
        let (queue, rx) = tokio::sync::mpsc::unbounded_channel();
        let commits = Arc::new(AtomicU64::new(0));
        let chain: Arc<str> = chain
            .unwrap_or_else(|| format!("w-{}", uuid::Uuid::new_v4().simple()))
            .into();
        tokio::spawn(run(
            pool,
            rx,
            max_batch.clamp(1, MAX_BATCH),
            commits.clone(),
            chain.clone(),
        ));
        Writer {
            queue,
            commits,
            chain,
        }
    }

    /// The name of this writer's chain.
    pub fn chain(&self) -> &str {
        &self.chain
    }

    /// Transactions committed so far.
    pub fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }

    /// Queue `f` and wait until its batch is durable (or failed).
    pub async fn write<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        F: for<'a> FnOnce(&'a Conn) -> BoxFut<'a, T> + Send + 'static,
        T: Send + 'static,
    {
        let (reply, rx) = tokio::sync::oneshot::channel();
        self.queue
            .send(Box::new(Pending { f, reply }))
            .map_err(|_| StoreError::Poisoned)?;
        rx.await.map_err(|_| StoreError::Poisoned)?
    }
}

/// What the writer task keeps between batches.
struct State {
    chain: Arc<str>,
    /// The batch's first statements (the chain's name is a UUID or a name
    /// `PgStore::open` checked, letters, digits, `-` and `_`; its genesis
    /// hex: nothing to quote).
    start: String,
    /// The same, creating the chain's head row first (until a batch that
    /// did so committed).
    start_new: String,
    created: bool,
    anchored: log::Anchored,
    last_anchor: Option<std::time::Instant>,
}

async fn run(
    pool: deadpool_postgres::Pool,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<Job>,
    max_batch: usize,
    commits: Arc<AtomicU64>,
    chain: Arc<str>,
) {
    let lock = format!(
        "BEGIN; SELECT seq, hash FROM wal_chains WHERE chain = '{chain}' FOR UPDATE; SAVEPOINT capsaga_job"
    );
    let create = format!(
        "BEGIN; INSERT INTO wal_chains (chain, seq, hash, opened_at) VALUES ('{chain}', 0, '{}', '{}') ON CONFLICT DO NOTHING; {}",
        chain_genesis(&chain),
        crate::clock::now_rfc3339(),
        lock.trim_start_matches("BEGIN; ")
    );
    let mut state = State {
        chain,
        start: lock,
        start_new: create,
        created: false,
        anchored: log::Anchored::new(),
        last_anchor: None,
    };
    while let Some(first) = rx.recv().await {
        let mut jobs = vec![first];
        while jobs.len() < max_batch {
            match rx.try_recv() {
                Ok(j) => jobs.push(j),
                Err(_) => break,
            }
        }
        batch(&pool, jobs, &commits, &mut state).await;
    }
}

fn again(e: &StoreError) -> StoreError {
    match e {
        StoreError::Unreachable { target, detail } => StoreError::Unreachable {
            target: target.clone(),
            detail: detail.clone(),
        },
        StoreError::Busy(s) => StoreError::Busy(s.clone()),
        other => StoreError::Backend(other.to_string()),
    }
}

fn refuse(jobs: impl IntoIterator<Item = Job>, e: &StoreError) {
    for j in jobs {
        j.refuse(again(e));
    }
}

fn fail_all(answers: Vec<Ran>, e: &StoreError) {
    for a in answers {
        (a.answer)(Err(again(e)));
    }
}

async fn batch(
    pool: &deadpool_postgres::Pool,
    jobs: Vec<Job>,
    commits: &AtomicU64,
    state: &mut State,
) {
    let conn = match pool.get().await {
        Ok(c) => c,
        Err(e) => {
            refuse(jobs, &super::pool_error(e));
            return;
        }
    };
    let c: &Conn = &conn;
    // One round trip: the transaction, this writer's chain head locked
    // (and read), the first savepoint.
    let start = if state.created {
        &state.start
    } else {
        &state.start_new
    };
    let head = match c.simple_query(start).await {
        Ok(msgs) => msgs.iter().find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => Some(log::BatchHead {
                chain: state.chain.clone(),
                hash: r.get(1)?.to_string(),
            }),
            _ => None,
        }),
        Err(e) => {
            let _ = c.batch_execute("ROLLBACK").await;
            refuse(jobs, &StoreError::from(e));
            return;
        }
    };
    let head = std::cell::RefCell::new(head);
    let due = state
        .last_anchor
        .is_none_or(|t| t.elapsed() >= log::ANCHOR_EVERY);
    let anchored = &state.anchored;
    let outcome = log::HEAD
        .scope(head, async move {
            let (kept, failed) = run_jobs(c, jobs).await?;
            // Anchor the other chains in this batch when due (never alone:
            // a writer with nothing to write anchors nothing). Its own
            // savepoint: an anchor that fails is dropped, the batch kept.
            let anchor = if due && !kept.is_empty() {
                anchor_in(c, anchored).await
            } else {
                None
            };
            Some((kept, failed, anchor))
        })
        .await;
    let Some((kept, failed, anchor)) = outcome else {
        return;
    };
    // A batch whose every write failed: roll it back.
    let end = if kept.is_empty() {
        "ROLLBACK"
    } else {
        "COMMIT"
    };
    match c.batch_execute(end).await {
        Ok(()) => {
            if !kept.is_empty() {
                commits.fetch_add(1, Ordering::Relaxed);
                state.created = true;
                if due {
                    state.last_anchor = Some(std::time::Instant::now());
                }
                if let Some(next) = anchor {
                    state.anchored = next;
                }
            }
            for a in kept {
                (a.answer)(Ok(()));
            }
        }
        Err(e) => {
            let e = StoreError::from(e);
            fail_all(kept, &e);
        }
    }
    answer_own(failed);
}

/// The anchor of a batch, in a savepoint of its own.
async fn anchor_in(c: &Conn, anchored: &log::Anchored) -> Option<log::Anchored> {
    let before = log::HEAD.with(|h| h.borrow().clone());
    if c.batch_execute("SAVEPOINT capsaga_anchor").await.is_err() {
        return None;
    }
    match log::anchor(c, anchored).await {
        Ok(next) => next,
        Err(e) => {
            tracing::warn!("the log's anchor was not written: {e}");
            log::HEAD.with(|h| *h.borrow_mut() = before);
            let _ = c
                .batch_execute("ROLLBACK TO SAVEPOINT capsaga_anchor")
                .await;
            None
        }
    }
}

/// Run the batch's writes, a savepoint each (the next one taken in the
/// round trip that ends the previous one); the writes kept and those that
/// failed, or None when the batch itself failed (every write answered).
async fn run_jobs(c: &Conn, jobs: Vec<Job>) -> Option<(Vec<Ran>, Vec<Ran>)> {
    let n = jobs.len();
    let mut kept: Vec<Ran> = Vec::with_capacity(n);
    let mut failed: Vec<Ran> = Vec::new();
    let mut jobs = jobs.into_iter().enumerate();
    while let Some((i, job)) = jobs.next() {
        let before = log::HEAD.with(|h| h.borrow().clone());
        let ran = job.run(c).await;
        if !ran.ok {
            // Its appends were rolled back with it: so is the head.
            log::HEAD.with(|h| *h.borrow_mut() = before);
        }
        let last = i + 1 == n;
        let end = match (ran.ok, last) {
            (true, true) => None,
            (true, false) => Some("RELEASE SAVEPOINT capsaga_job; SAVEPOINT capsaga_job"),
            (false, true) => Some("ROLLBACK TO SAVEPOINT capsaga_job"),
            (false, false) => Some(
                "ROLLBACK TO SAVEPOINT capsaga_job; RELEASE SAVEPOINT capsaga_job; SAVEPOINT capsaga_job",
            ),
        };
        let ended = match end {
            Some(sql) => c.batch_execute(sql).await.map_err(StoreError::from),
            None => Ok(()),
        };
        if let Err(e) = ended.and_then(|()| {
            if c.is_closed() {
                Err(super::closed())
            } else {
                Ok(())
            }
        }) {
            let _ = c.batch_execute("ROLLBACK").await;
            kept.push(ran);
            fail_all(kept, &e);
            answer_own(failed);
            refuse(jobs.map(|(_, j)| j), &e);
            return None;
        }
        if ran.ok {
            kept.push(ran);
        } else {
            failed.push(ran);
        }
    }
    Some((kept, failed))
}

/// Writes whose own work failed get their own error.
fn answer_own(failed: Vec<Ran>) {
    for a in failed {
        (a.answer)(Ok(()));
    }
}
