//! Launch configuration and the multi-program runner.

use super::helpers::ThreadBudget;
use super::memory::{Allocator, MemPool, MemoryReport};
use super::world::World;
use super::{Ctx, Precision};
use crate::collectives::CommEvent;
use crate::hw::Generation;
use crate::profile::{Profile, Recording, Stream, Target};
use crate::{ErrorKind, NkiError, Result, Tensor};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// State shared by the programs of one rank.
#[derive(Default)]
pub(crate) struct RankShared {
    /// Shared-HBM tensors allocated by the kernel, in allocation order.
    pub(crate) allocations: Mutex<Vec<Tensor>>,
}

/// How to launch a kernel in the emulator: LNC grid, ring size, precision model,
/// hardware generation and an optional time limit.
///
/// ```
/// use nki_core::emulator::{Launch, Precision};
/// use std::time::Duration;
/// let launch = Launch::new().lnc(2).precision(Precision::Fp32).timeout(Duration::from_secs(60));
/// let ids = launch.run_all(|ctx| Ok(ctx.program_id())).unwrap();
/// assert_eq!(ids.results, vec![vec![0, 1]]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    grid: Option<usize>,
    ranks: usize,
    precision: Precision,
    generation: Generation,
    timeout: Option<Duration>,
    profiling: Option<Profiling>,
    threads: Option<usize>,
    allocator: Allocator,
    strict_uninit: bool,
}

/// The environment variable that makes reads of unwritten memory errors by
/// default (`1`), in the emulator as in the NumPy executor.
pub const STRICT_UNINIT_ENV: &str = "NKI_STRICT_UNINIT";

/// Where a profiled launch leaves its recording (shared by the launch's clones).
#[derive(Clone)]
struct Profiling {
    target: Target,
    recording: Arc<Mutex<Option<Recording>>>,
}

impl PartialEq for Profiling {
    fn eq(&self, other: &Self) -> bool {
        self.target == other.target && Arc::ptr_eq(&self.recording, &other.recording)
    }
}

impl Eq for Profiling {}

impl std::fmt::Debug for Profiling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Profiling({})", self.target)
    }
}

impl Default for Launch {
    fn default() -> Self {
        Launch::new()
    }
}

/// Everything a launch produced.
#[derive(Debug)]
pub struct RunReport<R> {
    /// `results[rank][program]`.
    pub results: Vec<Vec<R>>,
    /// `memory[rank][program]`: peak on-chip usage.
    pub memory: Vec<Vec<MemoryReport>>,
    /// Every collective the ranks performed, in completion order.
    pub comm: Vec<CommEvent>,
    /// `ops[rank][program]`: ISA ops executed.
    pub ops: Vec<Vec<u64>>,
    /// One line per (tensor, instruction, kernel line) that read memory nothing
    /// wrote since it was allocated: undefined behaviour on the hardware. The
    /// launch also prints each to stderr as `warning: ...`.
    pub undefined: Vec<String>,
}

impl Launch {
    /// One rank, no LNC grid, `hardware` precision, trn2.
    pub fn new() -> Launch {
        Launch {
            grid: None,
            ranks: 1,
            precision: Precision::Hardware,
            generation: Generation::Trn2,
            timeout: None,
            profiling: None,
            threads: None,
            allocator: Allocator::Default,
            strict_uninit: std::env::var(STRICT_UNINIT_ENV).is_ok_and(|v| !v.is_empty() && v != "0"),
        }
    }

    /// Whether an instruction reading memory that nothing wrote since it was
    /// allocated fails the launch (`true`) or is reported in
    /// [`RunReport::undefined`] and on stderr (`false`; the default unless
    /// `NKI_STRICT_UNINIT=1`). Such memory reads as zero bits.
    pub fn strict_uninit(mut self, strict: bool) -> Launch {
        self.strict_uninit = strict;
        self
    }

    /// Logical NeuronCore degree: 1 launches without a grid, 2 launches a 1-D grid of two programs.
    pub fn lnc(mut self, lnc: usize) -> Launch {
        self.grid = if lnc == 1 { None } else { Some(lnc) };
        self
    }

    /// An explicit grid: `None` (no grid) or `Some(n)` programs.
    pub fn grid(mut self, grid: Option<usize>) -> Launch {
        self.grid = grid;
        self
    }

    /// Number of ranks (ring workers).
    pub fn ranks(mut self, ranks: usize) -> Launch {
        self.ranks = ranks;
        self
    }

    /// The precision model.
    pub fn precision(mut self, precision: Precision) -> Launch {
        self.precision = precision;
        self
    }

    /// The hardware generation.
    pub fn generation(mut self, generation: Generation) -> Launch {
        self.generation = generation;
        self
    }

    /// Bounds the launch: once `limit` has passed, every program stops at its next
    /// op, collective wait or kernel loop iteration, and the launch fails with an
    /// [`ErrorKind::Timeout`] error naming what each program was doing (the op and
    /// kernel line it stopped at, the loop it was in, or the collective it waited
    /// in and for whom). Without a limit (the default) a launch runs until its
    /// programs finish, fail or deadlock. Host code passed to [`Launch::run_all`]
    /// that never reaches an op is not interrupted.
    pub fn timeout(mut self, limit: Duration) -> Launch {
        self.timeout = Some(limit);
        self
    }

    /// Threads the launch may keep busy at once (default: the machine's
    /// available parallelism). Every LNC program of every rank has its own
    /// thread; when `threads` exceeds their number, each program also splits
    /// large instructions (matmuls, activations) over
    /// `threads / programs - 1` helper threads. Results are bit-identical for
    /// every value: the split is fixed by the instruction and each part is
    /// computed as it would be sequentially. `threads(1)` runs a launch without
    /// a grid and with one rank on one thread.
    pub fn threads(mut self, threads: usize) -> Launch {
        self.threads = Some(threads);
        self
    }

    /// Helper threads per program when a launch starts: the thread budget left
    /// over by the programs' own threads, shared evenly (none when the
    /// programs already fill it, so a ring of LNC pairs never oversubscribes the
    /// cores). As programs finish, their threads are shared among those still
    /// running.
    ///
    /// ```
    /// use nki_core::emulator::Launch;
    /// assert_eq!(Launch::new().threads(4).helpers_per_program(), 3);
    /// assert_eq!(Launch::new().lnc(2).threads(4).helpers_per_program(), 1);
    /// assert_eq!(Launch::new().ranks(4).lnc(2).threads(2).helpers_per_program(), 0);
    /// ```
    pub fn helpers_per_program(&self) -> usize {
        ThreadBudget::new(self.thread_budget(), self.ranks * self.programs()).helpers()
    }

    /// The threads the launch may keep busy: [`Launch::threads`], else the
    /// machine's available parallelism. Loading inputs and writing outputs
    /// around a launch can use the same budget.
    pub fn thread_budget(&self) -> usize {
        self.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    }

    /// How SBUF tiles without `address=` are placed ([`Allocator::Default`]:
    /// each its own buffer). Under [`Allocator::Stack`] tiles of consecutive
    /// loop iterations share bytes, so a profile makes each wait for the
    /// previous one's accesses.
    pub fn allocator(mut self, allocator: Allocator) -> Launch {
        self.allocator = allocator;
        self
    }

    /// Profiles the launch for `target` (whose limits the run also checks): each
    /// run records every instruction, and [`Launch::profiled`] then estimates its
    /// timeline on the target. Without this call nothing is recorded.
    ///
    /// ```
    /// use nki_core::prelude::*;
    /// use nki_core::profile::Target;
    /// let launch = Launch::new().profile(Target::Trn2);
    /// launch.run(|ctx| {
    ///     let t = nl::ndarray(ctx, &[128, 512], Dtype::Bf16, nl::NdarrayOpts { buffer: Some(nl::sbuf), ..Default::default() })?;
    ///     nisa::memset(ctx, &t, 0.0, Default::default())
    /// })?;
    /// let profile = launch.profiled()?;
    /// assert!(profile.report.estimated_seconds > 0.0);
    /// # Ok::<(), nki_core::NkiError>(())
    /// ```
    pub fn profile(mut self, target: Target) -> Launch {
        self.generation = target;
        self.profiling = Some(Profiling { target, recording: Arc::default() });
        self
    }

    /// The profile of this launch's last successful run (also when the run went
    /// through a clone of it, as the kernels' `launch` helpers do).
    pub fn profiled(&self) -> Result<Profile> {
        let p = self
            .profiling
            .as_ref()
            .ok_or_else(|| NkiError::argument("launch", "not profiled", "call Launch::profile(target) before running to get a profile"))?;
        let recording = p.recording.lock().unwrap_or_else(|e| e.into_inner());
        let recording = recording
            .as_ref()
            .ok_or_else(|| NkiError::argument("launch", "no run", "run the profiled launch successfully before asking for its profile"))?;
        Profile::of(recording, p.target)
    }

    /// Programs per rank.
    pub fn programs(&self) -> usize {
        self.grid.unwrap_or(1)
    }

    /// The LNC degree (1 or 2).
    pub fn lnc_degree(&self) -> usize {
        self.programs()
    }

    /// Number of ranks.
    pub fn num_ranks(&self) -> usize {
        self.ranks
    }

    /// The precision model.
    pub fn precision_model(&self) -> Precision {
        self.precision
    }

    /// The hardware generation.
    pub fn hardware(&self) -> Generation {
        self.generation
    }

    fn validate(&self) -> Result<()> {
        if let Some(g) = self.grid {
            if !(1..=2).contains(&g) {
                return Err(NkiError::argument("lnc", g, "the LNC grid must hold 1 or 2 programs"));
            }
            if g == 2 && !self.generation.limits().has_core_barrier {
                return Err(NkiError::argument("lnc", g, &format!("LNC2 needs trn2 or later, the launch targets {}", self.generation)));
            }
        }
        if !(1..=64).contains(&self.ranks) {
            return Err(NkiError::argument("ranks", self.ranks, "must be between 1 and 64"));
        }
        if self.threads == Some(0) {
            return Err(NkiError::argument("threads", 0, "a launch needs at least one thread"));
        }
        if self.timeout == Some(Duration::ZERO) {
            return Err(NkiError::argument("timeout", "0s", "a launch needs a time limit longer than zero"));
        }
        Ok(())
    }

    /// Runs `f` once per program of every rank and returns rank 0 / program 0's result.
    pub fn run<R: Send>(&self, f: impl Fn(&Ctx) -> Result<R> + Sync) -> Result<R> {
        let mut report = self.run_all(f)?;
        Ok(report.results.swap_remove(0).swap_remove(0))
    }

    /// Runs `f` on every program of every rank; returns program 0's result per rank.
    pub fn run_ranks<R: Send>(&self, f: impl Fn(&Ctx) -> Result<R> + Sync) -> Result<Vec<R>> {
        let report = self.run_all(f)?;
        Ok(report.results.into_iter().map(|mut r| r.swap_remove(0)).collect())
    }

    /// Runs `f` on every program of every rank (one thread each) and reports everything.
    ///
    /// If any program fails, every other program stops at its next op, barrier,
    /// collective or kernel loop iteration, and the first root-cause error is
    /// returned (tagged with its rank and program). Past the [`timeout`](Launch::timeout),
    /// the error reports every program's state instead.
    pub fn run_all<R: Send>(&self, f: impl Fn(&Ctx) -> Result<R> + Sync) -> Result<RunReport<R>> {
        // Generic only in this shell: the launch itself (threads, watchdog,
        // reports) is compiled once, not once per kernel and test closure.
        self.validate()?;
        let slots: Vec<Mutex<Option<R>>> = (0..self.ranks * self.programs()).map(|_| Mutex::new(None)).collect();
        let report = self.run_each(&|ctx: &Ctx| {
            let r = f(ctx)?;
            *slots[ctx.slot()].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            Ok(())
        })?;
        let mut stored = slots.into_iter().map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()));
        let mut results = Vec::with_capacity(report.results.len());
        for rank in &report.results {
            let mut res = Vec::with_capacity(rank.len());
            for () in rank {
                res.push(stored.next().flatten().ok_or_else(|| {
                    NkiError::new(ErrorKind::Constraint, "internal error: a program finished without its result".to_string())
                })?);
            }
            results.push(res);
        }
        let RunReport { memory, comm, ops, undefined, .. } = report;
        Ok(RunReport { results, memory, comm, ops, undefined })
    }

    /// [`run_all`](Launch::run_all) of a validated launch, for a program
    /// function that keeps its own results.
    fn run_each(&self, f: &(dyn Fn(&Ctx) -> Result<()> + Sync)) -> Result<RunReport<()>> {
        let programs = self.programs();
        let world = Arc::new(World::new(self.ranks, programs));
        let shared: Vec<Arc<RankShared>> = (0..self.ranks).map(|_| Arc::default()).collect();
        let threads = Arc::new(ThreadBudget::new(self.thread_budget(), self.ranks * programs));
        let run_one = |rank: usize, program: usize| {
            let mut ctx =
                Ctx::new(Arc::clone(&world), Arc::clone(&shared[rank]), rank, program, self.grid, self.precision, self.generation);
            ctx.recorder = self.profiling.as_ref().map(|_| Default::default());
            if self.allocator != Allocator::Default {
                ctx.pool = MemPool::new(self.generation.limits(), self.allocator);
            }
            ctx.threads = Arc::clone(&threads);
            ctx.strict_uninit = self.strict_uninit;
            let out = catch_unwind(AssertUnwindSafe(|| f(&ctx))).unwrap_or_else(|p| {
                let what =
                    p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
                Err(NkiError::new(ErrorKind::Constraint, format!("internal error (panic) in the emulated program: {what}")))
            });
            let out = out.and_then(|r| match ctx.unmodeled_op() {
                Some(op) if ctx.recorder.is_some() => Err(NkiError::new(
                    ErrorKind::Constraint,
                    format!("profiling: {op} ran but the cost model does not record it, so an estimate would leave it out"),
                )),
                _ => Ok(r),
            });
            // The last instruction's writes are compared with any another
            // program made unordered with them (and that program no longer waits).
            let last = world.races.as_ref().map_or(Ok(()), |r| r.finish(ctx.slot()));
            let out = out.and_then(|r| last.map(|()| r));
            let out = if self.ranks * programs > 1 { out.map_err(|e| e.from_origin(ctx.origin())) } else { out };
            if let Err(e) = &out {
                world.fail(e.clone());
            }
            threads.finished();
            world.finish(ctx.slot());
            let (memory, spills) = ctx.pool.summary();
            let instrs = ctx.recorder.take().map(|r| crate::profile::with_spills(r.into_inner(), &spills)).unwrap_or_default();
            (out, memory, ctx.op_count(), Stream { rank, program, instrs })
        };
        let outcomes: Vec<_> = std::thread::scope(|s| {
            // The watchdog sleeps until the programs are done (the sender drops) or
            // the time limit passes, whichever comes first.
            let (done, wait) = mpsc::channel::<()>();
            if let Some(limit) = self.timeout {
                let world = &world;
                std::thread::Builder::new()
                    .name("nki-watchdog".to_string())
                    .spawn_scoped(s, move || {
                        if wait.recv_timeout(limit) == Err(RecvTimeoutError::Timeout) {
                            world.time_out();
                        }
                    })
                    .expect("spawning the launch watchdog");
            }
            let outcomes = if self.ranks * programs == 1 {
                vec![run_one(0, 0)]
            } else {
                let handles: Vec<_> = (0..self.ranks)
                    .flat_map(|r| (0..programs).map(move |p| (r, p)))
                    .map(|(r, p)| {
                        let run_one = &run_one;
                        std::thread::Builder::new()
                            .name(format!("nki-rank{r}-prog{p}"))
                            .spawn_scoped(s, move || run_one(r, p))
                            .expect("spawning an emulator thread")
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().expect("emulator threads catch their panics")).collect()
            };
            drop(done);
            outcomes
        });
        let undefined = world.undefined_reads();
        undefined.iter().for_each(|m| eprintln!("warning: {m}"));
        if world.timed_out() {
            let states: Vec<String> = outcomes
                .iter()
                .enumerate()
                .map(|(slot, (out, ..))| match out {
                    Ok(_) => format!("[{}] finished", world.slot_name(slot)),
                    Err(e) => e.to_string(),
                })
                .collect();
            let limit = self.timeout.unwrap_or_default();
            return Err(NkiError::new(
                ErrorKind::Timeout,
                format!("the launch did not finish within {limit:?}; each program at the deadline: {}", states.join("; ")),
            ));
        }
        if let Some(mut e) = world.first_error() {
            // A missing partner or a deadlock is found by the world, which knows no
            // kernel line; a program stopped in that rendezvous returned its own.
            if e.location.is_none()
                && e.kind == ErrorKind::Collective
                && let Some(w) = outcomes.iter().find_map(|(r, ..)| r.as_ref().err().filter(|w| w.location.is_some()))
            {
                e.location.clone_from(&w.location);
                e.op = e.op.or_else(|| w.op.clone());
            }
            return Err(e);
        }
        let mut report = RunReport { results: Vec::new(), memory: Vec::new(), comm: world.take_comm_log(), ops: Vec::new(), undefined };
        let mut recording = Recording::default();
        let mut it = outcomes.into_iter();
        for _ in 0..self.ranks {
            let mut res = Vec::new();
            let mut mem = Vec::new();
            let mut ops = Vec::new();
            for _ in 0..programs {
                let (r, m, o, stream) = it.next().expect("one outcome per program");
                res.push(r?);
                recording.streams.push(stream);
                recording.memory.push(m);
                mem.push(m);
                ops.push(o);
            }
            report.results.push(res);
            report.memory.push(mem);
            report.ops.push(ops);
        }
        if let Some(p) = &self.profiling {
            *p.recording.lock().unwrap_or_else(|e| e.into_inner()) = Some(recording);
        }
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn a_program_still_running_gets_the_threads_of_those_done() {
        let report = Launch::new()
            .lnc(2)
            .threads(2)
            .run_all(|ctx| {
                let at_start = ctx.helpers();
                if ctx.program_id() == 1 {
                    // Program 0 returns at once; its thread is then this program's helper.
                    let deadline = Instant::now() + Duration::from_secs(20);
                    while ctx.helpers() == 0 && Instant::now() < deadline {
                        std::thread::yield_now();
                    }
                }
                Ok((at_start, ctx.helpers()))
            })
            .unwrap();
        assert_eq!(report.results[0][0].0, 0, "two programs fill two threads");
        assert_eq!(report.results[0][1].1, 1, "the last program running has a helper");
    }
}
