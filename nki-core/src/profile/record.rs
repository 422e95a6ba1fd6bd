//! What the emulator records about each instruction when a launch is profiled:
//! the unit that runs it, its operands (dtype, shape, bytes, the storage region
//! it reads or overwrites) and, for barriers and collectives, who it waits for.

use crate::emulator::memory::{Lease, OnChip};
use crate::isa::Engine;
use crate::tensor::Layout;
use crate::{Buffer, Dtype, Tensor};

/// A unit of a NeuronCore that runs instructions from its own in-order queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Unit {
    /// Tensor Engine (PE array): matmuls and PE transposes.
    Tensor,
    /// Vector Engine (DVE).
    Vector,
    /// Scalar Engine (ACT).
    Scalar,
    /// GpSimd Engine (POOL).
    GpSimd,
    /// Sync Engine (SP): barriers and register moves.
    Sync,
    /// The core's DMA queues (16 DMA engines).
    Dma,
    /// Collective transfers over the device links.
    Collective,
}

impl Unit {
    /// Every unit, in report order.
    pub const ALL: [Unit; 7] = [Unit::Tensor, Unit::Vector, Unit::Scalar, Unit::GpSimd, Unit::Sync, Unit::Dma, Unit::Collective];

    /// The unit's name in reports and traces.
    pub fn name(self) -> &'static str {
        match self {
            Unit::Tensor => "tensor",
            Unit::Vector => "vector",
            Unit::Scalar => "scalar",
            Unit::GpSimd => "gpsimd",
            Unit::Sync => "sync",
            Unit::Dma => "dma",
            Unit::Collective => "collective",
        }
    }

    /// The unit of the engine the spec lists first for `op`, the one its docs
    /// name (Vector when the spec names none).
    pub fn of_spec(op: &str) -> Unit {
        let engine = nki_spec::ops().find(|o| o.py == op).and_then(|o| o.engines.first().copied());
        engine.and_then(Unit::of_engine).unwrap_or(Unit::Vector)
    }

    /// The unit an op with an `engine=` argument runs on: the named engine, or
    /// `default` when the argument is absent or `unknown` (the compiler's choice).
    pub fn chosen(engine: Option<Engine>, default: Unit) -> Unit {
        engine.and_then(Unit::of_engine).unwrap_or(default)
    }

    /// The unit of an engine (`None` for `unknown`, the compiler's choice).
    fn of_engine(engine: Engine) -> Option<Unit> {
        match engine {
            Engine::Tensor => Some(Unit::Tensor),
            Engine::Vector => Some(Unit::Vector),
            Engine::Scalar => Some(Unit::Scalar),
            Engine::Gpsimd => Some(Unit::GpSimd),
            Engine::Dma => Some(Unit::Dma),
            Engine::Sync => Some(Unit::Sync),
            Engine::Unknown => None,
        }
    }
}

/// The part of a storage an operand touches, as a box of storage rows (partitions
/// for on-chip tensors) by cells within a row; a conservative bound for views whose
/// steps do not split that way. A tile placed with `address=` (or by the
/// [`Allocator::Stack`](crate::emulator::Allocator::Stack)) is seen in its
/// memory instead (partitions by bytes of one [`PLACED_SBUF`] or [`PLACED_PSUM`]
/// storage), so tiles sharing bytes depend on each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    /// Identity of the underlying storage.
    pub storage: u64,
    /// First and last storage row touched.
    pub rows: (isize, isize),
    /// First and last cell within a row touched.
    pub cols: (isize, isize),
}

impl Region {
    /// Whether the two regions share a cell (or may: the boxes overlap).
    pub fn overlaps(&self, other: &Region) -> bool {
        self.storage == other.storage
            && self.rows.0 <= other.rows.1
            && other.rows.0 <= self.rows.1
            && self.cols.0 <= other.cols.1
            && other.cols.0 <= self.cols.1
    }
}

/// The storage id of a program's placed SBUF tiles in [`Region`]s.
pub const PLACED_SBUF: u64 = u64::MAX - 1;
/// The storage id of a program's placed PSUM tiles in [`Region`]s.
pub const PLACED_PSUM: u64 = u64::MAX - 2;

/// One operand of a recorded instruction.
#[derive(Clone, Debug, PartialEq)]
pub struct Operand {
    /// What it touches.
    pub region: Region,
    /// Where it lives.
    pub buffer: Buffer,
    /// Element type.
    pub dtype: Dtype,
    /// Partitions (first dimension; 1 for a scalar).
    pub partitions: usize,
    /// Elements per partition.
    pub free: usize,
    /// Bytes of the longest run of consecutive cells (what one DMA descriptor moves).
    pub run_bytes: usize,
}

impl Region {
    /// The rows and cells within a row of its own storage that view `t` touches.
    pub(crate) fn in_storage(t: &Tensor) -> Region {
        let l = t.layout();
        let row = t.storage().shape.iter().skip(1).product::<usize>().max(1) as isize;
        let (mut rows, mut cols) = ((0isize, 0isize), (0isize, 0isize));
        for (&n, &s) in l.shape.iter().zip(&l.strides) {
            let span = (n.max(1) as isize - 1) * s;
            let (lo, hi) = if s % row == 0 { (&mut rows, span / row) } else { (&mut cols, span) };
            if hi < 0 { lo.0 += hi } else { lo.1 += hi }
        }
        let (base_row, base_col) = (l.offset.div_euclid(row), l.offset.rem_euclid(row));
        let cols = (base_col + cols.0, base_col + cols.1);
        if cols.0 >= 0 && cols.1 < row {
            Region { storage: t.storage().id, rows: (base_row + rows.0, base_row + rows.1), cols }
        } else {
            let (lo, hi) = l.cell_range().unwrap_or((l.offset, l.offset));
            Region { storage: t.storage().id, rows: (lo.div_euclid(row), hi.div_euclid(row)), cols: (0, row - 1) }
        }
    }

    /// The region of view `t`: in its storage, or for a tile placed (by
    /// `address=` or the stack allocator) the partitions and bytes of its memory.
    fn of(t: &Tensor) -> Region {
        let region = Region::in_storage(t);
        let Some((kind, place)) = t.storage().lease().and_then(Lease::placement) else { return region };
        let size = t.dtype().size_bytes() as isize;
        let (p, b) = (place.partition as isize, place.byte as isize);
        Region {
            storage: if kind == OnChip::Psum { PLACED_PSUM } else { PLACED_SBUF },
            rows: (region.rows.0 + p, region.rows.1 + p),
            cols: (b + region.cols.0 * size, b + (region.cols.1 + 1) * size - 1),
        }
    }
}

impl Operand {
    /// The operand of view `t`.
    pub fn of(t: &Tensor) -> Operand {
        let l = t.layout();
        let partitions = l.shape.first().copied().unwrap_or(1).max(1);
        let free = l.numel() / partitions.max(1);
        let region = Region::of(t);
        // A run never crosses a partition of an on-chip tensor.
        let inner = if t.buffer().is_on_chip() && l.shape.len() > 1 {
            Layout { offset: 0, shape: l.shape[1..].to_vec(), strides: l.strides[1..].to_vec() }
        } else {
            l.clone()
        };
        let c = inner.collapsed();
        let run = match c.strides.last() {
            Some(1) => c.shape.last().copied().unwrap_or(1),
            _ => 1,
        };
        Operand { region, buffer: t.buffer(), dtype: t.dtype(), partitions, free, run_bytes: run * t.dtype().size_bytes() }
    }

    /// Elements of the operand.
    pub fn elements(&self) -> usize {
        self.partitions * self.free
    }

    /// Bytes of the operand.
    pub fn bytes(&self) -> usize {
        self.elements() * self.dtype.size_bytes()
    }
}

/// Whom an instruction waits for beyond its own program.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum Rendezvous {
    /// Nobody.
    #[default]
    None,
    /// Every program of the rank (`core_barrier`).
    CoreBarrier,
    /// The same program of each of these ranks (a collective over a ring).
    Ranks(Vec<usize>),
}

/// One executed instruction.
#[derive(Clone, Debug, PartialEq)]
pub struct Instr {
    /// The NKI name (`nisa.nc_matmul`).
    pub op: &'static str,
    /// The unit that runs it.
    pub unit: Unit,
    /// Operands read.
    pub reads: Vec<Operand>,
    /// Operands written.
    pub writes: Vec<Operand>,
    /// Whom it waits for.
    pub rendezvous: Rendezvous,
    /// Earlier instructions of its stream it waits for beyond those its operands
    /// depend on (the spill saves that make room for its tiles).
    pub deps: Vec<usize>,
}

impl Instr {
    /// An instruction reading `reads` and writing `writes`.
    pub fn new(op: &'static str, unit: Unit, reads: &[&Tensor], writes: &[&Tensor]) -> Instr {
        Instr {
            op,
            unit,
            reads: reads.iter().map(|t| Operand::of(t)).collect(),
            writes: writes.iter().map(|t| Operand::of(t)).collect(),
            rendezvous: Rendezvous::None,
            deps: Vec::new(),
        }
    }

    /// The same instruction waiting for `who`.
    pub fn waiting_for(mut self, who: Rendezvous) -> Instr {
        self.rendezvous = who;
        self
    }
}
