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
//! record): the baseline `capsaga-bench --group-commit` compares against.
//!
//! A caller that finds the connection free (no batch running) does not
//! wait for the writer thread: it runs the batch itself, its own job first
//! and then every job queued, inside `tokio::task::block_in_place` (its
//! worker hands its other tasks to another thread first, so the disk sync
//! still blocks no runtime thread that has tasks to run). That saves the two
//! thread hand-offs of a write to the writer and of its answer back, about
//! 40 µs a record measured on tmpfs (`perf`), which were most of what a
//! lone saga step pays beyond its two syncs. The writer thread stays for
//! the callers that find a batch running (they queue, and the batch's
//! runner or the writer takes them next), for a runtime with one thread
//! (`block_in_place` needs a multi-threaded one), and for group commit off.

use super::super::StoreError;
use super::checkpoint;
use super::turn::Turn;
use rusqlite::{Connection, Transaction, TransactionBehavior};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, mpsc};
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

type CheckpointReply = mpsc::Sender<checkpoint::Checkpoint>;

enum Msg {
    Write(Job),
    Checkpoint(CheckpointReply),
}

/// The handle of the writer thread.
pub(super) struct Writer {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// What the writer thread and the callers share.
struct Shared {
    /// Messages waiting, and whether the store is closing.
    queue: Mutex<Queue>,
    /// Signalled when a message is queued or the store closes.
    ready: Condvar,
    /// The write connection: whoever holds it runs the next batch.
    owned: Mutex<Owned>,
    /// Transactions committed (one sync each).
    commits: AtomicU64,
    /// Writes sent and not yet taken into a batch.
    queued: AtomicU64,
}

#[derive(Default)]
struct Queue {
    msgs: VecDeque<Msg>,
    closed: bool,
}

impl Shared {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        // A panic while the queue was locked left it consistent (a push or
        // a pop): keep going.
        self.queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Up to `room` queued writes (and every checkpoint request found on
    /// the way), in order.
    fn take(&self, room: usize, jobs: &mut Vec<Job>, checkpoints: &mut Vec<CheckpointReply>) {
        let mut q = self.queue();
        while jobs.len() < room {
            match q.msgs.pop_front() {
                Some(Msg::Write(j)) => {
                    self.queued.fetch_sub(1, Ordering::SeqCst);
                    jobs.push(j);
                }
                Some(Msg::Checkpoint(reply)) => checkpoints.push(reply),
                None => break,
            }
        }
    }
}

/// Whether this caller may run a batch on its own thread: inside a
/// multi-threaded tokio runtime, where `block_in_place` moves the worker's
/// other tasks away first.
fn may_lead() -> bool {
    tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread)
}

/// What the writer thread owns.
pub(super) struct Owned {
    pub conn: Connection,
    pub turn: Turn,
    pub path: PathBuf,
    pub busy_wait: Duration,
    pub mode: GroupCommit,
    /// `-wal` size past which the next commit is followed by a checkpoint
    /// attempt ([`checkpoint::after_commit`]).
    pub next_checkpoint_at: u64,
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
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue::default()),
            ready: Condvar::new(),
            owned: Mutex::new(owned),
            commits: AtomicU64::new(0),
            queued: AtomicU64::new(0),
        });
        let theirs = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("capsaga-store-writer".into())
            .spawn(move || run(&theirs))
            .map_err(|e| StoreError::Backend(format!("cannot start the store's writer: {e}")))?;
        Ok(Writer {
            shared,
            thread: Some(thread),
        })
    }

    /// Write transactions committed so far (one sync each).
    pub(super) fn commits(&self) -> u64 {
        self.shared.commits.load(Ordering::Relaxed)
    }

    /// Writes sent to the writer thread and not yet taken into a batch.
    pub(super) fn queued(&self) -> u64 {
        self.shared.queued.load(Ordering::SeqCst)
    }

    /// Block until no batch holds the write connection (the writer thread
    /// answers a batch's callers before its checkpoint attempt, so a caller
    /// that saw its write return may still find the connection held).
    #[cfg(test)]
    pub(super) fn wait_idle(&self) {
        drop(self.shared.owned.lock());
    }

    /// Run `f` in a write transaction (shared with other callers' when
    /// group commit is on) and return its value once the transaction is
    /// durable: on this thread when the connection is free (see the module
    /// documentation), else through the writer thread.
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
        let job = match self.lead(job) {
            Ok(()) => return rx.await.map_err(|_| StoreError::Poisoned)?,
            Err(job) => job,
        };
        {
            let mut q = self.shared.queue();
            if q.closed {
                return Err(StoreError::Poisoned);
            }
            self.shared.queued.fetch_add(1, Ordering::SeqCst);
            q.msgs.push_back(Msg::Write(job));
        }
        self.shared.ready.notify_one();
        rx.await.map_err(|_| StoreError::Poisoned)?
    }

    /// Run `job`, and the jobs queued behind it, in a batch on this thread
    /// if the connection is free and this thread may block; `job` back
    /// otherwise.
    fn lead(&self, job: Job) -> Result<(), Job> {
        let shared = &*self.shared;
        if !may_lead() {
            return Err(job);
        }
        let Ok(mut o) = shared.owned.try_lock() else {
            return Err(job);
        };
        if o.mode != GroupCommit::On {
            return Err(job);
        }
        tokio::task::block_in_place(move || run_queued(shared, &mut o, vec![job]));
        Ok(())
    }

    /// A `TRUNCATE` checkpoint on the write connection, between batches.
    ///
    /// # Errors
    /// [`StoreError::Poisoned`] when the writer is gone.
    pub(super) fn checkpoint(&self) -> Result<checkpoint::Checkpoint, StoreError> {
        let (tx, rx) = mpsc::channel();
        {
            let mut q = self.shared.queue();
            if q.closed {
                return Err(StoreError::Poisoned);
            }
            q.msgs.push_back(Msg::Checkpoint(tx));
        }
        self.shared.ready.notify_one();
        rx.recv().map_err(|_| StoreError::Poisoned)
    }
}

impl Drop for Writer {
    /// Let the writer finish the jobs queued, checkpoint and close.
    fn drop(&mut self) {
        self.shared.queue().closed = true;
        self.shared.ready.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The writer thread: wait for a message, then take the connection and run
/// what is queued (a caller running a batch may have taken it already).
fn run(shared: &Shared) {
    loop {
        {
            let mut q = shared.queue();
            while q.msgs.is_empty() && !q.closed {
                q = shared
                    .ready
                    .wait(q)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
            if q.msgs.is_empty() {
                break;
            }
        }
        let Ok(mut o) = shared.owned.lock() else {
            // A batch panicked with the connection: nothing more can be
            // written; every caller waiting gets `Poisoned`.
            shared.queue().closed = true;
            let _ = std::mem::take(&mut shared.queue().msgs);
            return;
        };
        run_queued(shared, &mut o, Vec::new());
    }
    if let Ok(o) = shared.owned.lock() {
        let _ = checkpoint::truncate_nowait(&o.conn, &o.path, o.busy_wait);
    }
}

/// With the connection held: `jobs` and what is queued behind them (up to
/// a batch), then the checkpoints asked for on the way. Run by the writer
/// thread and by a caller that found the connection free.
fn run_queued(shared: &Shared, o: &mut Owned, mut jobs: Vec<Job>) {
    let mut checkpoints = Vec::new();
    shared.take(o.mode.max_batch(), &mut jobs, &mut checkpoints);
    run_batches(o, jobs, &shared.commits);
    for reply in checkpoints {
        let _ = reply.send(checkpoint::truncate_nowait(&o.conn, &o.path, o.busy_wait));
    }
}

/// `jobs` in transactions of at most the mode's batch size (group commit
/// off: one each), each followed by a checkpoint when the `-wal` file grew
/// past the threshold.
fn run_batches(o: &mut Owned, mut jobs: Vec<Job>, commits: &AtomicU64) {
    while !jobs.is_empty() {
        let now: Vec<Job> = jobs.drain(..jobs.len().min(o.mode.max_batch())).collect();
        batch(o, now, commits);
        o.next_checkpoint_at =
            checkpoint::after_commit(&o.conn, &o.path, o.busy_wait, o.next_checkpoint_at);
    }
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

/// One transaction for `jobs`, one savepoint each (none for a batch of one), one commit. A commit
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
    if let [_] = jobs.as_slice() {
        // A batch of one needs no savepoint (SQLite copies every page a
        // savepoint changes into a sub-journal): a failed job rolls the
        // whole transaction back.
        let ran = jobs.into_iter().map(|j| j.run(&tx)).next();
        let Some(ran) = ran else { return };
        if !ran.ok {
            drop(tx);
            drop(held);
            answer_failed(vec![ran.answer]);
            return;
        }
        let committed = tx.commit().map_err(|e| super::classify(&o.path, e));
        drop(held);
        match committed {
            Ok(()) => {
                commits.fetch_add(1, Ordering::Relaxed);
                (ran.answer)(Ok(()));
            }
            Err(e) => (ran.answer)(Err(e)),
        }
        return;
    }
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
