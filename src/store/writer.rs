//! The writer thread: group commit for every append of the process.
//!
//! Tools submit jobs (closures over an [`AppendTxn`]); the thread takes the job waiting
//! longest plus every job queued behind it (up to [`MAX_JOBS_PER_COMMIT`]), runs them in
//! order inside one write transaction of the backend ([`WriteView`]), commits once
//! (durably), and only then hands each job's result back. Concurrent callers thus share
//! one fsync. If the commit fails, every job in the group gets the error: nothing is
//! acknowledged that is not durable. A job runs on this thread, never on an async worker.
//! After a group of one job the thread looks for the next job a moment without sleeping
//! ([`SPIN_AFTER_LONE_JOB`]): a lone caller's next call is that close.
//!
//! Owns: the thread, [`AppendTxn`] (what a job may do: read heads, append, import, each
//! through [`rules::plan_append`]) and telling watches about each commit. Must not: hand
//! out a result before the commit returned, or keep a half-applied job in a transaction
//! that commits. Backend-neutral: it sees a [`Backend`], never a table.

use super::chain;
use super::contract::{Backend, CommitSignal, WriteView};
use super::damage::Damage;
use super::rules::{self, Appended, Batch, Plan};
use super::{AppendError, SessionHead, StoreError};
use crate::event::{Event, EventId, Families, NewEvent, SessionId, now_ms};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Told each group commit's duration, when set (by `serve --http`, for `/metrics`); unset,
/// nothing is timed.
pub(crate) static COMMIT_OBSERVER: OnceLock<fn(Duration)> = OnceLock::new();

/// Most jobs one transaction takes; bounds the latency a long queue adds to its first job.
pub(crate) const MAX_JOBS_PER_COMMIT: usize = 128;

/// How long the writer keeps looking for the next job, without sleeping, after a group of
/// one job: a lone caller's next call comes back within about this much (its answer
/// written, the next request read), and a thread put to sleep costs that caller the wake
/// of an idle CPU (tens of µs in a VM: one caller's p50 falls 15 % with this spin). After a
/// bigger group jobs are already queued or others need the CPU, so nothing spins.
pub(crate) const SPIN_AFTER_LONE_JOB: Duration = Duration::from_micros(150);

/// How long the writer waits without a job after a commit before it calls
/// [`Backend::idle`] (redb: the checkpoint that lets its redo log start again).
pub(crate) const IDLE_AFTER: Duration = Duration::from_secs(1);

type Completion = Box<dyn FnOnce(Result<(), StoreError>) + Send>;
/// A job runs with the group's transaction, or with `None` when none could be begun (its
/// completion then carries that error).
type Job = Box<dyn FnOnce(Option<&mut AppendTxn<'_>>) -> Completion + Send>;

/// Sends jobs to the writer thread. The thread ends when the last handle is dropped.
#[derive(Clone)]
pub(crate) struct WriterHandle {
    jobs: mpsc::Sender<Job>,
    /// Where the answers of jobs queued from one runtime's thread go, once set.
    delivery: Arc<OnceLock<Delivery>>,
}

/// A job's answer, handed back to the task that waits for it.
type Answer = Box<dyn FnOnce() + Send>;

/// Hands the answers of the jobs queued from one thread (a single-threaded runtime's: a
/// stdio server's) to a task on that runtime, which gives each to its caller there. The
/// writer thus wakes that runtime once for a whole group (a task already woken is not
/// woken again), not once per answer: every wake from another thread is a system call
/// and a thread switch. Jobs queued from any other thread are answered directly.
#[derive(Clone)]
struct Delivery {
    answers: tokio::sync::mpsc::UnboundedSender<Answer>,
    /// The thread whose jobs' answers go this way.
    thread: std::thread::ThreadId,
}

impl Delivery {
    /// Gives `answer` to the delivering task, or now when that task has ended (its
    /// runtime shut down).
    fn deliver(&self, answer: Answer) {
        if let Err(tokio::sync::mpsc::error::SendError(answer)) = self.answers.send(answer) {
            answer();
        }
    }
}

/// The writer thread as its owner sees it: joined, within a bound, when the ledger closes.
pub(crate) struct WriterThread {
    thread: Option<std::thread::JoinHandle<()>>,
    /// Disconnected when the thread has ended (and so let go of the backend).
    ended: mpsc::Receiver<()>,
}

impl WriterThread {
    /// Waits up to `limit` for the thread to end (it ends once every [`WriterHandle`] is
    /// dropped and its queue is drained), then joins it. Returns whether it ended.
    pub(crate) fn join_within(&mut self, limit: std::time::Duration) -> bool {
        match self.ended.recv_timeout(limit) {
            Err(mpsc::RecvTimeoutError::Timeout) => false,
            Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                if let Some(thread) = self.thread.take() {
                    let _ = thread.join();
                }
                true
            }
        }
    }
}

impl WriterHandle {
    /// Starts the writer thread over `backend`, whose write transactions decode with
    /// `families`. After each commit that wrote something it raises `commits` with the
    /// ledger's last position (what a watch waits on).
    pub(crate) fn spawn(
        backend: Arc<dyn Backend>,
        commits: CommitSignal,
        damage: Damage,
        families: Families,
    ) -> (Self, WriterThread) {
        let (jobs, queue) = mpsc::channel::<Job>();
        let delivery = Arc::new(OnceLock::new());
        let (ended_tx, ended) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("ledger-writer".into())
            .spawn(move || {
                run(backend, &commits, &damage, &families, queue);
                // `backend` was moved into `run` and is dropped by now.
                drop(ended_tx);
            })
            .expect("spawning the ledger writer thread");
        (
            WriterHandle { jobs, delivery },
            WriterThread {
                thread: Some(thread),
                ended,
            },
        )
    }

    /// From now on, the answers of jobs queued from this thread, which must be the one
    /// thread of the runtime this runs in (a stdio server's, for as long as it serves), go
    /// through one task on it ([`Delivery`]). Only the first call counts.
    pub(crate) fn deliver_on_this_thread(&self) {
        self.delivery.get_or_init(|| {
            let (answers, mut queue) = tokio::sync::mpsc::unbounded_channel::<Answer>();
            tokio::spawn(async move {
                while let Some(answer) = queue.recv().await {
                    answer();
                }
            });
            Delivery {
                answers,
                thread: std::thread::current().id(),
            }
        });
    }

    pub(crate) fn enqueue<R, F>(
        &self,
        job: F,
    ) -> Result<tokio::sync::oneshot::Receiver<Result<R, StoreError>>, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&mut AppendTxn<'_>) -> R + Send + 'static,
    {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let delivery = self
            .delivery
            .get()
            .filter(|delivery| delivery.thread == std::thread::current().id())
            .cloned();
        let reply = move |value: Result<R, StoreError>| match &delivery {
            Some(delivery) => delivery.deliver(Box::new(move || {
                let _ = reply.send(value);
            })),
            None => {
                let _ = reply.send(value);
            }
        };
        let job: Job = Box::new(move |txn: Option<&mut AppendTxn<'_>>| {
            let Some(txn) = txn else {
                return Box::new(move |committed: Result<(), StoreError>| {
                    reply(committed.and(Err(StoreError::WriterGone)));
                }) as Completion;
            };
            let writes_before = txn.writes();
            let outcome = catch_unwind(AssertUnwindSafe(|| job(txn)));
            let outcome = match outcome {
                Ok(value) => Ok(value),
                Err(panic) => {
                    let message = panic_message(&panic);
                    tracing::error!(%message, "a job panicked inside the write transaction");
                    if txn.writes() != writes_before {
                        // It may have left part of its events: the whole group must abort.
                        txn.poisoned = Some(StoreError::JobPanicked(message.clone()));
                    }
                    Err(StoreError::JobPanicked(message))
                }
            };
            Box::new(move |committed: Result<(), StoreError>| {
                reply(committed.and(outcome));
            })
        });
        self.jobs.send(job).map_err(|_| StoreError::WriterGone)?;
        Ok(answer)
    }

    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) async fn submit<R, F>(&self, job: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&mut AppendTxn<'_>) -> R + Send + 'static,
    {
        self.enqueue(job)?
            .await
            .map_err(|_| StoreError::WriterGone)?
    }

    pub(crate) fn submit_blocking<R, F>(&self, job: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&mut AppendTxn<'_>) -> R + Send + 'static,
    {
        self.enqueue(job)?
            .blocking_recv()
            .map_err(|_| StoreError::WriterGone)?
    }
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        text.to_string()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "panic".to_string()
    }
}

fn run(
    backend: Arc<dyn Backend>,
    commits: &CommitSignal,
    damage: &Damage,
    families: &Families,
    queue: mpsc::Receiver<Job>,
) {
    // Whether a group ran since the backend was last told it is idle.
    let mut worked = false;
    // Whether the last group was one job (a lone caller, whose next call comes soon).
    let mut lone = false;
    loop {
        let spun = if std::mem::take(&mut lone) {
            spin_for_job(&queue)
        } else {
            None
        };
        let first = if let Some(job) = spun {
            job
        } else if worked {
            match queue.recv_timeout(IDLE_AFTER) {
                Ok(job) => job,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    worked = false;
                    idle(&*backend, damage);
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        } else {
            match queue.recv() {
                Ok(job) => job,
                Err(_) => break,
            }
        };
        worked = true;
        let mut group = vec![first];
        while group.len() < MAX_JOBS_PER_COMMIT {
            match queue.try_recv() {
                Ok(job) => group.push(job),
                Err(_) => break,
            }
        }
        lone = group.len() == 1;
        // A panic outside any job (in redb, or after the commit) must not stop every later
        // write: the group's callers get `WriterGone` (their replies are dropped), the
        // uncommitted transaction is aborted by its drop, and the thread goes on.
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| {
            commit_group(&*backend, commits, damage, families, group)
        })) {
            tracing::error!(message = %panic_message(&panic), "the writer panicked outside a job");
        }
    }
    // The ledger is closing: nothing is queued any more.
    idle(&*backend, damage);
}

/// The next job if one is queued within [`SPIN_AFTER_LONE_JOB`], looked for without
/// sleeping.
fn spin_for_job(queue: &mpsc::Receiver<Job>) -> Option<Job> {
    let until = Instant::now() + SPIN_AFTER_LONE_JOB;
    loop {
        match queue.try_recv() {
            Ok(job) => return Some(job),
            Err(mpsc::TryRecvError::Disconnected) => return None,
            Err(mpsc::TryRecvError::Empty) if Instant::now() >= until => return None,
            Err(mpsc::TryRecvError::Empty) => std::hint::spin_loop(),
        }
    }
}

/// Tells the backend the writer is idle; a panic there is logged, never fatal. Not once
/// the ledger is known to be damaged: its upkeep (a checkpoint) writes to the file.
fn idle(backend: &dyn Backend, damage: &Damage) {
    if damage.stops_every_write().is_some() {
        return;
    }
    if let Err(panic) = catch_unwind(AssertUnwindSafe(|| backend.idle())) {
        tracing::error!(message = %panic_message(&panic), "the backend panicked while idle");
    }
}

fn commit_group(
    backend: &dyn Backend,
    commits: &CommitSignal,
    damage: &Damage,
    families: &Families,
    group: Vec<Job>,
) {
    let started = COMMIT_OBSERVER
        .get()
        .map(|observe| (observe, Instant::now()));
    // Nothing is written to a ledger known to be damaged (not even a job's upkeep), by
    // this process or, as its lasting verdicts say, by any other.
    damage.refresh();
    let began = damage
        .check_write(None)
        .and_then(|()| backend.write(families));
    let mut txn = match began {
        Ok(txn) => txn,
        Err(error) => {
            // A ledger opened read-only refuses by design: its callers are told, no more.
            if matches!(error, StoreError::ReadOnly { .. }) {
                tracing::debug!(%error, "a write to a ledger opened read-only");
            } else {
                tracing::error!(%error, "cannot begin a write transaction");
            }
            for job in group {
                job(None)(Err(error.clone()));
            }
            return;
        }
    };
    let mut append = AppendTxn {
        txn: &mut *txn,
        damage,
        chained: Vec::new(),
        appended: 0,
        raw: 0,
        poisoned: None,
    };
    let mut completions = Vec::with_capacity(group.len());
    for job in group {
        completions.push(job(Some(&mut append)));
    }
    let poisoned = append.poisoned.take();
    let appended = append.appended;
    let mut committed_position = None;
    let result = match poisoned {
        Some(error) => {
            let _ = txn.abort();
            Err(error)
        }
        None if appended == 0 && !txn.has_changes() => txn.abort(),
        None => {
            committed_position = txn.last_position().ok();
            txn.commit()
        }
    };
    crate::fault::hit(crate::fault::FaultPoint::AfterCommit);
    match &result {
        Err(error) => {
            tracing::error!(%error, "group commit failed; every call in the group gets the error")
        }
        Ok(()) => {
            if let Some(position) = committed_position {
                commits.committed(position);
            }
            if let Some((observe, started)) = started {
                observe(started.elapsed());
            }
        }
    }
    for completion in completions {
        completion(result.clone());
    }
}

/// The write transaction as a job sees it: read heads, append events.
pub struct AppendTxn<'a> {
    txn: &'a mut dyn WriteView,
    /// Refuses an append to a session (or a ledger) known to be damaged.
    damage: &'a Damage,
    /// The sessions whose stored end this transaction checked or wrote: a later job of
    /// the group chains onto what it has seen.
    chained: Vec<SessionId>,
    /// Events appended in this transaction so far (by every job of the group).
    appended: usize,
    /// Times the backend's transaction was handed out for a raw write ([`Self::backend`]).
    raw: usize,
    /// Set when a storage error or a panic may have left part of a job's writes behind.
    poisoned: Option<StoreError>,
}

impl AppendTxn<'_> {
    /// The session's head as of this transaction (including earlier jobs of the group).
    pub(crate) fn head(&self, session: SessionId) -> Result<Option<SessionHead>, StoreError> {
        self.txn.head(session)
    }

    /// Finds a session by id or alias, as [`super::Ledger::resolve`] does.
    pub(crate) fn resolve(&self, text: &str) -> Result<Option<SessionId>, StoreError> {
        super::resolve_in(&*self.txn, text)
    }

    /// The stored events with these ids, in order (`None` where none is stored).
    pub(crate) fn events_by_id(&self, ids: &[EventId]) -> Result<Vec<Option<Event>>, StoreError> {
        self.txn.events_by_id(ids)
    }

    /// Appends `events` to `session` after seq `expected_seq` (0 for a new session).
    ///
    /// All or nothing; refused with [`AppendError::Conflict`] if the head is elsewhere.
    /// Idempotent by event id: a batch whose ids are all stored with the same payloads is
    /// acknowledged again with the stored events; an id stored with another payload is
    /// refused. The rules are [`rules::plan_append`].
    pub fn append(
        &mut self,
        session: SessionId,
        expected_seq: u64,
        events: Vec<NewEvent>,
    ) -> Result<Appended, AppendError> {
        self.run(Batch::New {
            session,
            expected_seq,
            at: now_ms(),
            events,
        })
    }

    /// Appends events exactly as exported (ids, times and hashes kept), after checking
    /// that each one continues the stored chain. Idempotent like [`AppendTxn::append`].
    pub(crate) fn import(&mut self, events: Vec<Event>) -> Result<Option<Appended>, AppendError> {
        if events.is_empty() {
            return Ok(None);
        }
        self.run(Batch::Import { events }).map(Some)
    }

    /// Reads what the rules need, plans, and writes the plan.
    fn run(&mut self, batch: Batch) -> Result<Appended, AppendError> {
        let session = batch.session().ok_or(AppendError::EmptyBatch)?;
        let (head, stored) = rules::lookups(&*self.txn, session, &batch)?;
        // After the first read: a database's transaction reads the verdicts with it.
        self.damage.check_write(Some(session))?;
        if !self.chained.contains(&session) {
            if let Err(finding) = chain::check_end(&*self.txn, session, head.as_ref())? {
                let detail = finding.to_string();
                self.damage.found_in(session, detail.clone());
                return Err(StoreError::Damaged {
                    ledger: self.damage.label().to_string(),
                    detail,
                }
                .into());
            }
            self.chained.push(session);
        }
        match rules::plan_append(head.as_ref(), &stored, batch)? {
            Plan::Again(appended) => Ok(appended),
            Plan::Write(plan) => {
                // Counted before writing: a failure half-way must poison the group.
                self.appended += plan.events.len();
                match self.txn.append(&plan) {
                    Ok(position) => {
                        let mut head = plan.head;
                        head.position = position;
                        Ok(Appended {
                            events: plan.events,
                            head,
                        })
                    }
                    Err(error) => {
                        self.poisoned = Some(error.clone());
                        Err(error.into())
                    }
                }
            }
        }
    }

    /// The backend's write transaction itself, for the store's own upkeep (rebuilding
    /// summaries) and for tests that inject damage through the contract.
    /// What is written this way is committed with the group ([`WriteView::has_changes`]).
    pub(crate) fn backend(&mut self) -> &mut dyn WriteView {
        self.raw += 1;
        &mut *self.txn
    }

    /// Makes the whole group abort with `error` (a job that cannot finish what it wrote:
    /// the ledger host's write of another process that went away half done).
    pub(crate) fn poison(&mut self, error: StoreError) {
        self.poisoned = Some(error);
    }

    /// Changes whenever this transaction may have been written to: a job that panics
    /// after that poisons its group.
    fn writes(&self) -> usize {
        self.appended + self.raw
    }
}
