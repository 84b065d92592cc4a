//! Hardware targets: one table of constants per NeuronCore generation. Every constant the
//! language checks or the timing model uses lives here, with its source beside it
//! (keys refer to docs/reference/hardware.md: S1 = Trn/Inf2 arch guide, S2 = Trn2 arch guide,
//! S3 = Trn3 arch guide, S5/S6 = DMA guides, S13 = ISA cost docstrings, S15 = profiler schema,
//! KLR = `nl.tile_size` values).

use crate::record::Engine;
use std::cell::Cell;
use std::fmt;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Mutex;

/// A NeuronCore generation to check and model against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, serde::Serialize)]
pub enum Target {
    /// Trainium1 / Inferentia2: NeuronCore-v2.
    Trn1,
    /// Trainium2: NeuronCore-v3 (the default; LNC=2 puts two cores on one HBM stack).
    #[default]
    Trn2,
    /// Trainium3: NeuronCore-v4.
    Trn3,
}

/// The constants of one target. See [`Target::spec`].
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct TargetSpec {
    /// Short name ("trn1", ...).
    pub name: &'static str,
    /// TensorE clock in GHz \[E S1/S2/S3\].
    pub tensor_ghz: f64,
    /// VectorE clock in GHz \[E S1/S2/S3\].
    pub vector_ghz: f64,
    /// ScalarE clock in GHz \[E S1/S2/S3\].
    pub scalar_ghz: f64,
    /// GpSimdE clock in GHz \[E S1/S2/S3\].
    pub gpsimd_ghz: f64,
    /// Profiler "NeuronCore base clock" in GHz \[E S15\].
    pub base_ghz: f64,
    /// Processing-element rows x columns of the TensorE array \[E S1\].
    pub pe_array: (u32, u32),
    /// Maximum partitions of an on-chip tile (`tile_size.pmax`) \[KLR\].
    pub pmax: usize,
    /// Matmul stationary free-dim limit (`gemm_stationary_fmax`) \[KLR\].
    pub gemm_stationary_fmax: usize,
    /// Matmul moving free-dim limit (`gemm_moving_fmax`) \[KLR\].
    pub gemm_moving_fmax: usize,
    /// `bn_stats` free-dim limit \[KLR\].
    pub bn_stats_fmax: usize,
    /// Usable SBUF bytes per partition (`total_available_sbuf_size`) \[KLR\].
    pub sbuf_bytes_per_partition: usize,
    /// PSUM banks per partition \[E S1\].
    pub psum_banks: usize,
    /// Bytes per PSUM bank per partition \[E S1\].
    pub psum_bank_bytes: usize,
    /// NeuronCores per device \[E S1/S2/S3\].
    pub ncs_per_device: usize,
    /// DMA engines per NeuronCore \[E S1, S6\].
    pub dma_engines: usize,
    /// DMA queues per engine \[E S6\].
    pub dma_queues_per_engine: usize,
    /// Partitions each DMA engine serves in a 128-partition transfer (128 / 16) \[E S6\].
    pub dma_partitions_per_engine: usize,
    /// Practical DMA bandwidth of one engine in bytes/ns (table "BW/Engine") \[E S5, S6\].
    pub dma_engine_bytes_per_ns: f64,
    /// Shortest duration of one DMA, in ns: a single transfer takes
    /// `max(dma_min_transfer_ns, bytes_per_engine / dma_engine_bytes_per_ns)`. It is a latency,
    /// not an occupancy: DMAs queued behind each other pipeline it, so many small DMAs still
    /// reach the engines' bandwidth. [D from the S6 efficiency chart: 8 partitions x 2 KiB at
    /// 23 B/ns is 81 % efficient, 8 x 1 KiB 42 % => ~850 ns on trn2; no trn1/trn3 figure, same
    /// value assumed.]
    pub dma_min_transfer_ns: f64,
    /// Delay from the moment a DMA's inputs are ready to its first byte moving, in ns
    /// (descriptor generation, queue trigger and semaphore). Pure latency, pipelined across
    /// queued DMAs. \[A S5 "~1300 ns cross-engine".\]
    pub dma_fixed_latency_ns: f64,
    /// Time, in ns, every DMA engine is occupied by one DMA instruction however small it is:
    /// descriptor processing plus the completion write every one of the 16 engines makes to
    /// the DMA's semaphore (idle engines included) \[E S6\]. Tiny DMAs therefore serialise at
    /// this rate instead of pipelining. trn1: FITTED on calibration §3a `vector_add_stream`
    /// FREE_DIM=2 (300 DMAs of 8 bytes per partition row in 53 µs, 127 ns each beside the
    /// launch overhead): 120 ns. trn2/trn3: no tiny-DMA measurement; trn1's 168 cycles of the
    /// 1.4 GHz base clock taken at the 1.2 GHz base clock, 140 ns \[D\] (within the 216 ns
    /// bound §3b's transpose allows: 129 DMAs active 27.9 µs in all).
    pub dma_engine_min_ns: f64,
    /// Fraction of an engine's bandwidth a DMA whose HBM side is gathered from separate runs
    /// reaches when its descriptors are short: one descriptor is one contiguous run of the HBM
    /// side, capped by a partition row of the on-chip side (`timing::dma`'s
    /// `dma_descriptor_bytes`), and descriptors of at most `dma_short_run_bytes` move at this
    /// fraction of `dma_engine_bytes_per_ns`. trn1: FITTED on calibration §1 (the four matmul
    /// tutorial stages gather rows of 256 B, 1 KiB, 2 KiB and 4 KiB and move their bytes at
    /// 102–106 GB/s whatever the row length, against 16 x 17 B/ns = 272 GB/s: 0.386). trn2:
    /// FITTED on §3b (the 1024² transpose's 512 B rows moved 8.4 MB in 27.9 µs of DMA
    /// activity: 300 GB/s of 368, 0.82). trn3: no figure, trn2's value assumed \[A\].
    pub dma_short_run_efficiency: f64,
    /// Longest descriptor, in bytes, that moves at `dma_short_run_efficiency`: the longest
    /// row its fit covers. trn1: 4 KiB (§1's fully optimised stage, `[128, 2048]` bf16 tiles
    /// of lhsT, still at 105 GB/s). trn2/trn3: 1 KiB (the fit's 512 B rows; §3b's
    /// `vector_add_stream` FREE_DIM=1000 moves 4000 B rows as fast as FREE_DIM=2000's
    /// contiguous blocks, 9.32 against 9.45 µs of DMA activity, so 4 KiB rows are full-rate).
    pub dma_short_run_bytes: u64,
    /// Shortest descriptor, in bytes, that moves at the engine's full rate; between
    /// `dma_short_run_bytes` and this length the efficiency rises linearly in log2 of the
    /// length (assumed \[A\]: no public point in between). trn2/trn3: 4 KiB, where the DMA
    /// guide's throughput saturates ("≥ 4 KiB per partition" to sustain peak, 97 % of it on
    /// the chart \[E S5, S6\]) and the runtime's DMA packet size ("the empirically determined
    /// minimum for DMA/HBM efficiency" \[E S19\]). trn1: no public gather longer than §1's
    /// 4 KiB rows; 16 KiB assumed \[A\] (trn2's four-fold span above its short runs).
    pub dma_full_run_bytes: u64,
    /// Width, in bytes, of the ECC-protected word of the memories a DMA writes; a write
    /// narrower than a word is a read-modify-write. SBUF and HBM both carry ECC (neuron-monitor's
    /// `sram_ecc_corrected` / `mem_ecc_corrected` counters, aws-neuron-sdk
    /// `tools/neuron-sys-tools/neuron-monitor-user-guide.rst` \[E\]); the word width is not
    /// published: 8 B, SECDED over 64-bit words, the usual width \[A\].
    pub dma_write_word_bytes: u64,
    /// Extra time, in ns, a DMA engine is held by a DMA whose descriptors are narrower than
    /// `dma_write_word_bytes`: its completion semaphore waits for the write receipts, and a
    /// partial-word write is only acknowledged after the memory's read-modify-write. Paid once
    /// per DMA on each engine that moves data (the engine pipelines its writes: one row or
    /// eight cost the same). trn1: FITTED on calibration §3a `vector_add_tiled` (4-byte rows:
    /// ROW_CHUNK=1's 76,800 DMAs at 357 ns each and ROW_CHUNK=128's 600 at 318 ns, against
    /// the 120 ns of 8-byte rows): 220 ns, -4.7 % / +7.2 % on the two rows. trn2/trn3: no
    /// figure, the same memory round trip assumed \[A\].
    pub dma_partial_write_ns: f64,
    /// Bandwidth of one HBM stack in bytes/ns, shared by the `ncs_per_hbm_stack` NeuronCores on
    /// it. trn1: 820 GB/s / 2 stacks \[E S1\]; trn2: 2.9 TB/s / 4 stacks \[E S10, D\];
    /// trn3: 4.9 TB/s / 4 stacks \[E S11, D\].
    pub hbm_bytes_per_ns: f64,
    /// Fraction of DMA throughput a transposing DMA reaches. trn2/trn3: "up to 90 %" HBM->SBUF
    /// \[E S2\]; trn1: "much lower DMA bandwidth" \[E S4\] with no figure, 25 % assumed \[A\].
    pub dma_transpose_efficiency: f64,
    /// NeuronCores sharing one HBM stack (and its bandwidth): 2 on trn2 \[E S12\].
    pub ncs_per_hbm_stack: usize,
    /// TensorE MultiplyMoving floor, cycles (`MM_INIT_LATENCY`): MM = max(min(64, N_stat), N_mov)
    /// \[E S1, S13\].
    pub mm_init_cycles: u64,
    /// Fewest cycles one MultiplyMoving (a matmul or a TensorE transpose) occupies TensorE,
    /// whatever its tile: reduced tiles cost nearly a full one. trn2: FITTED on calibration
    /// §6b: 2,048 matmuls in four sections of 512 (M = 32, N = 64, K = 32, full tiles) ran at
    /// 30.8 TFLOPS over TensorE-active time, 453 µs, against 445 µs for 2,048 full
    /// `128 x 128 x 512` matmuls; the documented `max(min(64, N_stat), N_mov)` gives the N = 64
    /// section 64 cycles (342 µs in all, −24.5 %). The full tile's 512 cycles as the floor
    /// give 437 µs for both (−3.6 %, −1.8 %) and leave full tiles as documented. trn3: trn2's
    /// assumed \[A\]; trn1: no figure, the documented formula (0) \[A\].
    pub mm_min_cycles: u64,
    /// TensorE slowdown for fp32 matmul inputs (4 passes) \[E S1, S13\].
    pub fp32_matmul_factor: u64,
    /// TensorE slowdown for fp32 transposes: 4 on NC-v2 (a plain fp32 matmul), 2 on NC-v3+
    /// ("transpose mode ... 2x faster for FP32") \[E S2\].
    pub fp32_transpose_factor: u64,
    /// LoadStationary speed-up over a MultiplyMoving of the same free size: LS = N_stat / 4
    /// cycles \[E S1 "up to 4x", S4\].
    pub ls_speedup: u64,
    /// TensorE utilisation limit when it starts from idle (throttling, dI/dt protection):
    /// 50 % on trn2/trn3, ramping to 100 % over `pe_throttle_ramp_ns` \[E S16\]; 1.0 = none
    /// (trn1: not documented for NC-v2).
    pub pe_throttle_start: f64,
    /// Time over which the TensorE limit ramps to 100 %, and the window in which falling
    /// below 50 % utilisation re-engages it ("~3 us") \[A S16\].
    pub pe_throttle_ramp_ns: f64,
    /// Minimum initiation interval of Vector/Scalar instructions, cycles (`MIN_II`) \[E S13\].
    pub min_ii: u64,
    /// GpSimd instruction start overhead, cycles (`GPSIMD_START`) \[E S13\].
    pub gpsimd_start: u64,
    /// Time, in ns, a hardware-DGE DMA instruction occupies the Sync or Scalar engine that
    /// triggers the DGE block: "approximately 600 ns" per instruction (NKI docs,
    /// deep-dives/nki-dge.rst, for trn2). trn1 has no hardware DGE (a `dge_mode=hwdge` DMA is
    /// an error there); trn3: no figure, trn2's assumed \[A\]. Software DGE costs GpSimdE
    /// its instruction start-up plus one cycle per descriptor (the GpSimd rule `150 + N`
    /// applied to descriptors; no public figure) \[A\].
    pub hwdge_ns: f64,
    /// Total bandwidth, bytes per ns, of GpSimdE's integrated DMA engines: each of its 8
    /// processors has one, 307 GB/s in total (trn2 architecture guide \[E S2\],
    /// hardware.md §1). `nisa::sendrecv` moves its tile through them with
    /// `DmaEngine::GpsimdDma` (0.7 `dma_engine.gpsimd_dma`, "for low-latency SB-to-SB swaps in
    /// LNC=2"). 0 on trn1 (no logical NeuronCores; the page is for trn2 and trn3); trn3 takes
    /// trn2's figure \[A\].
    pub gpsimd_dma_bytes_per_ns: f64,
    /// Static cycles a Vector/Scalar/GpSimd instruction with a PSUM operand adds to its
    /// duration, derived from the architecture guide's two documented overheads \[E S1\]:
    /// starting an SBUF/PSUM access "costs ≈ 60 cycles of static overhead", and "a static
    /// overhead of ~100 cycles" comes on top when each instruction depends on the previous
    /// one, as a PSUM read-out depends on the matmul that wrote it: 60 + 100 = 160 cycles
    /// \[D\]. Checked on calibration §6a (not fitted there): the ladder's `tensor_copy` of
    /// `[128, 512]` fp32 PSUM to bf16 on VectorE took 687 ns each (176 µs for 256 in V0, 174
    /// and 172 µs in V1 and V2), 512 cycles (533 ns) of elements at trn2's 0.96 GHz plus 148
    /// cycles; 160 gives 700 ns (+1.8 / +3.0 / +4.2 %). §3b's transpose (64 `[128, 128]` fp32
    /// PSUM copies on ScalarE, 16.3 µs active, 255 ns each): 64 x (128 + 160) cycles at
    /// 1.2 GHz = 15.4 µs (−5.8 %; 6.8 µs without it). The same size as the static part of
    /// §2's dependent 1-element activations (a 159 ns duration at 1.4 GHz, 223 cycles, of
    /// which 64 are `MIN_II`) \[E S23\]. Taken for every target and for PSUM writes too \[A\].
    pub psum_access_cycles: u64,
    /// Minimum II of dynamic-offset copies, cycles (`MIN_II_DYNAMIC`) \[E S13\].
    pub min_ii_dynamic: u64,
    /// Extra cycles an instruction waits when it depends on an earlier instruction's result
    /// (pipeline drain + semaphore). Fitted once: 264 - 64 = 200 ScalarE cycles from the trn1
    /// back-to-back dependent activation measurement \[E S4/S23\].
    pub dependency_latency_cycles: u64,
    /// VectorE performance modes (2x/4x for bf16/fp16) exist \[E S2\].
    ///
    /// Tensor indirection (NeuronCore-v4 `tensor.indirect(index)`, an operand of the compute
    /// instructions) has no documented cost: an instruction with an indirect operand is
    /// costed as one with a strided one (not `contiguous`: VectorE's 2x mode instead of 4x)
    /// over its `num_elem` elements per partition, reading the index as a per-partition
    /// operand, its dependencies the whole indexed view and the index \[A\].
    pub vector_perf_modes: bool,
    /// Fixed time around every kernel launch, in ns: the pre- and postamble neuron-profile
    /// reports as `total_time - total_active_time` \[E S15\]. trn2: FITTED on calibration §3b
    /// (12.4, 12.76 and 13.2 µs in the three profiles: mean 12.8 µs). trn1: FITTED on §3a (the
    /// three few-DMA `vector_add_stream` rows leave 14.7–16 µs beside their instructions:
    /// 15 µs). trn3: no figure, trn2's value assumed \[A\].
    pub launch_overhead_ns: f64,
    /// Cost, in ns, of the scheduling barrier at each iteration boundary of a device loop
    /// (`nl.fori_loop`, `nl.while_loop`): every engine waits for the iteration's last record
    /// to end, then the next iteration starts this much later. trn2: "`nl.fori_loop` inserts
    /// scheduling barriers at iteration boundaries (~9 µs/iter)", with no cross-iteration
    /// prefetching by the compiler \[E nki-library `dynamic_fa_design_spec.md`,
    /// calibration.md §6d\]. trn1 and trn3: no figure, trn2's assumed \[A\].
    pub device_loop_barrier_ns: f64,
    /// The same barrier when the iteration is software-pipelined: it loads (a DMA into an
    /// on-chip tile) data that nothing later in the same iteration reads, i.e. the next
    /// iteration's input, so that load overlaps the iteration's compute. trn2: double
    /// buffering "reducing per-tile overhead from ~9 µs to ~4 µs" \[E same source, §6d\];
    /// trn1 and trn3: trn2's assumed \[A\].
    pub device_loop_pipelined_barrier_ns: f64,
    /// NeuronCore generation (NKI `nc_version`: gen2 = trn1, gen3 = trn2, gen4 = trn3), as
    /// `nisa::get_nc_version()` reports it inside a kernel \[E SDK `nki.isa.nc_version`\].
    pub nc_version: u8,
    /// Largest moving free size of one `nc_matmul` writing a float32 `dst`: 512 on NC-v2/v3
    /// ("matching the maximum number of float32 elements per PSUM bank"), 4096 on NC-v4
    /// ("matching the size of 8x PSUM banks") \[E SDK `nki.isa.nc_matmul`, "Tile size"\].
    pub matmul_moving_fmax_fp32_dst: usize,
    /// Largest moving free size of one `nc_matmul` writing a bfloat16 `dst`, or `None` where
    /// `dst` must be float32 (NC-v2/v3); 8192 on NC-v4 \[E SDK `nki.isa.nc_matmul`, "Data
    /// types" and "Tile size"\].
    pub matmul_moving_fmax_bf16_dst: Option<usize>,
    /// Most PSUM banks one TensorE instruction's destination may span, and one PSUM tile of a
    /// Beta-1 kernel: 1 on NC-v2/v3 (an accumulation group lives in one 2 KiB bank; Beta 1:
    /// "a PSUM tile cannot cross a bank"); 8 on NC-v4, where a matmul's `dst` may cover "the
    /// entire PSUM" \[E SDK `nki.isa.nc_matmul`\]. An NKI 0.7 PSUM tensor may take several
    /// whole banks on every target (tuned trn2 matmul kernels keep their accumulators so,
    /// each matmul writing within one bank).
    pub psum_tile_max_banks: usize,
    /// ScalarE runs `tensor_scalar` / `tensor_copy` with a 2x mode for bf16/fp16 data
    /// (NC-v4: "256 BF16/FP16/FP8 elements per cycle, 128 other" and "a 2x BF16/FP16 mode")
    /// \[E ARCH3 trainium3_arch, ScalarE\]; false on NC-v2/v3 (no ScalarE perf mode).
    pub scalar_perf_mode: bool,
    /// VectorE performance modes also apply to FP8 data (NC-v4: "512 elements/cycle
    /// BF16/FP16/FP8, 256 other dtypes") \[E ARCH3\]; NC-v3's modes cover bf16/fp16 only.
    pub vector_perf_mode_fp8: bool,
    /// Throughput of VectorE `exponential` relative to its element count: NC-v4 runs it at
    /// "4x ScalarE activation(exp)" \[E ARCH3\], i.e. N/4 VectorE cycles (ScalarE's exp is
    /// N cycles); 0 where the instruction does not exist (NC-v2/v3).
    pub exponential_elems_per_cycle: u64,
    /// MX matmul (`nc_matmul_mx`) exists: NC-v4 only, "4x BF16 throughput" at the same cycles
    /// as a bf16 matmul of the same moving free size (K = 4 x 128 per instruction) \[E ARCH3,
    /// SDK `nki.isa.nc_matmul_mx`\].
    pub mx_matmul: bool,
}

impl TargetSpec {
    /// Clock of `engine` in GHz (the DMA engines and the Sync engine run on the profiler's
    /// base clock).
    pub fn engine_ghz(&self, engine: Engine) -> f64 {
        match engine {
            Engine::Tensor => self.tensor_ghz,
            Engine::Vector => self.vector_ghz,
            Engine::Scalar => self.scalar_ghz,
            Engine::GpSimd => self.gpsimd_ghz,
            Engine::Sync | Engine::Dma => self.base_ghz,
        }
    }
}

impl Target {
    /// All targets.
    pub const ALL: [Target; 3] = [Target::Trn1, Target::Trn2, Target::Trn3];

    /// The constants of this target: its built-in table ([`Target::built_in_spec`]), or
    /// the table standing in for it while a [`with_target_specs`] call runs.
    pub fn spec(self) -> &'static TargetSpec {
        SPEC_STAND_INS
            .get(self)
            .unwrap_or_else(|| self.built_in_spec())
    }

    /// The built-in constants of this target, whatever [`with_target_specs`] overrides.
    pub fn built_in_spec(self) -> &'static TargetSpec {
        match self {
            Target::Trn1 => &TRN1,
            Target::Trn2 => &TRN2,
            Target::Trn3 => &TRN3,
        }
    }

    /// Short name ("trn1", "trn2", "trn3").
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// Parses "trn1" / "trn2" / "trn3" (case-insensitive; "inf2" = trn1).
    pub fn parse(s: &str) -> Option<Target> {
        match s.to_ascii_lowercase().as_str() {
            "trn1" | "inf2" | "gen2" => Some(Target::Trn1),
            "trn2" | "gen3" => Some(Target::Trn2),
            "trn3" | "gen4" => Some(Target::Trn3),
            _ => None,
        }
    }
}

/// Tables of type `T` standing in for each target's built-in ones while a scoped override
/// runs ([`with_target_specs`], and `mesh::with_link_specs` for the link constants).
/// Reading one is one atomic load; a table put in place is kept for the rest of the process,
/// so the `&'static` references handed out stay valid.
pub(crate) struct StandIns<T: 'static> {
    /// The table standing in for each target (indexed by `Target as usize`), null when none.
    slots: [AtomicPtr<T>; 3],
    /// Every table put in place so far (an equal one is reused, so a calibration search
    /// revisiting a point adds nothing).
    tables: Mutex<Vec<&'static T>>,
}

/// Serialises scoped overrides of different threads (a nested one on the thread that holds
/// it does not take it again).
static OVERRIDE_SCOPE: Mutex<()> = Mutex::new(());

thread_local! {
    /// True on the thread inside a scoped override.
    static IN_SCOPE: Cell<bool> = const { Cell::new(false) };
}

impl<T: Clone + PartialEq + Sync + 'static> StandIns<T> {
    /// No table stands in for any target.
    pub(crate) const fn new() -> StandIns<T> {
        StandIns {
            slots: [
                AtomicPtr::new(std::ptr::null_mut()),
                AtomicPtr::new(std::ptr::null_mut()),
                AtomicPtr::new(std::ptr::null_mut()),
            ],
            tables: Mutex::new(Vec::new()),
        }
    }

    /// The table standing in for `target`'s now, if any.
    #[inline]
    pub(crate) fn get(&self, target: Target) -> Option<&'static T> {
        let p = self.slots[target as usize].load(Ordering::Acquire);
        // SAFETY: every non-null pointer in `slots` comes from `Box::leak` in `intern` and is
        // never freed nor written, so it is valid for 'static.
        (!p.is_null()).then(|| unsafe { &*p })
    }

    /// `table`, kept for the rest of the process (an equal one kept before is reused).
    fn intern(&self, table: &T) -> &'static T {
        let mut tables = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = tables.iter().find(|t| **t == table) {
            return t;
        }
        let t: &'static T = Box::leak(Box::new(table.clone()));
        tables.push(t);
        t
    }

    /// Runs `f` with each pair's table standing in for its target's, then puts the previous
    /// ones back (also when `f` unwinds). See [`with_target_specs`].
    pub(crate) fn with<R>(&'static self, pairs: &[(Target, T)], f: impl FnOnce() -> R) -> R {
        /// Puts the previous tables back (and leaves the scope) when dropped.
        struct Restore<T: 'static> {
            slots: &'static [AtomicPtr<T>; 3],
            previous: [*mut T; 3],
            outermost: bool,
        }
        impl<T> Drop for Restore<T> {
            fn drop(&mut self) {
                for (slot, p) in self.slots.iter().zip(self.previous) {
                    slot.store(p, Ordering::Release);
                }
                if self.outermost {
                    IN_SCOPE.with(|s| s.set(false));
                }
            }
        }
        let outermost = !IN_SCOPE.with(Cell::get);
        let _lock = outermost.then(|| OVERRIDE_SCOPE.lock().unwrap_or_else(|e| e.into_inner()));
        IN_SCOPE.with(|s| s.set(true));
        let _restore = Restore {
            slots: &self.slots,
            previous: std::array::from_fn(|i| self.slots[i].load(Ordering::Acquire)),
            outermost,
        };
        for (target, table) in pairs {
            let t = self.intern(table) as *const T as *mut T;
            self.slots[*target as usize].store(t, Ordering::Release);
        }
        f()
    }
}

/// The tables standing in for the built-in [`TargetSpec`]s.
static SPEC_STAND_INS: StandIns<TargetSpec> = StandIns::new();

/// Runs `f` with each `(target, spec)` pair's table standing in for that target's built-in
/// constants: every [`Target::spec`] call of the process (on any thread: every launch's
/// checks and timing model) returns it until `f` returns or unwinds, when the tables in
/// place before come back. Meant for calibration studies (the `calibration` example's
/// `--cross-validate` refits the fitted constants with it): a launch on another thread
/// while `f` runs is costed with the stand-in too, and calls from different threads take
/// turns. Nested calls on one thread override on top of each other. Each distinct table
/// stays allocated for the rest of the process (equal tables are shared). Without a call,
/// [`Target::spec`] costs one atomic load more than reading the built-in table.
///
/// ```
/// use nki_core::{with_target_specs, Target};
/// let mut slow = Target::Trn2.spec().clone();
/// slow.launch_overhead_ns *= 2.0;
/// let doubled = with_target_specs(&[(Target::Trn2, slow)], || Target::Trn2.spec().launch_overhead_ns);
/// assert_eq!(doubled, 2.0 * Target::Trn2.spec().launch_overhead_ns);
/// ```
pub fn with_target_specs<R>(specs: &[(Target, TargetSpec)], f: impl FnOnce() -> R) -> R {
    SPEC_STAND_INS.with(specs, f)
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Trainium1 / Inferentia2 (NeuronCore-v2).
pub static TRN1: TargetSpec = TRN1_SPEC;

/// trn1's table as a constant, so that [`TRN2`] can start from it.
const TRN1_SPEC: TargetSpec = TargetSpec {
    name: "trn1",
    tensor_ghz: 2.8,
    vector_ghz: 1.12,
    scalar_ghz: 1.4,
    gpsimd_ghz: 1.4,
    base_ghz: 1.4,
    pe_array: (128, 128),
    pmax: 128,
    gemm_stationary_fmax: 128,
    gemm_moving_fmax: 512,
    bn_stats_fmax: 512,
    sbuf_bytes_per_partition: 180_224,
    psum_banks: 8,
    psum_bank_bytes: 2048,
    ncs_per_device: 2,
    dma_engines: 16,
    dma_queues_per_engine: 16,
    dma_partitions_per_engine: 8,
    dma_engine_bytes_per_ns: 17.0,
    dma_min_transfer_ns: 850.0,
    dma_fixed_latency_ns: 1300.0,
    // FITTED on calibration §3a and §1; see the fields' docs.
    dma_engine_min_ns: 120.0,
    dma_short_run_efficiency: 0.386,
    dma_short_run_bytes: 4096,
    dma_full_run_bytes: 16384,
    dma_write_word_bytes: 8,
    dma_partial_write_ns: 220.0,
    hbm_bytes_per_ns: 410.0,
    dma_transpose_efficiency: 0.25,
    ncs_per_hbm_stack: 1,
    mm_init_cycles: 64,
    mm_min_cycles: 0,
    fp32_matmul_factor: 4,
    fp32_transpose_factor: 4,
    ls_speedup: 4,
    pe_throttle_start: 1.0,
    pe_throttle_ramp_ns: 3000.0,
    min_ii: 64,
    gpsimd_start: 150,
    hwdge_ns: 600.0,
    gpsimd_dma_bytes_per_ns: 0.0,
    min_ii_dynamic: 600,
    psum_access_cycles: 160,
    dependency_latency_cycles: 200,
    vector_perf_modes: false,
    launch_overhead_ns: 15_000.0,
    device_loop_barrier_ns: 9_000.0,
    device_loop_pipelined_barrier_ns: 4_000.0,
    nc_version: 2,
    matmul_moving_fmax_fp32_dst: 512,
    matmul_moving_fmax_bf16_dst: None,
    psum_tile_max_banks: 1,
    scalar_perf_mode: false,
    vector_perf_mode_fp8: false,
    exponential_elems_per_cycle: 0,
    mx_matmul: false,
};

/// Trainium2 (NeuronCore-v3). The fields listed in its table are trn2's own figures; every
/// other field has the same value as on trn1 (each field's doc names its source).
pub static TRN2: TargetSpec = TRN2_SPEC;

/// trn2's table as a constant, so that [`TRN3`] can start from it.
const TRN2_SPEC: TargetSpec = TargetSpec {
    name: "trn2",
    tensor_ghz: 2.4,
    vector_ghz: 0.96,
    scalar_ghz: 1.2,
    gpsimd_ghz: 1.2,
    base_ghz: 1.2,
    sbuf_bytes_per_partition: 212_984,
    ncs_per_device: 8,
    dma_engine_bytes_per_ns: 23.0,
    // Derived from trn1's fit and FITTED on calibration §3b; see the fields' docs.
    dma_engine_min_ns: 140.0,
    dma_short_run_efficiency: 0.82,
    dma_short_run_bytes: 1024,
    dma_full_run_bytes: 4096,
    hbm_bytes_per_ns: 725.0,
    dma_transpose_efficiency: 0.9,
    ncs_per_hbm_stack: 2,
    fp32_transpose_factor: 2,
    // FITTED on calibration §6b; see the field's doc.
    mm_min_cycles: 512,
    pe_throttle_start: 0.5,
    vector_perf_modes: true,
    launch_overhead_ns: 12_800.0,
    nc_version: 3,
    gpsimd_dma_bytes_per_ns: 307.0,
    ..TRN1_SPEC
};

/// Trainium3 (NeuronCore-v4). The fields listed here are trn3's own figures (each field's
/// doc names its source); every other field is **borrowed from trn2** for want of a published
/// trn3 figure [A]: the DMA fits (`dma_engine_min_ns`, `dma_short_run_efficiency`, `dma_short_run_bytes`,
/// `dma_full_run_bytes`,
/// `dma_partial_write_ns`, `dma_min_transfer_ns`, `dma_fixed_latency_ns`,
/// `dma_transpose_efficiency`), `launch_overhead_ns`, `hwdge_ns`, `gpsimd_dma_bytes_per_ns`,
/// `base_ghz`, the engine
/// clocks other than VectorE's, the TensorE throttle and the instruction overheads.
pub static TRN3: TargetSpec = TargetSpec {
    name: "trn3",
    vector_ghz: 1.2,
    sbuf_bytes_per_partition: 245_752,
    dma_engine_bytes_per_ns: 33.0,
    hbm_bytes_per_ns: 1225.0,
    nc_version: 4,
    matmul_moving_fmax_fp32_dst: 4096,
    matmul_moving_fmax_bf16_dst: Some(8192),
    psum_tile_max_banks: 8,
    scalar_perf_mode: true,
    vector_perf_mode_fp8: true,
    exponential_elems_per_cycle: 4,
    mx_matmul: true,
    ..TRN2_SPEC
};

#[cfg(test)]
mod tests {
    use super::*;

    // The mechanism on tables of its own: overriding the real targets here would change the
    // constants under the other unit tests running beside these.
    static NUMBERS: StandIns<u64> = StandIns::new();

    fn number(t: Target) -> u64 {
        NUMBERS.get(t).copied().unwrap_or(t as u64)
    }

    #[test]
    fn a_stand_in_is_seen_on_every_thread_nests_and_the_built_in_comes_back() {
        let seen = NUMBERS.with(&[(Target::Trn1, 10)], || {
            let nested = NUMBERS.with(&[(Target::Trn2, 20), (Target::Trn1, 11)], || {
                (number(Target::Trn1), number(Target::Trn2))
            });
            let other_thread = std::thread::spawn(|| number(Target::Trn1)).join().unwrap();
            (
                nested,
                other_thread,
                number(Target::Trn1),
                number(Target::Trn2),
            )
        });
        assert_eq!(seen, ((11, 20), 10, 10, 1));
        assert_eq!(Target::ALL.map(number), [0, 1, 2]);
        // An equal table is the one kept before.
        let a = NUMBERS.with(&[(Target::Trn3, 30)], || {
            NUMBERS.get(Target::Trn3).unwrap() as *const u64
        });
        let b = NUMBERS.with(&[(Target::Trn3, 30)], || {
            NUMBERS.get(Target::Trn3).unwrap() as *const u64
        });
        assert_eq!(a, b);
    }

    #[test]
    fn a_panicking_closure_puts_the_built_in_back() {
        // Its own tables: the test above checks `NUMBERS` outside its overrides.
        static OTHERS: StandIns<u64> = StandIns::new();
        let r = std::panic::catch_unwind(|| OTHERS.with(&[(Target::Trn3, 5)], || panic!("inside")));
        assert!(r.is_err());
        assert_eq!(OTHERS.get(Target::Trn3), None);
        // The scope is free again (a poisoned lock is taken over).
        assert_eq!(OTHERS.with(&[], || 3), 3);
    }

    #[test]
    fn without_an_override_spec_is_the_built_in_table() {
        for t in Target::ALL {
            assert!(std::ptr::eq(t.spec(), t.built_in_spec()));
        }
    }
}
