//! stdin read by a thread of its own, handed to the transport as an [`AsyncRead`].
//!
//! tokio's `Stdin` hands every read to its blocking pool and wakes the reading task when
//! it returns: two thread hand-offs per read, paid by every call of a lone caller. Here
//! one thread sits in a blocking `read` and sends each chunk it gets down a bounded
//! channel: one wake-up of the runtime per chunk, however many lines it holds.
//!
//! Owns: the `stdin` thread and [`ThreadReader`]. Must not: buffer more than
//! [`QUEUED_CHUNKS`] chunks of [`CHUNK_BYTES`] (a client writing faster than the server
//! reads waits on the pipe, as before), or keep the process alive: the thread ends at end
//! of input, when reading fails, or when the reader is dropped and its next chunk has
//! nowhere to go; a process that exits otherwise does not wait for it.

use std::io::{self, Read};
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::mpsc;

/// Most bytes one `read` of the thread takes.
const CHUNK_BYTES: usize = 64 * 1024;

/// Chunks read ahead of the transport at most.
const QUEUED_CHUNKS: usize = 4;

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
