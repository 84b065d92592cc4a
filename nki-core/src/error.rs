//! The one error type of nki-core. Every user mistake becomes an [`NkiError`] with an
//! [`ErrorKind`], an NKI-like message naming the operands and shapes, the op, the program id of
//! the instance that made it, and the kernel source line.

use std::cell::Cell;
use std::collections::HashSet;
use std::fmt;
use std::panic::Location;
use std::sync::Mutex;

thread_local! {
    /// The kernel line a front end in another language is running on this thread (see
    /// [`SourceLoc::at`]): while set, it is every op's [`SourceLoc::caller`].
    static FRONT_END_LOC: Cell<Option<SourceLoc>> = const { Cell::new(None) };
}

/// A kernel source location (captured with `#[track_caller]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub struct SourceLoc {
    /// Source file.
    pub file: &'static str,
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub column: u32,
}

impl SourceLoc {
    /// The location of the caller of the current `#[track_caller]` function chain (or, inside
    /// [`SourceLoc::at`], the location given there).
    #[track_caller]
    #[inline]
    pub fn caller() -> Self {
        if let Some(l) = FRONT_END_LOC.with(Cell::get) {
            return l;
        }
        let l = Location::caller();
        SourceLoc {
            file: l.file(),
            line: l.line(),
            column: l.column(),
        }
    }

    /// A location in `file` (a name kept once for the life of the process: `SourceLoc` holds
    /// `&'static str`, and a program names few files).
    pub fn new(file: &str, line: u32, column: u32) -> SourceLoc {
        static FILES: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
        let mut g = FILES.lock().unwrap_or_else(|p| p.into_inner());
        let files = g.get_or_insert_with(HashSet::new);
        let file = match files.get(file) {
            Some(f) => *f,
            None => {
                let f: &'static str = Box::leak(file.to_owned().into_boxed_str());
                files.insert(f);
                f
            }
        };
        SourceLoc { file, line, column }
    }

    /// Runs `f` with `self` as the kernel line of every op it calls: how a front end in
    /// another language (the `nki_rs` Python package) names its kernel's own lines in errors
    /// and profiles. Nested calls restore the outer location, also when `f` unwinds.
    pub fn at<R>(self, f: impl FnOnce() -> R) -> R {
        struct Restore(Option<SourceLoc>);
        impl Drop for Restore {
            fn drop(&mut self) {
                FRONT_END_LOC.with(|l| l.set(self.0));
            }
        }
        let _restore = Restore(FRONT_END_LOC.with(|l| l.replace(Some(self))));
        f()
    }
}

impl fmt::Display for SourceLoc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

/// What kind of mistake (or failure) an [`NkiError`] reports.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// A tile's partition dimension exceeds 128 (`err_num_partition_exceed_arch_limit`).
    PartitionLimit,
    /// A PSUM tile does not fit one 2 KiB bank per partition.
    PsumBankLimit,
    /// A TensorE operand exceeds its limit (stationary free <= 128, moving free <= 512, K <= 128).
    MatmulLimit,
    /// Element-wise operands whose shapes do not agree (or broadcast).
    ShapeMismatch,
    /// Operands with different partition counts (`err_num_partition_mismatch`).
    PartitionMismatch,
    /// A matmul whose contraction dimensions differ.
    ContractionMismatch,
    /// An access outside a tensor or tile (`err_tensor_access_out_of_bound`).
    OutOfBounds,
    /// A tile access starting at a partition the hardware cannot address for that size.
    PartitionOffset,
    /// A reduction over the partition axis.
    PartitionReduction,
    /// An operand in the wrong memory (`err_unsupported_memory`).
    WrongMemory,
    /// A dtype an instruction does not accept.
    DType,
    /// A write into a kernel input (`err_cannot_update_immutable_parameter`).
    ImmutableInput,
    /// Two program instances, or two affine_range iterations, wrote the same HBM location
    /// (`err_unexpected_output_dependencies`).
    OutputDependency,
    /// A tile or tensor read before anything wrote it.
    UninitializedRead,
    /// Live tiles exceed SBUF or PSUM capacity.
    Capacity,
    /// A malformed launch grid.
    InvalidGrid,
    /// An invalid argument (axis, range, value) to an op.
    InvalidArgument,
    /// An nl/nisa call made outside a kernel launch (`err_nki_api_outside_of_nki_kernel`).
    OutsideKernel,
    /// Values were requested from a shape-only tensor (estimate mode input).
    NoData,
    /// The kernel panicked for a reason that is not an NKI rule (e.g. a Rust index bug).
    KernelPanic,
    /// A closure the library calls for the user (a sweep's `reject_if` rule or estimate
    /// closure, a candle op's grid or shape function) panicked; the message names its role and
    /// the panic message.
    ClosurePanic,
    /// A kernel instance ran past a budget of the launch: more instruction records
    /// ([`Launch::max_records`](crate::spmd::Launch::max_records)) or more iterations of one
    /// device loop ([`Launch::max_loop_iterations`](crate::spmd::Launch::max_loop_iterations))
    /// than it allows; the message names the loop and its line.
    Budget,
    /// A kernel output the launch never wrote (`err_tensor_output_not_written_to`).
    OutputNotWritten,
    /// A kernel launched from inside a kernel body (NKI rejects nested launches).
    NestedLaunch,
    /// A file could not be written.
    Io,
    /// Devices of a mesh launch wait on semaphores no pending operation can ever signal.
    Deadlock,
    /// A mesh synchronisation mistake: a semaphore left non-zero at kernel end, a remote copy
    /// never waited on, a copy started or waited twice.
    Synchronization,
    /// A device id or mesh coordinate outside the mesh.
    InvalidDevice,
    /// The host could not allocate the values of a tensor of a user-given size (the message
    /// names the shape and the bytes asked for).
    HostMemory,
    /// A tensor placed with `address=` overlaps another live placed tensor, or a PSUM tensor
    /// does not start a bank.
    AddressOverlap,
}

/// An error from nki-core.
#[derive(Clone, Debug, PartialEq)]
pub struct NkiError {
    kind: ErrorKind,
    op: &'static str,
    message: String,
    program_id: Option<Vec<usize>>,
    loc: Option<SourceLoc>,
}

impl NkiError {
    /// A new error of `kind` raised by `op` with a specific message.
    pub fn new(kind: ErrorKind, op: &'static str, message: impl Into<String>) -> Self {
        NkiError {
            kind,
            op,
            message: message.into(),
            program_id: None,
            loc: None,
        }
    }

    /// Attaches the program id of the instance that raised it (kept if already set).
    pub fn with_program_id(mut self, pid: &[usize]) -> Self {
        if self.program_id.is_none() {
            self.program_id = Some(pid.to_vec());
        }
        self
    }

    /// Attaches the kernel source location (kept if already set).
    pub fn with_loc(mut self, loc: SourceLoc) -> Self {
        if self.loc.is_none() {
            self.loc = Some(loc);
        }
        self
    }

    /// The kind of mistake.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The op that raised it (`load`, `nc_matmul`, `launch`, ...).
    pub fn op(&self) -> &'static str {
        self.op
    }

    /// The specific message (without op, program id and location).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The program id of the failing instance, if the error came from inside a kernel.
    pub fn program_id(&self) -> Option<&[usize]> {
        self.program_id.as_deref()
    }

    /// The kernel source location, if known.
    pub fn location(&self) -> Option<SourceLoc> {
        self.loc
    }
}

impl fmt::Display for NkiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.op, self.message)?;
        if let Some(p) = &self.program_id {
            write!(f, " (program id {p:?}")?;
            if let Some(l) = &self.loc {
                write!(f, ", at {l}")?;
            }
            write!(f, ")")?;
        } else if let Some(l) = &self.loc {
            write!(f, " (at {l})")?;
        }
        Ok(())
    }
}

impl std::error::Error for NkiError {}

/// Result alias used across nki-core.
pub type Result<T, E = NkiError> = std::result::Result<T, E>;

/// `Ok(())` when `ok`, else the `kind` error of `op` whose message `message` builds (only on
/// failure).
#[inline]
pub(crate) fn ensure(
    ok: bool,
    kind: ErrorKind,
    op: &'static str,
    message: impl FnOnce() -> String,
) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(NkiError::new(kind, op, message()))
    }
}

impl From<std::io::Error> for NkiError {
    fn from(e: std::io::Error) -> Self {
        NkiError::new(ErrorKind::Io, "io", e.to_string())
    }
}
