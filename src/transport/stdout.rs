//! stdout: the one writer of the server's answers, written in the order they are sent.
//!
//! An answer is written at once by the task that sends it when nothing is queued ahead of
//! it, the pipe has room for it ([`poll`] says writable and the line is at most
//! [`DIRECT_WRITE_MAX_BYTES`], which a pipe with room takes whole without blocking), and
//! the descriptor is known; otherwise it is queued for the `stdout` thread, which writes
//! the queue, the lines queued behind each other joined into one `write` (at most
//! [`MAX_WRITE_BATCH_BYTES`]). A lone caller's answer thus costs one `poll` and one `write`
//! on the runtime's thread, no wake-up of another; a client that stops reading fills the
//! pipe and blocks only the `stdout` thread, never the runtime.
//!
//! Owns: [`LineSink`] and the `stdout` thread. Must not: reorder lines (a line is written
//! directly only while the queue is empty and the thread is not writing, under the same
//! lock), write part of a line and then another, or block the caller on a full pipe.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::os::fd::RawFd;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use tokio::sync::oneshot;

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

/// The sending side; dropping it lets the thread end once the queue is written.
pub(crate) struct LineSink<W: Write + Send + 'static> {
    shared: Arc<Shared>,
    /// The sink's own handle on the output, for direct writes (`None`: queue only).
    direct: Option<(RawFd, Arc<Mutex<W>>)>,
}

impl<W: Write + Send + 'static> LineSink<W> {
    /// Starts the `stdout` thread over `write`. With `direct_fd` (the descriptor `write`
    /// writes to), short lines may be written by the sender itself. The receiver resolves
    /// when the thread has ended (its queue written, or writing failed).
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
        Ok((
            LineSink {
                shared,
                direct: direct_fd.map(|fd| (fd, write)),
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
        if let Some((fd, write)) = &self.direct
            && queue.lines.is_empty()
            && !queue.writing
            && line.len() <= DIRECT_WRITE_MAX_BYTES
            && poll_writable(*fd)
        {
            // Under the queue's lock: the thread cannot start writing meanwhile.
            let mut write = write.lock().unwrap_or_else(|poison| poison.into_inner());
            let written = write.write_all(&line).and_then(|()| write.flush());
            if let Err(error) = &written {
                tracing::error!("writing stdout failed: {error}");
                queue.failed = true;
            }
            return written;
        }
        queue.lines.push_back(line);
        drop(queue);
        self.shared.queued.notify_one();
        Ok(())
    }
}

impl<W: Write + Send + 'static> Drop for LineSink<W> {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.queued.notify_one();
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
        }
        drop(sink);
        ended.await.ok();
        assert!(
            reader.join().unwrap() == expected,
            "lines lost or reordered"
        );
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
