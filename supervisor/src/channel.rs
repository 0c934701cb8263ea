//! The master's end of a channel to a child (a worker or a zygote) over a Unix stream: a writer
//! task that sends frames in order, and a reader that cuts the input into lines of at most the
//! frame limit.
//!
//! Ordering guarantee (kept by the callers): a child's exit is reported only after the reader has
//! drained every line the child wrote before dying. The reader is told the process is gone
//! (`exited`), reads on while lines keep coming, and stops after 100 ms of silence — a grandchild
//! may hold the socket open forever, so EOF is not guaranteed.

use std::time::Duration;

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{mpsc, oneshot, watch};

use serde::Serialize;

use crate::protocol::{self, ProtocolError};

/// A frame on its way to a child, and who waits to hear that it was written.
pub(crate) struct Outgoing<T> {
    pub frame: T,
    /// Told once the whole frame is in the socket: the child then reads it before anything it
    /// reads later (a worker reads every frame waiting before it starts a job). Dropped unsent
    /// when the frame never got there (the socket broke): the child is gone or going.
    pub written: Option<oneshot::Sender<()>>,
}

impl<T> Outgoing<T> {
    /// A frame nobody waits on.
    pub fn frame(frame: T) -> Outgoing<T> {
        Outgoing {
            frame,
            written: None,
        }
    }
}

/// Writes frames in order; stops when the socket breaks or every sender is dropped (and then
/// shuts the write side, so the child reads EOF).
pub(crate) fn spawn_writer<T: Serialize + Send + 'static>(
    mut write_half: OwnedWriteHalf,
    mut frames: mpsc::UnboundedReceiver<Outgoing<T>>,
) {
    tokio::spawn(async move {
        while let Some(out) = frames.recv().await {
            if write_half
                .write_all(&protocol::encode(&out.frame))
                .await
                .is_err()
            {
                break;
            }
            if let Some(written) = out.written {
                let _ = written.send(());
            }
        }
    });
}

/// Reads frames (`prefix` first: bytes already read off the stream), each line parsed by `parse`
/// and handed to `deliver`, until EOF, input that breaks the protocol (delivered as the error,
/// after which nothing more is read), or silence after the process exited. EOF while the process
/// lives is [`ProtocolError::Closed`] if it is still alive a second later; bytes after the last
/// newline at EOF are [`ProtocolError::PartialFrame`].
pub(crate) async fn read_frames<F>(
    read_half: OwnedReadHalf,
    prefix: Vec<u8>,
    limit: usize,
    mut exited: watch::Receiver<bool>,
    parse: impl Fn(&[u8]) -> Result<F, ProtocolError>,
    mut deliver: impl FnMut(Result<F, ProtocolError>),
) {
    let mut reader = BufReader::new(std::io::Cursor::new(prefix).chain(read_half));
    let mut line = Vec::new();
    loop {
        let result = if *exited.borrow() {
            match tokio::time::timeout(
                Duration::from_millis(100),
                read_line(&mut reader, &mut line, limit),
            )
            .await
            {
                Ok(r) => r,
                Err(_) => return,
            }
        } else {
            tokio::select! {
                r = read_line(&mut reader, &mut line, limit) => r,
                _ = exited.changed() => continue,
            }
        };
        match result {
            Ok(true) => {
                let body = line.strip_suffix(b"\n").unwrap_or(&line);
                let frame = parse(body);
                let bad = frame.is_err();
                deliver(frame);
                if bad {
                    // After bad input nothing more the child says is believed.
                    return;
                }
                line.clear();
            }
            Ok(false) => {
                // EOF. Normally the process is exiting; one that closed its end and lives on can
                // never report its jobs again and must be stopped. Bytes after the last newline
                // are a frame cut short: said, so the exit is not read as a clean one.
                if !line.is_empty() {
                    deliver(Err(ProtocolError::partial(&line)));
                    return;
                }
                if !*exited.borrow() {
                    let gone =
                        tokio::time::timeout(Duration::from_secs(1), exited.wait_for(|e| *e)).await;
                    if !matches!(gone, Ok(Ok(_))) {
                        deliver(Err(ProtocolError::Closed));
                    }
                }
                return;
            }
            Err(problem) => {
                deliver(Err(problem));
                return;
            }
        }
    }
}

/// The child is gone: its reader is told, and drains what the child wrote before it died. The
/// child's exit is reported only after this returns (this module's ordering guarantee).
pub(crate) async fn drain(exited: watch::Sender<bool>, reader: tokio::task::JoinHandle<()>) {
    let _ = exited.send(true);
    let _ = reader.await;
}

/// Reads up to and including `\n` into `line` (which keeps partial data across cancellation).
/// `Ok(false)` on EOF.
async fn read_line<R: AsyncBufRead + AsyncRead + Unpin>(
    reader: &mut R,
    line: &mut Vec<u8>,
    limit: usize,
) -> Result<bool, ProtocolError> {
    loop {
        let room = (limit + 1).saturating_sub(line.len()) as u64;
        if room == 0 {
            return Err(ProtocolError::Oversized { limit });
        }
        let n = (&mut *reader)
            .take(room)
            .read_until(b'\n', line)
            .await
            .unwrap_or(0);
        if line.last() == Some(&b'\n') {
            if line.len() > limit + 1 {
                return Err(ProtocolError::Oversized { limit });
            }
            return Ok(true);
        }
        if n == 0 {
            // EOF; a partial last line stays in `line` for the caller to report.
            return Ok(false);
        }
        if line.len() > limit {
            return Err(ProtocolError::Oversized { limit });
        }
    }
}
