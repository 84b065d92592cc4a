//! Modelling overlapped with recording: while a kernel records, a modelling thread runs the
//! dependency pass (which needs only earlier records) over the records made so far, so that
//! after the kernel ends only placement and the summary are left.
//!
//! The kernel thread copies what the pass reads of each record (engine, read and written
//! regions) into a chunk and hands full chunks to the modelling thread, which hands them back
//! empty for reuse. The thread is started with the first full chunk (a launch too small to
//! fill one never starts it) and ends when the feed is finished or dropped: a kernel that fails
//! or panics drops its feed with its instance context, which closes the channel.

use super::schedule::DepPass;
use crate::record::{Engine, Instr, Region};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread::JoinHandle;

/// Records per chunk handed to the modelling thread.
pub(super) const CHUNK: usize = 2048;

/// What the dependency pass reads of a run of records, in program order.
#[derive(Default)]
struct Chunk {
    /// Per record: its engine and how many regions it reads and writes.
    heads: Vec<(Engine, u32, u32)>,
    /// Per record: its read regions, then its written regions.
    regions: Vec<Region>,
}

impl Chunk {
    fn with_capacity() -> Chunk {
        Chunk {
            heads: Vec::with_capacity(CHUNK),
            regions: Vec::with_capacity(CHUNK * 4),
        }
    }

    fn clear(&mut self) {
        self.heads.clear();
        self.regions.clear();
    }

    /// Feeds the chunk's records to `pass`.
    fn feed(&self, pass: &mut DepPass) {
        let mut at = 0;
        for &(engine, nr, nw) in &self.heads {
            let (nr, nw) = (nr as usize, nw as usize);
            let reads = &self.regions[at..at + nr];
            let writes = &self.regions[at + nr..at + nr + nw];
            pass.add(engine, reads, writes);
            at += nr + nw;
        }
    }
}

/// The running modelling thread: where full chunks go and where empty ones come back.
struct Worker {
    full: Sender<Chunk>,
    empty: Receiver<Chunk>,
    handle: JoinHandle<DepPass>,
}

/// The kernel thread's end of a modelling thread that runs the dependency pass of one
/// instance's records (global index 0 on: the only instance of its NeuronCore's stream).
pub(crate) struct RecordFeed {
    chunk: Chunk,
    worker: Option<Worker>,
    /// Records fed (the pass's result is used only if it saw all the instance's records).
    fed: usize,
    /// The thread could not be started or went away: nothing more is fed.
    broken: bool,
}

impl RecordFeed {
    /// A feed; its thread starts with the first full chunk.
    pub(crate) fn new() -> RecordFeed {
        RecordFeed {
            chunk: Chunk::default(),
            worker: None,
            fed: 0,
            broken: false,
        }
    }

    /// Feeds record `r` (the instance's next record).
    pub(crate) fn push(&mut self, r: &Instr) {
        if self.broken {
            return;
        }
        let c = &mut self.chunk;
        c.heads
            .push((r.engine, r.reads.len() as u32, r.writes.len() as u32));
        c.regions.extend_from_slice(&r.reads);
        c.regions.extend_from_slice(&r.writes);
        self.fed += 1;
        if c.heads.len() >= CHUNK {
            self.hand_over();
        }
    }

    /// Hands the current chunk to the modelling thread (started here on first use).
    fn hand_over(&mut self) {
        if self.worker.is_none() {
            self.worker = start();
        }
        let Some(w) = &self.worker else {
            self.broken = true;
            return;
        };
        let next = match w.empty.try_recv() {
            Ok(mut c) => {
                c.clear();
                c
            }
            Err(_) => Chunk::with_capacity(),
        };
        let full = std::mem::replace(&mut self.chunk, next);
        if w.full.send(full).is_err() {
            self.broken = true;
        }
    }

    /// Ends the feed after the instance's last record: the dependency pass over its `records`
    /// records, or `None` when no thread ran or it did not see exactly those records (the
    /// caller then runs the pass itself).
    pub(crate) fn finish(mut self, records: usize) -> Option<DepPass> {
        if self.broken || self.worker.is_none() || self.fed != records {
            return None;
        }
        if !self.chunk.heads.is_empty() {
            self.hand_over();
        }
        let w = self.worker.take()?;
        drop(w.full);
        let pass = w.handle.join().ok()?;
        (!self.broken && pass.records() == records).then_some(pass)
    }
}

/// Starts a modelling thread; `None` when the OS refuses.
fn start() -> Option<Worker> {
    let (full, full_rx) = channel::<Chunk>();
    let (empty_tx, empty) = channel::<Chunk>();
    let handle = std::thread::Builder::new()
        .name("nki-model".into())
        .spawn(move || {
            let mut pass = DepPass::new(0);
            // Ends when the feed is finished or dropped (the sender goes away).
            while let Ok(chunk) = full_rx.recv() {
                chunk.feed(&mut pass);
                let _ = empty_tx.send(chunk);
            }
            pass
        })
        .ok()?;
    Some(Worker {
        full,
        empty,
        handle,
    })
}
