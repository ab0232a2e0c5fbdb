//! stdout: the one writer of the server's answers, written in the order they are sent.
//!
//! When nothing is queued ahead of it and the descriptor is known, a short answer is held
//! and the lines held together (at most [`DIRECT_WRITE_MAX_BYTES`], which a pipe with
//! room takes whole without blocking) are written in one `write` by a flush task on the
//! sender's runtime, woken by the first of them: it runs once the tasks ready before it
//! have run, so the answers of one group commit, handed out in one turn of the runtime,
//! go out together. The flush writes at once when [`poll`] says the pipe has room;
//! otherwise, and for longer lines or without a runtime, lines are queued for the
//! `stdout` thread, which writes the queue, the lines queued behind each other joined
//! into one `write` (at most [`MAX_WRITE_BATCH_BYTES`]). A lone caller's answer thus costs
//! one `poll` and one `write` on the runtime's thread, no wake-up of another; a client
//! that stops reading fills the pipe and blocks only the `stdout` thread, never the
//! runtime.
//!
//! Owns: [`LineSink`], its flush task and the `stdout` thread. Must not: reorder lines
//! (lines are held only while the queue is empty and the thread is not writing, and go
//! to the queue ahead of any later line, all under the same lock), write part of a line
//! and then another, lose a held line when the sink is dropped, or block the caller on a
//! full pipe.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::os::fd::RawFd;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use tokio::sync::{Notify, oneshot};

/// Longest line written directly by the sender: `PIPE_BUF` on Linux, what a pipe that
/// polls writable takes in one `write` without blocking (and atomically).
pub(crate) const DIRECT_WRITE_MAX_BYTES: usize = 4096;

/// Most bytes of queued lines joined into one `write`: a burst of answers goes out in
/// few system calls without copying an unbounded backlog.
const MAX_WRITE_BATCH_BYTES: usize = 256 * 1024;

/// The queue between senders and the `stdout` thread.
#[derive(Default)]
struct Queue {
    lines: VecDeque<Vec<u8>>,
    /// The thread is writing lines it took off the queue.
    writing: bool,
    /// The sink was dropped: the thread writes what is queued and ends.
    closed: bool,
    /// Writing failed (logged once): the client is gone, later sends fail.
    failed: bool,
    /// Short lines joined for the flush task's one `write` (at most
    /// [`DIRECT_WRITE_MAX_BYTES`]); only while `lines` is empty and nothing is being
    /// written, so they come before anything queued later.
    held: Vec<u8>,
}

impl Queue {
    /// Queues the held lines ahead of anything sent after them.
    fn queue_held(&mut self) {
        if !self.held.is_empty() {
            let held = std::mem::take(&mut self.held);
            self.lines.push_back(held);
        }
    }
}

struct Shared {
    queue: Mutex<Queue>,
    /// Raised when a line is queued or the sink is dropped.
    queued: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }
}

/// The output's descriptor and handle, for writes on the runtime's thread.
struct Direct<W> {
    fd: RawFd,
    write: Arc<Mutex<W>>,
}

impl<W: Write> Direct<W> {
    /// Writes `bytes` (at most [`DIRECT_WRITE_MAX_BYTES`]) now if the pipe has room and
    /// nothing is queued or being written; `None`: it was not written. Called under the
    /// queue's lock, so the thread cannot start writing meanwhile.
    fn write_now(&self, queue: &mut Queue, bytes: &[u8]) -> Option<io::Result<()>> {
        if !queue.lines.is_empty() || queue.writing || !poll_writable(self.fd) {
            return None;
        }
        let mut write = self
            .write
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let written = write.write_all(bytes).and_then(|()| write.flush());
        if let Err(error) = &written {
            tracing::error!("writing stdout failed: {error}");
            queue.failed = true;
        }
        Some(written)
    }
}

/// The sending side; dropping it lets the thread end once the queue is written.
pub(crate) struct LineSink<W: Write + Send + 'static> {
    shared: Arc<Shared>,
    /// The sink's own handle on the output, for direct writes (`None`: queue only).
    direct: Option<Arc<Direct<W>>>,
    /// Wakes the flush task of held lines (`None`: no runtime; lines are written
    /// directly one by one, or queued).
    flush: Option<Arc<Notify>>,
}

impl<W: Write + Send + 'static> LineSink<W> {
    /// Starts the `stdout` thread over `write`. With `direct_fd` (the descriptor `write`
    /// writes to), short lines may be written on the sender's runtime (held for a flush
    /// task on it when there is one). The receiver resolves when the thread has ended
    /// (its queue written, or writing failed).
    pub(crate) fn spawn(
        write: W,
        direct_fd: Option<RawFd>,
    ) -> io::Result<(LineSink<W>, oneshot::Receiver<()>)> {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue::default()),
            queued: Condvar::new(),
        });
        let write = Arc::new(Mutex::new(write));
        let (ended, writer_ended) = oneshot::channel();
        let thread_shared = shared.clone();
        let thread_write = write.clone();
        std::thread::Builder::new()
            .name("stdout".to_string())
            .spawn(move || write_queued(&thread_shared, &thread_write, ended))?;
        let direct = direct_fd.map(|fd| Arc::new(Direct { fd, write }));
        let flush = match (&direct, tokio::runtime::Handle::try_current()) {
            (Some(direct), Ok(runtime)) => {
                let notify = Arc::new(Notify::new());
                runtime.spawn(flush_held(shared.clone(), direct.clone(), notify.clone()));
                Some(notify)
            }
            _ => None,
        };
        Ok((
            LineSink {
                shared,
                direct,
                flush,
            },
            writer_ended,
        ))
    }

    /// Writes `line` (newline included) now if it can without waiting, else queues it.
    pub(crate) fn send(&self, line: Vec<u8>) -> io::Result<()> {
        let mut queue = self.shared.lock();
        if queue.failed {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "transport is closed",
            ));
        }
        let idle = queue.lines.is_empty() && !queue.writing;
        match (&self.direct, &self.flush) {
            (Some(direct), Some(flush)) if idle && line.len() <= DIRECT_WRITE_MAX_BYTES => {
                if queue.held.len() + line.len() > DIRECT_WRITE_MAX_BYTES {
                    // No room beside the held lines: they go out first, now if they can.
                    let mut held = std::mem::take(&mut queue.held);
                    match direct.write_now(&mut queue, &held) {
                        Some(Err(error)) => return Err(error),
                        Some(Ok(())) => {
                            held.clear();
                            queue.held = held;
                        }
                        None => queue.lines.push_back(held),
                    }
                }
                if queue.lines.is_empty() {
                    let first = queue.held.is_empty();
                    queue.held.extend_from_slice(&line);
                    drop(queue);
                    if first {
                        flush.notify_one();
                    }
                    return Ok(());
                }
            }
            (Some(direct), None) if line.len() <= DIRECT_WRITE_MAX_BYTES => {
                if let Some(written) = direct.write_now(&mut queue, &line) {
                    return written;
                }
            }
            _ => {}
        }
        queue.queue_held();
        queue.lines.push_back(line);
        drop(queue);
        self.shared.queued.notify_one();
        Ok(())
    }
}

impl<W: Write + Send + 'static> Drop for LineSink<W> {
    fn drop(&mut self) {
        {
            let mut queue = self.shared.lock();
            queue.queue_held();
            queue.closed = true;
        }
        self.shared.queued.notify_one();
        if let Some(flush) = &self.flush {
            flush.notify_one();
        }
    }
}

/// The flush task: each time lines are held, once the tasks ready before it have run,
/// writes them in one `write` if the pipe has room, else queues them for the thread.
/// Ends when the sink is dropped.
async fn flush_held<W: Write>(shared: Arc<Shared>, direct: Arc<Direct<W>>, notify: Arc<Notify>) {
    let mut spare = Vec::new();
    loop {
        notify.notified().await;
        let mut queue = shared.lock();
        if queue.closed {
            return; // the drop queued what was held
        }
        if queue.held.is_empty() {
            continue;
        }
        let held = std::mem::replace(&mut queue.held, std::mem::take(&mut spare));
        match direct.write_now(&mut queue, &held) {
            Some(_) => {
                spare = held;
                spare.clear();
            }
            None => {
                queue.lines.push_back(held);
                drop(queue);
                shared.queued.notify_one();
            }
        }
    }
}

/// Whether a `write` to `fd` would not block now (`poll` with no wait).
fn poll_writable(fd: RawFd) -> bool {
    let mut poll = libc::pollfd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one valid pollfd, and a zero timeout.
    let ready = unsafe { libc::poll(&mut poll, 1, 0) };
    ready == 1 && poll.revents & libc::POLLOUT != 0 && poll.revents & libc::POLLERR == 0
}

/// The `stdout` thread: writes each batch of queued lines, joined into one `write`, until
/// the sink is dropped and the queue is empty, or writing fails; then drops `ended`.
fn write_queued<W: Write>(shared: &Shared, write: &Mutex<W>, ended: oneshot::Sender<()>) {
    let mut batch = Vec::new();
    let mut queue = shared.lock();
    loop {
        while queue.lines.is_empty() && !queue.closed {
            queue = shared
                .queued
                .wait(queue)
                .unwrap_or_else(|poison| poison.into_inner());
        }
        let Some(first) = queue.lines.pop_front() else {
            break; // closed, and everything written
        };
        batch.clear();
        batch.extend_from_slice(&first);
        while let Some(line) = queue.lines.front()
            && batch.len() + line.len() <= MAX_WRITE_BATCH_BYTES
        {
            batch.extend_from_slice(line);
            queue.lines.pop_front();
        }
        queue.writing = true;
        drop(queue);
        let result = {
            let mut write = write.lock().unwrap_or_else(|poison| poison.into_inner());
            write.write_all(&batch).and_then(|()| write.flush())
        };
        if batch.capacity() > MAX_WRITE_BATCH_BYTES {
            batch = Vec::new();
        }
        queue = shared.lock();
        queue.writing = false;
        if let Err(error) = result {
            tracing::error!("writing stdout failed: {error}");
            queue.failed = true;
            queue.lines.clear();
            break;
        }
    }
    drop(queue);
    drop(ended);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::fd::AsRawFd;

    /// A pipe: what the sink writes, read back at the other end.
    fn pipe() -> (std::fs::File, std::fs::File) {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors pipe(2) returns.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        use std::os::fd::FromRawFd;
        // SAFETY: both descriptors were just opened and are owned by these files only.
        unsafe {
            (
                std::fs::File::from_raw_fd(fds[0]),
                std::fs::File::from_raw_fd(fds[1]),
            )
        }
    }

    #[tokio::test]
    async fn lines_arrive_whole_and_in_order_whether_written_directly_or_queued() {
        let (mut read, write) = pipe();
        let fd = write.as_raw_fd();
        let (sink, ended) = LineSink::spawn(write, Some(fd)).unwrap();
        let reader = std::thread::spawn(move || {
            let mut all = String::new();
            read.read_to_string(&mut all).unwrap();
            all
        });
        let mut expected = String::new();
        for i in 0..3000 {
            // Short lines (direct while the pipe has room) and long ones (always queued).
            let line = if i % 7 == 0 {
                format!("{i}:{}\n", "x".repeat(DIRECT_WRITE_MAX_BYTES + i))
            } else {
                format!("{i}\n")
            };
            expected.push_str(&line);
            sink.send(line.into_bytes()).unwrap();
            if i % 5 == 0 {
                // The flush task writes what is held.
                tokio::task::yield_now().await;
            }
        }
        drop(sink);
        ended.await.ok();
        assert!(
            reader.join().unwrap() == expected,
            "lines lost or reordered"
        );
    }

    /// A pipe's writing end that counts its `write` calls.
    struct CountedWrites {
        file: std::fs::File,
        writes: Arc<std::sync::atomic::AtomicUsize>,
    }

    impl Write for CountedWrites {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.writes
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            self.file.write(bytes)
        }

        fn flush(&mut self) -> io::Result<()> {
            self.file.flush()
        }
    }

    #[tokio::test]
    async fn lines_sent_in_one_turn_of_the_runtime_go_out_in_one_write() {
        let (mut read, write) = pipe();
        let fd = write.as_raw_fd();
        let writes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = CountedWrites {
            file: write,
            writes: writes.clone(),
        };
        let (sink, ended) = LineSink::spawn(counted, Some(fd)).unwrap();
        let line = format!("{}\n", "z".repeat(300));
        for _ in 0..9 {
            sink.send(line.clone().into_bytes()).unwrap();
        }
        let mut got = vec![0; 9 * line.len()];
        let reader = std::thread::spawn(move || {
            read.read_exact(&mut got).unwrap();
            (got, read)
        });
        // The flush task runs once this task waits.
        let (got, read) = tokio::task::spawn_blocking(move || reader.join().unwrap())
            .await
            .unwrap();
        assert_eq!(got, line.repeat(9).into_bytes());
        assert_eq!(writes.load(std::sync::atomic::Ordering::SeqCst), 1);
        drop(sink);
        ended.await.ok();
        drop(read);
    }

    #[tokio::test]
    async fn a_full_pipe_queues_instead_of_blocking_the_sender() {
        let (mut read, write) = pipe();
        let fd = write.as_raw_fd();
        let (sink, ended) = LineSink::spawn(write, Some(fd)).unwrap();
        // Nobody reads: far more than a pipe holds must still be accepted at once.
        let line = format!("{}\n", "y".repeat(1000));
        for _ in 0..1000 {
            sink.send(line.clone().into_bytes()).unwrap();
        }
        let reader = std::thread::spawn(move || {
            let mut all = Vec::new();
            read.read_to_end(&mut all).unwrap();
            all.len()
        });
        drop(sink);
        ended.await.ok();
        assert_eq!(reader.join().unwrap(), 1000 * line.len());
    }

    #[tokio::test]
    async fn a_closed_reader_fails_later_sends() {
        let (read, write) = pipe();
        let fd = write.as_raw_fd();
        let (sink, _ended) = LineSink::spawn(write, Some(fd)).unwrap();
        drop(read);
        // The first send may be written directly (EPIPE) or queued (the thread fails):
        // either way the sink is failed soon after.
        let _ = sink.send(b"a\n".to_vec());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while sink.send(b"b\n".to_vec()).is_ok() {
            assert!(std::time::Instant::now() < deadline, "sends never failed");
            std::thread::yield_now();
        }
    }
}
