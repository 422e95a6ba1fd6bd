"""Helpers of the executor tests: HBM inputs, one-rank launches, reading tensors."""

import numpy as np

import nki_harness.fake_nki as fake
from nki_harness.fake_nki.tensor import SHARED_HBM, from_cells

fake.install()
import nki  # noqa: E402  (the executor, registered by install())
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

RNG = np.random.default_rng(2014)


def hbm(values, dtype=nl.float32):
    """A shared-HBM input holding `values` in `dtype`."""
    values = np.asarray(values)
    cells = dtype.encode(values.astype(np.float32), True) if dtype.is_float else dtype.saturate(values)
    return from_cells("input", dtype, SHARED_HBM, np.asarray(cells).reshape(values.shape))


def host(t):
    """A tensor's values as float64."""
    return t.dtype.decode(t.read_cells()).astype(np.float64)


def ints(t):
    """A tensor's integer cells."""
    return t.read_cells().astype(np.int64)


def run(fn, *args, generation="trn2", grid=None, precision="fp32"):
    """Runs `fn(*args)` as a one-rank kernel; returns what it returns."""
    kernel = nki.jit(fn)
    return fake.launch(kernel[grid] if grid else kernel, [list(args)], precision=precision,
                       generation=generation)[0]


def run_ranks(fn, args_by_rank, grid=None, timeout=30.0):
    """Runs `fn(*args_by_rank[r])` on every rank; returns every rank's result."""
    kernel = nki.jit(fn)
    return fake.launch(kernel[grid] if grid else kernel, [list(a) for a in args_by_rank], timeout=timeout)


def sbuf(x, dtype=nl.float32):
    """Inside a kernel: an SBUF tile holding the array `x`."""
    t = nl.ndarray(np.shape(x), dtype=dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=hbm(x, dtype))
    return t


def f32(x):
    """`x` rounded to float32, as float64 (the executor's inputs)."""
    return np.asarray(x, dtype=np.float32).astype(np.float64)
