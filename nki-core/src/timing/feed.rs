//! Modelling overlapped with recording: while a kernel records, a modelling thread prepares
//! the records made so far (everything the model needs that depends only on the records:
//! dependencies, costs, DMA plans, queues, per-op rows; see [`Prepared`]), so that after the
//! kernel ends only placement and the placement-dependent summary are left.
//!
//! The kernel thread copies what the preparation reads of each record (its fields and regions,
//! not its loop position) into a chunk and hands full chunks to the modelling thread, which
//! hands them back empty for reuse (also to later launches' feeds). The thread is started with
//! the first full chunk (a launch too small to fill one never starts it) and ends when the feed
//! is finished or dropped: a kernel that fails or panics drops its feed with its instance
//! context, which closes the channel.

use super::cost::CostFacts;
use super::prepare::Prepared;
use crate::record::{Instr, Region};
use crate::target::Target;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Mutex;
use std::thread::JoinHandle;

/// Records per chunk handed to the modelling thread.
pub(super) const CHUNK: usize = 2048;

/// What the preparation reads of a record: its cost facts (the fields the cost rules read,
/// not its API name, source line or loop position) and how many of the regions that follow
/// it in its chunk it reads and writes. Compact: the kernel thread copies it for every record.
#[derive(Clone, Copy)]
struct Head {
    facts: CostFacts,
    /// How many regions the record reads and writes.
    reads: u32,
    writes: u32,
}

impl Head {
    fn of(r: &Instr) -> Head {
        Head {
            facts: CostFacts::of(r),
            reads: r.reads.len() as u32,
            writes: r.writes.len() as u32,
        }
    }
}

/// A run of records, in program order.
#[derive(Default)]
struct Chunk {
    heads: Vec<Head>,
    /// Per record: its read regions, then its written regions.
    regions: Vec<Region>,
}

impl Chunk {
    fn clear(&mut self) {
        self.heads.clear();
        self.regions.clear();
    }

    /// Prepares the chunk's records (instance 0's) in `prep`.
    fn prepare(&self, prep: &mut Prepared) {
        let mut at = 0;
        for h in &self.heads {
            let (nr, nw) = (h.reads as usize, h.writes as usize);
            let reads = &self.regions[at..at + nr];
            let writes = &self.regions[at + nr..at + nr + nw];
            prep.add(&h.facts, reads, writes, 0);
            at += nr + nw;
        }
    }
}

/// Empty chunks of earlier launches' feeds (their pages are resident).
static SPARE_CHUNKS: Mutex<Vec<Chunk>> = Mutex::new(Vec::new());

/// Most chunks [`SPARE_CHUNKS`] keeps.
const SPARE_MAX: usize = 16;

impl Chunk {
    /// An empty chunk: a spare one when there is one.
    fn spare() -> Chunk {
        let spare = SPARE_CHUNKS.lock().unwrap_or_else(|p| p.into_inner()).pop();
        spare.unwrap_or_else(|| Chunk {
            heads: Vec::with_capacity(CHUNK),
            regions: Vec::with_capacity(CHUNK * 4),
        })
    }

    /// Keeps empty chunks for later feeds (up to [`SPARE_MAX`]).
    fn keep(chunks: impl IntoIterator<Item = Chunk>) {
        let mut spares = SPARE_CHUNKS.lock().unwrap_or_else(|p| p.into_inner());
        for mut c in chunks {
            if spares.len() >= SPARE_MAX {
                break;
            }
            c.clear();
            spares.push(c);
        }
    }
}

/// The running modelling thread: where full chunks go and where empty ones come back.
struct Worker {
    full: Sender<Chunk>,
    empty: Receiver<Chunk>,
    handle: JoinHandle<Prepared>,
}

/// The kernel thread's end of a modelling thread that prepares one instance's records (see
/// [`Prepared`]; global index 0 on: the only instance of the launch, first in its NeuronCore's
/// stream).
pub(crate) struct RecordFeed {
    chunk: Chunk,
    worker: Option<Worker>,
    /// Target and NeuronCore of the instance.
    target: Target,
    nc: usize,
    /// Records fed (the preparation is used only if it saw all the instance's records).
    fed: usize,
    /// The thread could not be started or went away: nothing more is fed.
    broken: bool,
}

impl RecordFeed {
    /// A feed for the records of the instance on NeuronCore `nc` of a launch on `target`;
    /// its thread starts with the first full chunk.
    pub(crate) fn new(target: Target, nc: usize) -> RecordFeed {
        RecordFeed {
            chunk: Chunk::spare(),
            worker: None,
            target,
            nc,
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
        c.heads.push(Head::of(r));
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
            self.worker = start(self.target, self.nc);
        }
        let Some(w) = &self.worker else {
            self.broken = true;
            return;
        };
        let next = w.empty.try_recv().unwrap_or_else(|_| Chunk::spare());
        let full = std::mem::replace(&mut self.chunk, next);
        if w.full.send(full).is_err() {
            self.broken = true;
        }
    }

    /// Ends the feed after the instance's last record: the preparation of its `records`
    /// records, or `None` when no thread ran or it did not see exactly those records (the
    /// caller then prepares them itself).
    pub(crate) fn finish(mut self, records: usize) -> Option<Prepared> {
        if self.broken || self.worker.is_none() || self.fed != records {
            return None;
        }
        if !self.chunk.heads.is_empty() {
            self.hand_over();
        }
        let w = self.worker.take()?;
        drop(w.full);
        let prep = w.handle.join().ok();
        let chunk = std::mem::take(&mut self.chunk);
        Chunk::keep(w.empty.try_iter().chain([chunk]));
        prep.filter(|p| !self.broken && p.records() == records)
    }
}

/// Starts a modelling thread for the instance on NeuronCore `nc`; `None` when the OS refuses.
fn start(target: Target, nc: usize) -> Option<Worker> {
    let (full, full_rx) = channel::<Chunk>();
    let (empty_tx, empty) = channel::<Chunk>();
    let handle = std::thread::Builder::new()
        .name("nki-model".into())
        .spawn(move || {
            let mut prep = Prepared::new(target.spec(), true);
            prep.begin_core(0, nc);
            // Ends when the feed is finished or dropped (the sender goes away).
            while let Ok(mut chunk) = full_rx.recv() {
                chunk.prepare(&mut prep);
                chunk.clear();
                let _ = empty_tx.send(chunk);
            }
            prep
        })
        .ok()?;
    Some(Worker {
        full,
        empty,
        handle,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::error::SourceLoc;
    use crate::math::AluOp;
    use crate::record::{AffinePos, BufId, DmaDims, Engine, MatmulDims, MemKind, Opcode};
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
            partitions: 128,
            free: 512,
            inputs: 2,
            in_dtype: DType::BF16,
            out_dtype: DType::F32,
            psum: true,
            contiguous: true,
            accumulate: true,
            alu: Some(AluOp::Multiply),
            reads: vec![reg(1), reg(2), reg(3), reg(4)].into(),
            writes: vec![reg(5)].into(),
            affine: AffinePos::new(&[(1, 3), (2, 7)]),
            ..Instr::new(engine, opcode, api, loc)
        };
        let dma = DmaDims {
            src: MemKind::Hbm,
            dst: MemKind::Sbuf,
            bytes: 96 * 1000,
            partitions: 96,
            start_partition: 8,
            chunk_bytes: 200,
        };
        vec![
            Instr {
                dma: Some(dma),
                ..base(Engine::Dma, Opcode::DmaCopy, "nl.load")
            },
            Instr {
                dma: Some(dma),
                ..base(Engine::Dma, Opcode::DmaTranspose, "nisa.dma_transpose")
            },
            Instr {
                matmul: Some(MatmulDims {
                    k: 128,
                    m: 96,
                    n: 512,
                    fp32: false,
                    onezero: 0,
                }),
                ..base(Engine::Tensor, Opcode::Matmul, "nisa.nc_matmul")
            },
            base(Engine::Tensor, Opcode::Transpose, "nisa.nc_transpose"),
            base(Engine::Vector, Opcode::TensorTensor, "nl.multiply"),
            base(Engine::Scalar, Opcode::Activation, "nisa.activation_reduce"),
            base(Engine::GpSimd, Opcode::TensorScalar, "nisa.tensor_scalar"),
            base(Engine::Vector, Opcode::TensorReduce, "nl.sum"),
        ]
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
            for r in &recs {
                feed.push(r);
            }
            let fed = feed.finish(recs.len()).expect("the feed's thread ran");
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
