//! Modelling overlapped with recording: while a kernel records, a modelling thread prepares
//! the records made so far (everything the model needs that depends only on the records:
//! dependencies, costs, DMA plans, queues, per-op rows; see [`Prepared`]), so that after the
//! kernel ends only placement and the placement-dependent summary are left.
//!
//! The modelling thread reads the records in place, in the kernel thread's record buffer: the
//! kernel thread hands it spans of finished records (a pointer and a length, nothing copied)
//! and gets a token back for each span prepared. A span stays valid while the buffer neither
//! moves nor frees and its records are not changed: before the buffer grows the kernel thread
//! waits for every span handed out ([`RecordFeed::sync`]), and dropping the feed stops and
//! joins the thread (an instance context drops its feed before its records). The thread is
//! started with the first full span (a launch too small to fill one never starts it) and ends
//! when the feed is finished or dropped.

use super::prepare::Prepared;
use crate::record::Instr;
use crate::target::Target;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Records per span handed to the modelling thread.
pub(super) const CHUNK: usize = 2048;

/// Finished records in the kernel thread's record buffer, in program order: `len` records
/// from `first` on.
struct Span {
    first: *const Instr,
    len: usize,
}

// SAFETY: a span is only read by the modelling thread, while the kernel thread keeps its
// records in place and unchanged (see the module comment and `RecordFeed::push`).
unsafe impl Send for Span {}

impl Span {
    /// Prepares the span's records (instance 0's) in `prep`.
    ///
    /// # Safety
    ///
    /// The span's records are alive, in place and not written while this runs.
    unsafe fn prepare(&self, prep: &mut Prepared) {
        // SAFETY: the caller's contract.
        let records = unsafe { std::slice::from_raw_parts(self.first, self.len) };
        for r in records {
            prep.add(&r.cost, &r.reads, &r.writes, 0);
        }
    }
}

/// The running modelling thread: where spans go, where their tokens come back, and the flag
/// that makes it stop reading.
struct Worker {
    spans: Sender<Span>,
    done: Receiver<()>,
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Prepared>,
    /// Spans handed out whose token has not come back.
    outstanding: usize,
}

impl Worker {
    /// Waits until the thread prepared every span handed out (or went away).
    fn sync(&mut self) {
        while self.outstanding > 0 {
            if self.done.recv().is_err() {
                // The thread ended: it reads nothing any more.
                self.outstanding = 0;
                return;
            }
            self.outstanding -= 1;
        }
    }
}

/// The kernel thread's end of a modelling thread that prepares one instance's records (see
/// [`Prepared`]; global index 0 on: the only instance of the launch, first in its NeuronCore's
/// stream).
pub(crate) struct RecordFeed {
    worker: Option<Worker>,
    /// Target and NeuronCore of the instance.
    target: Target,
    nc: usize,
    /// Records fed (the preparation is used only if it saw all the instance's records).
    fed: usize,
    /// Records handed to the thread (the first `handed` of the buffer).
    handed: usize,
    /// The thread could not be started or went away: nothing more is fed.
    broken: bool,
    /// Nothing is handed over while the kernel records: the records go over whole, beside
    /// the compiler stage ([`RecordFeed::start_all`]).
    deferred: bool,
}

impl RecordFeed {
    /// A feed for the records of the instance on NeuronCore `nc` of a launch on `target`;
    /// its thread starts with the first full span.
    pub(crate) fn new(target: Target, nc: usize) -> RecordFeed {
        RecordFeed {
            worker: None,
            target,
            nc,
            fed: 0,
            handed: 0,
            broken: false,
            deferred: false,
        }
    }

    /// The feed deferred until the kernel's last record ([`RecordFeed::start_all`]): for a
    /// program the compiler stage is about to rewrite, whose records as recorded are wasted
    /// work when it does. Prepared beside the stage, they cost no time when it changes
    /// nothing (the stage takes longer than their preparation), and the stage stops the
    /// thread at its first change ([`RecordFeed::discard`]), before it moves any record.
    pub(crate) fn deferred(mut self) -> RecordFeed {
        self.deferred = true;
        self
    }

    /// Hands the whole of `records` (the instance's record buffer, all its records made) to
    /// a deferred feed's thread, a span at a time; nothing for any other feed.
    ///
    /// # Safety
    ///
    /// Until [`RecordFeed::sync`] returns, [`RecordFeed::discard`] or [`RecordFeed::finish`]
    /// is called or the feed is dropped, `records` does not move or free and none of them is
    /// written.
    pub(crate) unsafe fn start_all(&mut self, records: &[Instr]) {
        if !std::mem::take(&mut self.deferred) || self.broken {
            return;
        }
        self.fed = records.len();
        for span in records.chunks(CHUNK) {
            self.hand_over(Span {
                first: span.as_ptr(),
                len: span.len(),
            });
        }
        self.handed = records.len();
    }

    /// Feeds the instance's next record: the records of the buffer at `first` are finished up
    /// to `len` (the new one is the last); they are handed to the thread a span at a time.
    ///
    /// # Safety
    ///
    /// `first` points to the instance's record buffer holding at least `len` records. Until
    /// [`RecordFeed::sync`] returns, the feed is dropped or [`RecordFeed::finish`] is called,
    /// the buffer does not move or free and none of its first `len` records is written.
    pub(crate) unsafe fn push(&mut self, first: *const Instr, len: usize) {
        if self.broken || self.deferred {
            return;
        }
        self.fed += 1;
        if len - self.handed >= CHUNK {
            // SAFETY: `handed <= len` records lie at `first` (the caller's contract).
            let span = Span {
                first: unsafe { first.add(self.handed) },
                len: len - self.handed,
            };
            self.handed = len;
            self.hand_over(span);
        }
    }

    /// Waits until the thread has read every record handed to it: after this the kernel
    /// thread may move the buffer (the records handed out stay prepared).
    pub(crate) fn sync(&mut self) {
        if let Some(w) = &mut self.worker {
            w.sync();
        }
    }

    /// Stops the thread and forgets what it prepared, for records that changed after it read
    /// them (the compiler's transformations): [`RecordFeed::finish`] then gives `None`. The
    /// feed still stands for the host CPU the launch holds for its modelling.
    pub(crate) fn discard(&mut self) {
        if let Some(w) = self.worker.take() {
            w.stop.store(true, Ordering::Relaxed);
            drop(w.spans);
            let _ = w.handle.join();
        }
        self.broken = true;
    }

    /// Hands `span` to the modelling thread (started here on first use).
    fn hand_over(&mut self, span: Span) {
        if self.worker.is_none() {
            self.worker = start(self.target, self.nc);
        }
        let Some(w) = &mut self.worker else {
            self.broken = true;
            return;
        };
        if w.spans.send(span).is_ok() {
            w.outstanding += 1;
        } else {
            self.broken = true;
        }
    }

    /// Ends the feed after the instance's last record (`records` is the instance's whole
    /// record buffer): the preparation of its records, or `None` when no thread ran or it did
    /// not see exactly those records (the caller then prepares them itself).
    pub(crate) fn finish(mut self, records: &[Instr]) -> Option<Prepared> {
        if self.broken || self.worker.is_none() || self.fed != records.len() {
            return None;
        }
        let tail = &records[self.handed.min(records.len())..];
        if !tail.is_empty() {
            // `records` outlives this call, which joins the thread before returning.
            self.hand_over(Span {
                first: tail.as_ptr(),
                len: tail.len(),
            });
            self.handed = records.len();
        }
        let w = self.worker.take()?;
        drop(w.spans);
        let prep = w.handle.join().ok();
        prep.filter(|p| !self.broken && p.records() == records.len())
    }
}

impl Drop for RecordFeed {
    /// Stops the thread and waits for it: it reads no record after this.
    fn drop(&mut self) {
        if let Some(w) = self.worker.take() {
            w.stop.store(true, Ordering::Relaxed);
            drop(w.spans);
            let _ = w.handle.join();
        }
    }
}

/// Starts a modelling thread for the instance on NeuronCore `nc`; `None` when the OS refuses.
fn start(target: Target, nc: usize) -> Option<Worker> {
    let (spans, spans_rx) = channel::<Span>();
    let (done_tx, done) = channel::<()>();
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = stop.clone();
    let handle = std::thread::Builder::new()
        .name("nki-model".into())
        .spawn(move || {
            let mut prep = Prepared::new(target.spec(), true);
            prep.begin_core(0, nc);
            // Ends when the feed is finished or dropped (the sender goes away); a dropped
            // feed also raises `stop`, and the spans still queued are then not read.
            while let Ok(span) = spans_rx.recv() {
                if stopped.load(Ordering::Relaxed) {
                    break;
                }
                // SAFETY: the kernel thread keeps the span's records in place and unchanged
                // until this token comes back, the feed is dropped (which waits for this
                // thread) or finished (which joins it).
                unsafe { span.prepare(&mut prep) };
                let _ = done_tx.send(());
            }
            prep
        })
        .ok()?;
    Some(Worker {
        spans,
        done,
        stop,
        handle,
        outstanding: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::error::SourceLoc;
    use crate::math::AluOp;
    use crate::record::{
        AffinePos, BufId, CostFacts, DmaDims, Engine, MatmulDims, MemKind, Opcode, Region,
    };
    use crate::timing::cost;

    /// Records of every engine with every field a record can carry set (API name, source
    /// line, regions, loop position included).
    fn full_records() -> Vec<Instr> {
        let loc = SourceLoc {
            file: "kernel.rs",
            line: 12,
            column: 5,
        };
        let reg = |b: u64| Region {
            buf: BufId::Tile(b),
            p0: 0,
            p1: 128,
            lo: 0,
            hi: 1024,
        };
        let base = |engine, opcode, api| Instr {
            reads: vec![reg(1), reg(2), reg(3), reg(4)].into(),
            writes: vec![reg(5)].into(),
            affine: AffinePos::new(&[(1, 3), (2, 7)]),
            ..Instr::with_cost(
                CostFacts {
                    partitions: 128,
                    free: 512,
                    inputs: 2,
                    in_dtype: DType::BF16,
                    out_dtype: DType::F32,
                    psum: true,
                    contiguous: true,
                    accumulate: true,
                    alu: Some(AluOp::Multiply),
                    ..CostFacts::new(engine, opcode)
                },
                api,
                loc,
            )
        };
        fn with(mut r: Instr, f: impl FnOnce(&mut CostFacts)) -> Instr {
            f(&mut r.cost);
            r
        }
        let dma = DmaDims {
            src: MemKind::Hbm,
            dst: MemKind::Sbuf,
            bytes: 96 * 1000,
            partitions: 96,
            start_partition: 8,
            chunk_bytes: 200,
        };
        vec![
            with(base(Engine::Dma, Opcode::DmaCopy, "nl.load"), |c| {
                c.dma = Some(dma)
            }),
            with(
                base(Engine::Dma, Opcode::DmaTranspose, "nisa.dma_transpose"),
                |c| c.dma = Some(dma),
            ),
            with(
                base(Engine::Tensor, Opcode::Matmul, "nisa.nc_matmul"),
                |c| {
                    c.matmul = Some(MatmulDims {
                        k: 128,
                        m: 96,
                        n: 512,
                        fp32: false,
                        onezero: 0,
                    })
                },
            ),
            base(Engine::Tensor, Opcode::Transpose, "nisa.nc_transpose"),
            base(Engine::Vector, Opcode::TensorTensor, "nl.multiply"),
            base(Engine::Scalar, Opcode::Activation, "nisa.activation_reduce"),
            base(Engine::GpSimd, Opcode::TensorScalar, "nisa.tensor_scalar"),
            base(Engine::Vector, Opcode::TensorReduce, "nl.sum"),
        ]
    }

    #[test]
    fn a_deferred_feed_prepares_the_whole_buffer_once_started() {
        // Records pushed while recording are not handed over; started on the whole buffer,
        // the thread prepares every record (dependencies included) as the direct pass does.
        // Stopped before the records change, it gives no preparation.
        let recs: Vec<Instr> = full_records()
            .into_iter()
            .cycle()
            .take(CHUNK * 2 + 5)
            .collect();
        let spec = Target::Trn2.spec();
        let stream = crate::record::CoreStream {
            nc: 0,
            instances: vec![(Vec::new(), recs.clone())],
        };
        let mut direct = Prepared::of_streams(std::slice::from_ref(&stream), spec, None);
        direct.cores[0].deps.index_successors();
        for stop in [false, true] {
            let mut feed = RecordFeed::new(Target::Trn2, 0).deferred();
            for i in 0..recs.len() {
                // SAFETY: `recs` is neither moved nor written until `finish`.
                unsafe { feed.push(recs.as_ptr(), i + 1) };
            }
            assert!(feed.worker.is_none(), "nothing handed over while recording");
            // SAFETY: as above.
            unsafe { feed.start_all(&recs) };
            if stop {
                feed.discard();
                assert!(feed.finish(&recs).is_none());
                continue;
            }
            let mut fed = feed.finish(&recs).expect("the feed's thread ran");
            fed.cores[0].deps.index_successors();
            for (i, r) in recs.iter().enumerate() {
                let (a, b) = (&fed.cores[0].deps, &direct.cores[0].deps);
                let edges = |s: &[crate::timing::order::Edge]| {
                    s.iter()
                        .map(|e| (e.succ, e.kind, e.late))
                        .collect::<Vec<_>>()
                };
                assert_eq!(edges(a.successors(i)), edges(b.successors(i)), "record {i}");
                assert_eq!(a.preds[i], b.preds[i], "record {i}");
                if r.engine != Engine::Dma && r.engine != Engine::Tensor {
                    assert_eq!(
                        fed.costs.compute_ns(spec, i, r).to_bits(),
                        direct.costs.compute_ns(spec, i, r).to_bits()
                    );
                }
            }
            fed.recycle();
        }
        direct.recycle();
    }

    #[test]
    fn a_fed_preparation_costs_every_record_as_the_direct_one() {
        // Several chunks of records of every engine with every field set, prepared by the
        // feed's thread as they are "recorded" and directly from the stream afterwards: every
        // record gets bit-identical costs (DMA plans included) on both paths.
        for target in [Target::Trn1, Target::Trn2, Target::Trn3] {
            let spec = target.spec();
            let recs: Vec<Instr> = full_records()
                .into_iter()
                .cycle()
                .take(CHUNK * 2 + 5)
                .collect();
            let mut feed = RecordFeed::new(target, 0);
            for i in 0..recs.len() {
                // SAFETY: `recs` is neither moved nor written until `finish`.
                unsafe { feed.push(recs.as_ptr(), i + 1) };
            }
            let fed = feed.finish(&recs).expect("the feed's thread ran");
            let stream = crate::record::CoreStream {
                nc: 0,
                instances: vec![(Vec::new(), recs.clone())],
            };
            let direct = Prepared::of_streams(std::slice::from_ref(&stream), spec, None);
            let (mut a, mut b) = (cost::DmaPlan::default(), cost::DmaPlan::default());
            for (i, r) in recs.iter().enumerate() {
                let what = format!("record {i}: {:?} {:?} on {target:?}", r.engine, r.opcode);
                match r.engine {
                    Engine::Dma => {
                        fed.costs.dma_plan_into(spec, i, r, &mut a);
                        direct.costs.dma_plan_into(spec, i, r, &mut b);
                        assert_eq!(a, b, "{what}");
                        assert_eq!(a, cost::dma_plan(spec, r), "{what}");
                    }
                    Engine::Tensor => assert_eq!(
                        fed.costs.tensor(spec, i, r),
                        direct.costs.tensor(spec, i, r),
                        "{what}"
                    ),
                    _ => assert_eq!(
                        fed.costs.compute_ns(spec, i, r).to_bits(),
                        direct.costs.compute_ns(spec, i, r).to_bits(),
                        "{what}"
                    ),
                }
            }
            fed.recycle();
            direct.recycle();
        }
    }
}
