//! stdin, handed to the transport as an [`AsyncRead`] without tokio's blocking pool.
//!
//! tokio's `Stdin` hands every read to its blocking pool and wakes the reading task when
//! it returns: two thread hand-offs per read, paid by every call of a lone caller.
//! [`StdinReader`] instead reads a pipe or a socket (what MCP clients give a server) on
//! the runtime's own thread when the runtime's poller says it is readable: it asks how
//! many bytes are waiting (`FIONREAD`) and reads at most those, so the `read` never
//! blocks although the descriptor stays in blocking mode (its open file is shared with the
//! client, whose own mode it must not change). Anything else (a terminal, a file) is read
//! by a thread of its own ([`ThreadReader`]) that sends each chunk down a bounded channel.
//!
//! Owns: [`StdinReader`], [`ThreadReader`] and the `stdin` thread. Must not: block the
//! runtime in a `read`, buffer more than [`QUEUED_CHUNKS`] chunks of [`CHUNK_BYTES`] (a
//! client writing faster than the server reads waits on the pipe), or keep the process
//! alive: the thread ends at end of input, when reading fails, or when the reader is
//! dropped and its next chunk has nowhere to go; a process that exits otherwise does not
//! wait for it.

use std::io::{self, Read};
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::mpsc;

/// Most bytes one `read` of the thread takes.
const CHUNK_BYTES: usize = 64 * 1024;

/// Chunks read ahead of the transport at most.
const QUEUED_CHUNKS: usize = 4;

/// The server's stdin: read on the runtime's thread when it is a pipe or a socket, else by
/// a thread of its own.
pub(crate) enum StdinReader {
    Polled(AsyncFd<Descriptor>),
    Thread(ThreadReader),
}

/// A descriptor this process does not own (it is not closed on drop).
pub(crate) struct Descriptor(RawFd);

impl AsRawFd for Descriptor {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

impl StdinReader {
    /// The reader of the process's stdin (descriptor 0).
    pub(crate) fn open() -> io::Result<StdinReader> {
        match Self::polled(io::stdin().as_raw_fd()) {
            Some(polled) => Ok(polled),
            None => ThreadReader::spawn(io::stdin()).map(StdinReader::Thread),
        }
    }

    /// A reader of `fd` on the runtime's poller, if it is a pipe or a socket. `fd` must stay
    /// open (and the same) while the reader lives.
    fn polled(fd: RawFd) -> Option<StdinReader> {
        if !is_pipe_or_socket(fd) {
            return None;
        }
        // SAFETY: the caller keeps `fd` open and the same while the reader lives; the
        // server's is descriptor 0, which nothing in the process closes or replaces.
        let polled = unsafe {
            AsyncFd::register_with_interest(Descriptor(fd), tokio::io::Interest::READABLE)
        };
        polled.ok().map(StdinReader::Polled)
    }
}

fn is_pipe_or_socket(fd: RawFd) -> bool {
    // SAFETY: `stat` is plain data, written whole by fstat on success.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is a descriptor number and `stat` is valid for writes.
    if unsafe { libc::fstat(fd, &mut stat) } != 0 {
        return false;
    }
    matches!(stat.st_mode & libc::S_IFMT, libc::S_IFIFO | libc::S_IFSOCK)
}

/// Bytes waiting to be read on `fd` (`FIONREAD`).
fn bytes_waiting(fd: RawFd) -> io::Result<usize> {
    let mut waiting: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int through the pointer.
    if unsafe { libc::ioctl(fd, libc::FIONREAD, &mut waiting) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(usize::try_from(waiting).unwrap_or(0))
}

fn poll_read_polled(
    fd: &AsyncFd<Descriptor>,
    cx: &mut Context<'_>,
    buf: &mut ReadBuf<'_>,
) -> Poll<io::Result<()>> {
    loop {
        let mut guard = ready!(fd.poll_read_ready(cx))?;
        let closed = guard.ready().is_read_closed();
        let waiting = bytes_waiting(fd.get_ref().0)?;
        if waiting == 0 {
            if closed {
                return Poll::Ready(Ok(())); // end of input
            }
            guard.clear_ready(); // a wake-up with nothing to read: wait for the next
            continue;
        }
        let take = waiting.min(buf.remaining());
        let unfilled = &mut buf.initialize_unfilled_to(take)[..take];
        // SAFETY: `unfilled` is valid for writes of `take` bytes; `take` bytes are
        // waiting, so this read returns at once.
        let read = unsafe { libc::read(fd.get_ref().0, unfilled.as_mut_ptr().cast(), take) };
        if read < 0 {
            let error = io::Error::last_os_error();
            match error.kind() {
                io::ErrorKind::Interrupted => continue,
                // The bytes were taken by another reader of the same pipe (a descriptor
                // the client left non-blocking): wait for the next readiness.
                io::ErrorKind::WouldBlock => {
                    guard.clear_ready();
                    continue;
                }
                _ => return Poll::Ready(Err(error)),
            }
        }
        let read = read as usize;
        buf.advance(read);
        // Drained: wait for the next readiness (a later arrival is not lost: tokio keeps
        // readiness that came after this guard's). A closed pipe stays ready, so its end
        // is seen on the next call.
        if read == waiting && !closed {
            guard.clear_ready();
        }
        return Poll::Ready(Ok(()));
    }
}

impl AsyncRead for StdinReader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            StdinReader::Polled(fd) => poll_read_polled(fd, cx, buf),
            StdinReader::Thread(reader) => Pin::new(reader).poll_read(cx, buf),
        }
    }
}

/// The reading end: chunks from the `stdin` thread, in order; end of input when the
/// thread has ended after the last one.
pub(crate) struct ThreadReader {
    chunks: mpsc::Receiver<io::Result<Vec<u8>>>,
    /// The chunk being handed out, and how much of it has been.
    current: Vec<u8>,
    handed: usize,
}

impl ThreadReader {
    /// Starts the thread reading `input` (the process's stdin in the server).
    pub(crate) fn spawn<I: Read + Send + 'static>(input: I) -> io::Result<ThreadReader> {
        let (chunks_tx, chunks) = mpsc::channel(QUEUED_CHUNKS);
        std::thread::Builder::new()
            .name("stdin".to_string())
            .spawn(move || read_chunks(input, &chunks_tx))?;
        Ok(ThreadReader {
            chunks,
            current: Vec::new(),
            handed: 0,
        })
    }
}

fn read_chunks<I: Read>(mut input: I, chunks: &mpsc::Sender<io::Result<Vec<u8>>>) {
    let mut buffer = vec![0u8; CHUNK_BYTES];
    loop {
        let chunk = match input.read(&mut buffer) {
            Ok(0) => return,
            Ok(read) => Ok(buffer[..read].to_vec()),
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => Err(error),
        };
        let failed = chunk.is_err();
        if chunks.blocking_send(chunk).is_err() || failed {
            return;
        }
    }
}

impl AsyncRead for ThreadReader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            let left = &this.current[this.handed..];
            if !left.is_empty() {
                let take = left.len().min(buf.remaining());
                buf.put_slice(&left[..take]);
                this.handed += take;
                return Poll::Ready(Ok(()));
            }
            match ready!(this.chunks.poll_recv(cx)) {
                Some(Ok(chunk)) => {
                    this.current = chunk;
                    this.handed = 0;
                }
                Some(Err(error)) => return Poll::Ready(Err(error)),
                // The thread ended: end of input (nothing put in `buf`).
                None => return Poll::Ready(Ok(())),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn hands_every_byte_over_in_order_then_end_of_input() {
        let input: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let mut reader = ThreadReader::spawn(std::io::Cursor::new(input.clone())).unwrap();
        let mut read = Vec::new();
        reader.read_to_end(&mut read).await.unwrap();
        assert_eq!(read, input);
    }

    #[tokio::test]
    async fn a_pipe_is_read_on_the_poller_in_order_until_its_writer_closes() {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors pipe(2) returns.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        use std::os::fd::FromRawFd;
        // SAFETY: both were just opened; each file owns one.
        let (read_end, mut write_end) = unsafe {
            (
                std::fs::File::from_raw_fd(fds[0]),
                std::fs::File::from_raw_fd(fds[1]),
            )
        };
        let mut reader = StdinReader::polled(read_end.as_raw_fd()).expect("a pipe is polled");
        assert!(matches!(reader, StdinReader::Polled(_)));
        let input: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
        let sent = input.clone();
        let writer = std::thread::spawn(move || {
            use std::io::Write;
            // Uneven pieces, some bigger than the pipe holds, then end of input.
            for piece in sent.chunks(70_001) {
                write_end.write_all(piece).unwrap();
            }
        });
        let mut read = Vec::new();
        reader.read_to_end(&mut read).await.unwrap();
        writer.join().unwrap();
        assert!(read == input, "bytes lost or reordered");
        drop(reader);
        drop(read_end);
    }

    #[tokio::test]
    async fn a_read_error_reaches_the_transport() {
        struct Failing;
        impl Read for Failing {
            fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
                Err(io::Error::other("the pipe broke"))
            }
        }
        let mut reader = ThreadReader::spawn(Failing).unwrap();
        let mut read = Vec::new();
        let error = reader.read_to_end(&mut read).await.unwrap_err();
        assert_eq!(error.to_string(), "the pipe broke");
    }
}
