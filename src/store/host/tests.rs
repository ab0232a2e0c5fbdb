//! The host against clients that misbehave: connect and say nothing, stop half-way
//! through a frame, begin a write and hang, speak another protocol version. The host's
//! own calls keep being answered; conditions, never fixed waits.

use super::serve::STEP_LIMIT;
use super::wire::{self, Request, Response};
use crate::event::{NewEvent, Payload, SessionId, SessionKind};
use crate::store::Ledger;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

fn start() -> NewEvent {
    NewEvent::new(Payload::SessionStarted {
        kind: SessionKind::THINKING,
        title: "t".into(),
        aliases: Vec::new(),
    })
}

fn append_new_session(ledger: &Ledger) -> SessionId {
    let session = SessionId::generate();
    ledger
        .write_blocking(move |txn| txn.append(session, 0, vec![start()]))
        .unwrap()
        .unwrap();
    session
}

fn hello(stream: &mut UnixStream) {
    wire::write_frame(
        stream,
        &Request::Hello {
            version: wire::PROTOCOL_VERSION,
        },
    )
    .unwrap();
    let answer: Response = wire::read_frame(stream, None, STEP_LIMIT).unwrap();
    assert!(matches!(answer, Response::Hello { .. }), "{answer:?}");
}

/// Reads until the host closes the connection; returns what it took.
fn until_closed(stream: &mut UnixStream) -> Duration {
    let started = Instant::now();
    stream.set_read_timeout(None).unwrap();
    let mut rest = Vec::new();
    let _ = stream.read_to_end(&mut rest);
    started.elapsed()
}

#[test]
fn clients_that_hang_do_not_stall_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let host = Ledger::open(dir.path(), crate::tools::families()).unwrap();
    append_new_session(&host);
    let socket = dir.path().join("ledger.sock");

    // Connects and says nothing; connects and stops inside a frame.
    let _silent = UnixStream::connect(&socket).unwrap();
    let mut half = UnixStream::connect(&socket).unwrap();
    half.write_all(&[100, 0, 0, 0, 1, 2]).unwrap();
    append_new_session(&host);
    // The half frame is given up on: the host closes that connection.
    until_closed(&mut half);

    // Begins a write and hangs: the host's writer waits for it at most STEP_LIMIT, then
    // drops it and answers its own calls.
    let mut hanging = UnixStream::connect(&socket).unwrap();
    hello(&mut hanging);
    wire::write_frame(&mut hanging, &Request::BeginWrite).unwrap();
    let begun: Response = wire::read_frame(&mut hanging, None, STEP_LIMIT).unwrap();
    assert!(matches!(begun, Response::Begun { .. }), "{begun:?}");
    let session = append_new_session(&host);
    assert!(host.head(session).unwrap().is_some());
    until_closed(&mut hanging);

    // A client of this build still gets through, and so do the host's own writes.
    let client = Ledger::open(dir.path(), crate::tools::families()).unwrap();
    let from_client = append_new_session(&client);
    assert!(host.head(from_client).unwrap().is_some());
    assert_eq!(host.verify_all().unwrap().len(), 4);
}

#[test]
fn a_client_of_another_protocol_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let _host = Ledger::open(dir.path(), crate::tools::families()).unwrap();
    let mut stream = UnixStream::connect(dir.path().join("ledger.sock")).unwrap();
    wire::write_frame(
        &mut stream,
        &Request::Hello {
            version: wire::PROTOCOL_VERSION + 1,
        },
    )
    .unwrap();
    let answer: Response = wire::read_frame(&mut stream, None, STEP_LIMIT).unwrap();
    assert!(matches!(answer, Response::Failed(_)), "{answer:?}");
    until_closed(&mut stream);
}

#[test]
fn a_frame_over_the_limit_closes_the_connection() {
    let dir = tempfile::tempdir().unwrap();
    let host = Ledger::open(dir.path(), crate::tools::families()).unwrap();
    let mut stream = UnixStream::connect(dir.path().join("ledger.sock")).unwrap();
    hello(&mut stream);
    let too_long = (wire::MAX_FRAME_BYTES as u32 + 1).to_le_bytes();
    stream.write_all(&too_long).unwrap();
    until_closed(&mut stream);
    append_new_session(&host);
}

#[test]
fn a_client_takes_over_when_the_host_closes() {
    let dir = tempfile::tempdir().unwrap();
    let host = Ledger::open(dir.path(), crate::tools::families()).unwrap();
    let client = Ledger::open(dir.path(), crate::tools::families()).unwrap();
    let session = append_new_session(&client);
    drop(host);
    // The socket went with the host; the client's next call holds the file itself.
    assert!(!dir.path().join("ledger.sock").exists());
    let closed = client
        .write_blocking(move |txn| {
            txn.append(
                session,
                1,
                vec![NewEvent::new(Payload::SessionClosed {
                    reason: "after the host".into(),
                })],
            )
        })
        .unwrap()
        .unwrap();
    assert_eq!(closed.head.seq, 2);
    assert!(
        dir.path().join("ledger.sock").exists(),
        "the new host listens"
    );
    // And a third handle reaches it through its socket.
    let third = Ledger::open(dir.path(), crate::tools::families()).unwrap();
    assert_eq!(third.head(session).unwrap().unwrap().seq, 2);
    assert_eq!(third.verify_all().unwrap().len(), 1);
}
