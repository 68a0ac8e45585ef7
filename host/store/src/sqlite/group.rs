//! Group commit (DESIGN §8d): the process's one writer thread, which owns
//! the write connection and makes several callers' transactions durable
//! with one sync.
//!
//! A write is a job: a closure run inside a transaction, sent to the
//! writer and awaited (the caller's task yields; no runtime thread blocks
//! on a disk sync). The writer takes the first job waiting, then every
//! other one already queued (at most [`GroupCommit::max_batch`]), and runs
//! them in one `IMMEDIATE` transaction under the write turn, each inside
//! its own savepoint: a job that fails is rolled back to its savepoint
//! alone and gets its error at once. Then one `COMMIT`, with
//! `synchronous = FULL` one sync of the `-wal` file, after which every job
//! of the batch is answered. So a caller is released only once its record
//! is durable, and while one batch syncs the next one queues: throughput
//! grows with the number of concurrent writers instead of being one sync
//! per record.
//!
//! If the commit fails (or SQLite rolls the whole transaction back on an
//! I/O error) every job of the batch gets the error: none of them is
//! durable. Readers use another connection and see a batch only once it
//! committed, hence only durable records.
//!
//! With [`GroupCommit::Off`] each job is its own transaction (one sync per
//! record): the baseline `capsaga bench --group-commit` compares against.

use super::super::StoreError;
use super::checkpoint;
use super::turn::Turn;
use rusqlite::{Connection, Transaction, TransactionBehavior};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

/// Whether writes of concurrent callers share a sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GroupCommit {
    /// Every job waiting when a transaction starts joins it (at most
    /// [`MAX_BATCH`]); one sync for all (the default).
    #[default]
    On,
    /// One transaction, and one sync, per job.
    Off,
}

/// Most jobs one transaction carries.
pub const MAX_BATCH: usize = 256;

impl GroupCommit {
    /// Most jobs per transaction.
    pub fn max_batch(self) -> usize {
        match self {
            GroupCommit::On => MAX_BATCH,
            GroupCommit::Off => 1,
        }
    }
}

/// What a job did: whether its writes are kept, and how to answer its
/// caller once the batch's commit is known.
pub(super) struct Ran {
    ok: bool,
    answer: Answer,
}

type Answer = Box<dyn FnOnce(Result<(), StoreError>) + Send>;

/// One caller's write: run it in the batch's transaction, or refuse it
/// (the batch could not start) with the error its caller gets.
trait Work: Send {
    fn run(self: Box<Self>, tx: &Transaction<'_>) -> Ran;
    fn refuse(self: Box<Self>, e: StoreError);
}

struct Pending<F, T> {
    f: F,
    reply: tokio::sync::oneshot::Sender<Result<T, StoreError>>,
}

impl<F, T> Work for Pending<F, T>
where
    F: FnOnce(&Transaction<'_>) -> Result<T, StoreError> + Send + 'static,
    T: Send + 'static,
{
    fn run(self: Box<Self>, tx: &Transaction<'_>) -> Ran {
        let Pending { f, reply } = *self;
        let r = f(tx);
        Ran {
            ok: r.is_ok(),
            answer: Box::new(move |commit: Result<(), StoreError>| {
                let _ = reply.send(commit.and(r));
            }),
        }
    }

    fn refuse(self: Box<Self>, e: StoreError) {
        let _ = self.reply.send(Err(e));
    }
}

type Job = Box<dyn Work>;

enum Msg {
    Write(Job),
    Checkpoint(mpsc::Sender<checkpoint::Checkpoint>),
}

/// The handle of the writer thread.
pub(super) struct Writer {
    queue: Option<mpsc::Sender<Msg>>,
    thread: Option<JoinHandle<()>>,
    /// Transactions committed (one sync each).
    commits: Arc<AtomicU64>,
    /// Writes sent and not yet taken by the writer thread.
    queued: Arc<AtomicU64>,
}

/// What the writer thread owns.
pub(super) struct Owned {
    pub conn: Connection,
    pub turn: Turn,
    pub path: PathBuf,
    pub busy_wait: Duration,
    pub mode: GroupCommit,
}

/// The same error for another caller (store errors are not `Clone`).
fn again(e: &StoreError) -> StoreError {
    match e {
        StoreError::Busy(m) => StoreError::Busy(m.clone()),
        other => StoreError::Backend(other.to_string()),
    }
}

impl Writer {
    /// Start the writer thread with the write connection.
    ///
    /// # Errors
    /// [`StoreError::Backend`] when the thread cannot be started.
    pub(super) fn start(owned: Owned) -> Result<Writer, StoreError> {
        let (queue, rx) = mpsc::channel();
        let commits = Arc::new(AtomicU64::new(0));
        let queued = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&commits);
        let waiting = Arc::clone(&queued);
        let thread = std::thread::Builder::new()
            .name("capsaga-store-writer".into())
            .spawn(move || run(owned, &rx, &counted, &waiting))
            .map_err(|e| StoreError::Backend(format!("cannot start the store's writer: {e}")))?;
        Ok(Writer {
            queue: Some(queue),
            thread: Some(thread),
            commits,
            queued,
        })
    }

    /// Write transactions committed so far (one sync each).
    pub(super) fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }

    /// Writes sent to the writer thread and not yet taken into a batch.
    pub(super) fn queued(&self) -> u64 {
        self.queued.load(Ordering::SeqCst)
    }

    /// Run `f` in a write transaction (shared with other callers' when
    /// group commit is on) and return its value once the transaction is
    /// durable.
    ///
    /// # Errors
    /// Whatever `f` returns (its writes are then rolled back), the commit's
    /// error, or [`StoreError::Poisoned`] when the writer is gone.
    pub(super) async fn write<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Transaction<'_>) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (reply, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(Pending { f, reply });
        self.queued.fetch_add(1, Ordering::SeqCst);
        let sent = self
            .queue
            .as_ref()
            .ok_or(StoreError::Poisoned)
            .and_then(|q| q.send(Msg::Write(job)).map_err(|_| StoreError::Poisoned));
        if let Err(e) = sent {
            self.queued.fetch_sub(1, Ordering::SeqCst);
            return Err(e);
        }
        rx.await.map_err(|_| StoreError::Poisoned)?
    }

    /// A `TRUNCATE` checkpoint on the write connection, between batches.
    ///
    /// # Errors
    /// [`StoreError::Poisoned`] when the writer is gone.
    pub(super) fn checkpoint(&self) -> Result<checkpoint::Checkpoint, StoreError> {
        let (tx, rx) = mpsc::channel();
        self.queue
            .as_ref()
            .ok_or(StoreError::Poisoned)?
            .send(Msg::Checkpoint(tx))
            .map_err(|_| StoreError::Poisoned)?;
        rx.recv().map_err(|_| StoreError::Poisoned)
    }
}

impl Drop for Writer {
    /// Let the writer finish the jobs queued, checkpoint and close.
    fn drop(&mut self) {
        drop(self.queue.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(mut o: Owned, rx: &mpsc::Receiver<Msg>, commits: &AtomicU64, queued: &AtomicU64) {
    let mut next_checkpoint_at = checkpoint::CHECKPOINT_THRESHOLD_BYTES;
    while let Ok(first) = rx.recv() {
        let mut jobs = Vec::new();
        let mut checkpoints = Vec::new();
        let mut next = Some(first);
        while let Some(m) = next.take() {
            match m {
                Msg::Write(j) => {
                    queued.fetch_sub(1, Ordering::SeqCst);
                    jobs.push(j);
                }
                Msg::Checkpoint(reply) => checkpoints.push(reply),
            }
            if jobs.len() < o.mode.max_batch() {
                next = rx.try_recv().ok();
            }
        }
        // Group commit off: one job per transaction, the rest waits.
        while !jobs.is_empty() {
            let now: Vec<Job> = jobs.drain(..jobs.len().min(o.mode.max_batch())).collect();
            batch(&mut o, now, commits);
            next_checkpoint_at =
                checkpoint::after_commit(&o.conn, &o.path, o.busy_wait, next_checkpoint_at);
        }
        for reply in checkpoints {
            let _ = reply.send(checkpoint::truncate_nowait(&o.conn, &o.path, o.busy_wait));
        }
    }
    let _ = checkpoint::truncate_nowait(&o.conn, &o.path, o.busy_wait);
}

/// Every job answered with `e`.
fn fail_all(answers: Vec<Answer>, e: &StoreError) {
    for a in answers {
        a(Err(again(e)));
    }
}

/// Jobs that did not run, answered with `e`.
fn refuse(jobs: Vec<Job>, e: &StoreError) {
    for j in jobs {
        j.refuse(again(e));
    }
}

/// One transaction for `jobs`, one savepoint each, one commit. A commit
/// is counted in `commits` before any job of the batch is answered, so a
/// caller that saw its write return sees the count that includes it.
fn batch(o: &mut Owned, jobs: Vec<Job>, commits: &AtomicU64) {
    let held = match o.turn.take(o.busy_wait) {
        Ok(h) => h,
        Err(e) => {
            refuse(jobs, &e);
            return;
        }
    };
    let tx = match o
        .conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
    {
        Ok(tx) => tx,
        Err(e) => {
            drop(held);
            refuse(jobs, &super::classify(&o.path, e));
            return;
        }
    };
    let mut kept = Vec::with_capacity(jobs.len());
    // Jobs that failed and were rolled back to their savepoint: answered
    // with their own error once the batch is over.
    let mut failed = Vec::new();
    let mut jobs = jobs.into_iter();
    while let Some(job) = jobs.next() {
        if let Err(e) = tx.execute_batch("SAVEPOINT capsaga_job") {
            let e = StoreError::from(e);
            fail_all(kept, &e);
            answer_failed(failed);
            refuse(jobs.collect(), &e);
            return;
        }
        let ran = job.run(&tx);
        let end = if ran.ok {
            "RELEASE capsaga_job"
        } else {
            "ROLLBACK TO capsaga_job; RELEASE capsaga_job"
        };
        let ended = tx.execute_batch(end);
        if ended.is_err() || tx.is_autocommit() {
            // SQLite rolled the whole transaction back (an I/O error, a
            // full disk): nothing of this batch is kept.
            let e = match ended {
                Err(e) => StoreError::from(e),
                Ok(()) => StoreError::Backend("the transaction was rolled back by SQLite".into()),
            };
            kept.push(ran.answer);
            fail_all(kept, &e);
            answer_failed(failed);
            refuse(jobs.collect(), &e);
            return;
        }
        if ran.ok {
            kept.push(ran.answer);
        } else {
            failed.push(ran.answer);
        }
    }
    let committed = tx.commit().map_err(|e| super::classify(&o.path, e));
    drop(held);
    match committed {
        Ok(()) => {
            commits.fetch_add(1, Ordering::Relaxed);
            for a in kept {
                a(Ok(()));
            }
        }
        Err(e) => fail_all(kept, &e),
    }
    answer_failed(failed);
}

/// Jobs whose own work failed get their own error back.
fn answer_failed(answers: Vec<Answer>) {
    for a in answers {
        a(Ok(()));
    }
}
