//! Standard streams of the commands: in-memory inputs and capped sinks.
//!
//! Stages of a pipeline run one after another inside the component; the
//! output of one stage is kept in memory (a [`Sink`] with a hard cap) and
//! becomes the [`Input`] of the next. A write past a hard cap ends the
//! writing command like a broken pipe ([`Flow::BrokenPipe`]). The script's
//! own stdout and stderr are soft sinks: they keep the first bytes and count
//! the rest.

use std::cell::RefCell;
use std::rc::Rc;

use super::Flow;

/// An output stream.
#[derive(Debug, Default)]
pub struct Sink {
    /// What was kept.
    pub buf: Vec<u8>,
    /// Bytes kept at most.
    cap: usize,
    /// Bytes written past the cap and dropped (soft sinks only).
    pub dropped: u64,
    /// Hard: a write past the cap fails; soft: it is dropped and counted.
    hard: bool,
    /// Discard everything (`/dev/null`).
    null: bool,
}

impl Sink {
    /// A sink that fails writes past `cap` bytes (pipes, files, captures).
    pub fn hard(cap: usize) -> Sink {
        Sink {
            cap,
            hard: true,
            ..Sink::default()
        }
    }

    /// A sink that keeps `cap` bytes and counts the rest.
    pub fn soft(cap: usize) -> Sink {
        Sink {
            cap,
            ..Sink::default()
        }
    }

    /// `/dev/null`.
    pub fn null() -> Sink {
        Sink {
            null: true,
            ..Sink::default()
        }
    }

    /// True when a soft sink keeps nothing more (what is written next is
    /// only counted).
    pub fn is_full(&self) -> bool {
        !self.null && !self.hard && self.buf.len() >= self.cap
    }

    /// Appends `bytes`.
    ///
    /// # Errors
    /// [`Flow::BrokenPipe`] when a hard sink would pass its cap.
    pub fn write(&mut self, bytes: &[u8]) -> Result<(), Flow> {
        if self.null {
            return Ok(());
        }
        let room = self.cap.saturating_sub(self.buf.len());
        if bytes.len() <= room {
            self.buf.extend_from_slice(bytes);
            return Ok(());
        }
        if self.hard {
            return Err(Flow::BrokenPipe);
        }
        self.buf.extend_from_slice(&bytes[..room]);
        self.dropped += (bytes.len() - room) as u64;
        Ok(())
    }
}

/// Shared handle on a sink (`2>&1` makes two descriptors share one).
pub type SinkRef = Rc<RefCell<Sink>>;

/// An input stream: bytes and a read position (`read` consumes lines).
#[derive(Debug, Default)]
pub struct Input {
    data: Vec<u8>,
    pos: usize,
}

impl Input {
    /// An input over `data`.
    pub fn new(data: Vec<u8>) -> Input {
        Input { data, pos: 0 }
    }

    /// Everything not read yet, consumed.
    pub fn take_all(&mut self) -> Vec<u8> {
        let rest = if self.pos == 0 {
            std::mem::take(&mut self.data)
        } else {
            self.data[self.pos..].to_vec()
        };
        self.data.clear();
        self.pos = 0;
        rest
    }

    /// The next line without its newline; `None` at the end.
    pub fn read_line(&mut self) -> Option<Vec<u8>> {
        if self.pos >= self.data.len() {
            return None;
        }
        let rest = &self.data[self.pos..];
        let (line, used) = match rest.iter().position(|&b| b == b'\n') {
            Some(i) => (rest[..i].to_vec(), i + 1),
            None => (rest.to_vec(), rest.len()),
        };
        self.pos += used;
        Some(line)
    }
}

/// Shared handle on an input.
pub type InputRef = Rc<RefCell<Input>>;

/// The three streams of a command.
#[derive(Clone)]
pub struct Io {
    /// Standard input.
    pub stdin: InputRef,
    /// Standard output.
    pub out: SinkRef,
    /// Standard error.
    pub err: SinkRef,
}

impl Io {
    /// Streams over fresh buffers.
    pub fn new(stdin: Vec<u8>, out: Sink, err: Sink) -> Io {
        Io {
            stdin: Rc::new(RefCell::new(Input::new(stdin))),
            out: Rc::new(RefCell::new(out)),
            err: Rc::new(RefCell::new(err)),
        }
    }

    /// Writes to stdout.
    ///
    /// # Errors
    /// [`Flow::BrokenPipe`] past a hard cap.
    pub fn print(&self, bytes: impl AsRef<[u8]>) -> Result<(), Flow> {
        self.out.borrow_mut().write(bytes.as_ref())
    }

    /// Writes a line to stderr (never fails: stderr past its cap is dropped).
    pub fn warn(&self, line: impl AsRef<str>) {
        let mut err = self.err.borrow_mut();
        let _ = err.write(line.as_ref().as_bytes());
        let _ = err.write(b"\n");
    }

    /// All of stdin.
    pub fn read_stdin(&self) -> Vec<u8> {
        self.stdin.borrow_mut().take_all()
    }
}

/// Shared new sink.
pub fn sink(s: Sink) -> SinkRef {
    Rc::new(RefCell::new(s))
}

/// Shared new input.
pub fn input(data: Vec<u8>) -> InputRef {
    Rc::new(RefCell::new(Input::new(data)))
}
