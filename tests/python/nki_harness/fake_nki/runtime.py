"""Launching kernels: one thread per program of every rank.

Programs of one rank share `nl.shared_hbm` tensors; ranks talk only through
`nki.collectives`. Each thread runs one `Program`, reachable from the NKI calls
through `current()`; a program that fails stops the others at their next op.
"""

import functools
import os
import threading
import time
import traceback
from collections import defaultdict

import numpy as np

from . import rng, undefined
from .errors import Aborted, NkiError
from .hw import GENERATIONS
from .memory import Memory
from .objects import NkiInstruction
from .world import MEMORY, World

PRECISIONS = ("fp32", "hardware")

_local = threading.local()
_HERE = os.path.dirname(os.path.abspath(__file__))


def current():
    """The program the calling thread runs."""
    prog = getattr(_local, "program", None)
    if prog is None:
        raise NkiError(None, "NKI calls must run inside a launched kernel (see nki_harness.fake_nki.launch)")
    return prog


def _op_name(fn):
    """`nisa.memset`, `nl.ndarray`, `ncc.all_reduce`: the NKI name of an op function."""
    module = fn.__module__
    prefix = "nisa" if ".isa" in module else "ncc" if ".collectives" in module else "nl"
    return f"{prefix}.{fn.__name__.lstrip('_')}"


def instruction(fn):
    """Makes `fn` an op: it stops when the launch failed, runs atomically and
    returns its result, or an `NkiInstruction` handle when it has none. Each call
    is the next instruction of the program's memory model (`memory.Memory`)."""
    name = _op_name(fn)

    def op(*args, **kwargs):
        current().begin_op(name)
        with MEMORY:
            result = fn(*args, **kwargs)
        return NkiInstruction(fn.__name__) if result is None else result

    return functools.wraps(fn)(op)


class Program:
    """One program instance: its rank, LNC program id, precision, hardware,
    on-chip memory (`memory.Memory`), engine accumulator registers, random
    generator states (`rng`), and its sequence counters for shared allocations,
    barriers and collectives."""

    def __init__(self, world, rank_shared, rank, program, grid, precision, hw):
        self.world = world
        self.rank_shared = rank_shared
        self.rank = rank
        self.program = program
        self.grid = grid
        self.rounds = precision == "hardware"
        self.hw = hw
        self.memory = Memory(hw)
        self.vector_acc = np.full(hw.pmax, np.nan, dtype=np.float32)
        self.scalar_acc = np.full(hw.pmax, np.nan, dtype=np.float32)
        self.rng = {engine: rng.seeded(0, hw.pmax, engine) for engine in rng.STREAMS}
        self._shared_allocs = 0
        self._pairs = defaultdict(int)
        self._collectives = defaultdict(int)

    @property
    def num_programs(self):
        return self.grid or 1

    @property
    def slot(self):
        return self.rank * self.world.programs + self.program

    def begin_op(self, op):
        """Stops this program when another one of the launch failed; else `op` is
        the program's next instruction."""
        if self.world.aborted:
            raise Aborted()
        self.memory.begin(op)

    def shared_allocation(self, make, check):
        """The n-th shared-HBM allocation of this program: one tensor for every
        program of the rank (`check` validates a later program's request)."""
        n = self._shared_allocs
        self._shared_allocs += 1
        table = self.rank_shared
        if n < len(table):
            check(table[n])
            return table[n]
        table.append(make())
        return table[n]

    def core_barrier(self):
        """Waits until every program of this rank reaches its next core barrier."""
        self.rank_rendezvous("barrier", "core_barrier", None, lambda parts: None)

    def rank_rendezvous(self, tag, kind, payload, complete):
        """Joins the next rendezvous `tag` of this rank's programs; the last to
        arrive runs `complete(payloads)` with every program's payload."""
        seq, self._pairs[tag] = self._pairs[tag], self._pairs[tag] + 1
        programs = self.world.programs
        participants = [self.rank * programs + p for p in range(programs)]
        self.world.rendezvous(self.slot, (tag, self.rank, seq), kind, participants, payload, complete)

    def collective(self, ring, kind, payload, complete):
        """Joins the next collective of `ring` (ranks); the last program to arrive
        runs `complete(payloads)` with every participant's payload."""
        key = tuple(ring)
        seq, self._collectives[key] = self._collectives[key], self._collectives[key] + 1
        programs = self.world.programs
        participants = [r * programs + p for r in ring for p in range(programs)]
        self.world.rendezvous(self.slot, ("collective", key, seq), kind, participants, payload, complete)


def _located(err, tb):
    """Tags `err` with the innermost kernel source line of traceback `tb`."""
    frames = [f for f in traceback.extract_tb(tb) if not os.path.abspath(f.filename).startswith(_HERE)]
    if frames and err.location is None:
        err.location = (os.path.basename(frames[-1].filename), frames[-1].lineno)
    return err


def launch(target, args, kwargs=None, precision="fp32", generation="trn2", timeout=300.0):
    """Runs a `@nki.jit` kernel (`kernel`, or `kernel[n]` for an LNC grid of n
    programs) once per rank: `args[r]` / `kwargs[r]` are rank r's arguments.

    Returns program 0's return value for every rank. Raises the first root-cause
    `NkiError` if any program fails or the launch exceeds `timeout` seconds.
    Reads of memory nothing wrote are `undefined.UndefinedRead` warnings, raised
    when the launch ends (errors under NKI_STRICT_UNINIT=1).
    """
    fn, grid = target.launch_parts()
    ranks = len(args)
    kwargs = kwargs if kwargs is not None else [{} for _ in range(ranks)]
    programs = grid or 1
    if precision not in PRECISIONS:
        raise NkiError("launch", f"precision must be one of {PRECISIONS}, got {precision!r}")
    if generation not in GENERATIONS:
        raise NkiError("launch", f"generation must be one of {sorted(GENERATIONS)}, got {generation!r}")
    hw = GENERATIONS[generation]
    if grid is not None and grid not in (1, 2):
        raise NkiError("launch", f"the LNC grid must hold 1 or 2 programs, got {grid}")
    if programs == 2 and not hw.has_core_barrier:
        raise NkiError("launch", f"LNC2 needs trn2 or later, the launch targets {generation}")
    if not 1 <= ranks <= 64 or len(kwargs) != ranks:
        raise NkiError("launch", f"need 1 to 64 ranks with one kwargs dict each, got {ranks} and {len(kwargs)}")
    world = World(ranks, programs, time.monotonic() + timeout)
    shared = [[] for _ in range(ranks)]
    results = {}

    def run(rank, program):
        prog = Program(world, shared[rank], rank, program, grid, precision, hw)
        _local.program = prog
        try:
            with np.errstate(all="ignore"):  # IEEE overflow, NaN and inf are values, not warnings
                results[prog.slot] = fn(*args[rank], **kwargs[rank])
        except Aborted as e:
            world.fail(e)
        except Exception as e:  # a kernel failure of any kind is reported, never re-raised in the thread
            err = e if isinstance(e, NkiError) else NkiError(None, f"{type(e).__name__}: {e}")
            err = _located(err, e.__traceback__)
            # The kernel's own frames, for `python -m nki_harness run --traceback`.
            err.traceback = "".join(traceback.format_exception(type(e), e, e.__traceback__))
            if ranks * programs > 1 and err.origin is None:
                err.origin = (rank, program)
            world.fail(err)
        finally:
            _local.program = None
            world.finish(prog.slot)

    threads = [threading.Thread(target=run, args=(r, p), name=f"nki-rank{r}-prog{p}", daemon=True)
               for r in range(ranks) for p in range(programs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, world.deadline - time.monotonic()))
    if any(t.is_alive() for t in threads):
        world.fail(NkiError(None, f"the launch did not finish within {timeout:g} s"))
        for t in threads:
            t.join(1.0)
    undefined.report(world.undefined)
    if world.error is not None:
        raise world.error
    return [results[r * programs] for r in range(ranks)]
