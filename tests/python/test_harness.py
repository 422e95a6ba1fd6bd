"""Self tests of the Python harness: the fake `nki` ops against direct NumPy
formulas, view semantics, accumulation, launches and collectives, the signature
checker, and the command line. Run with `python -m unittest` from tests/python.
"""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest
import unittest.mock
import warnings
from pathlib import Path

import ml_dtypes
import numpy as np

import nki_harness.fake_nki as fake
from nki_harness import checker
from nki_harness.fake_nki.errors import NkiError
from nki_harness.fake_nki.tensor import SBUF, SHARED_HBM, allocate, from_cells
from nki_harness.fake_nki.undefined import STRICT_ENV, UndefinedRead
from nki_harness.signatures import Api

fake.install()
import nki  # noqa: E402  (the fake, registered by install())
import nki.collectives as ncc  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

HERE = Path(__file__).resolve().parent
RNG = np.random.default_rng(7)
F32_MIN = float(np.finfo(np.float32).min)


def hbm(values, dtype=nl.float32):
    """A shared-HBM input holding `values` rounded to `dtype`."""
    return from_cells("input", dtype, SHARED_HBM, dtype.encode(np.asarray(values, dtype=np.float32), True))


def vals(t):
    """A tensor view's values as float32 (integers converted)."""
    return t.dtype.decode(t.read_cells())


def run(fn, *args, precision="fp32", generation="trn2", grid=None):
    """Runs `fn(*args)` as a one-rank kernel; returns what it returns."""
    kernel = nki.jit(fn)
    return fake.launch(kernel[grid] if grid else kernel, [list(args)], precision=precision,
                       generation=generation)[0]


def run_ranks(fn, ranks, grid=None, timeout=30.0):
    """Runs `fn(rank)` on `ranks` ranks; returns every rank's result."""
    kernel = nki.jit(fn)
    return fake.launch(kernel[grid] if grid else kernel, [[r] for r in range(ranks)], timeout=timeout)


def load(x, dtype=nl.float32):
    """Inside a kernel: an SBUF tile holding the array `x`."""
    t = nl.ndarray(shape=x.shape, dtype=dtype)
    nisa.dma_copy(dst=t, src=hbm(x, dtype))
    return t


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def uninit_mode(strict):
    """A context in which reads of unwritten memory are errors (`strict`) or
    warnings, whatever `NKI_STRICT_UNINIT` the tests themselves run under."""
    env = {k: v for k, v in os.environ.items() if k != STRICT_ENV}
    if strict:
        env[STRICT_ENV] = "1"
    return unittest.mock.patch.dict(os.environ, env, clear=True)


class DtypeTest(unittest.TestCase):
    def test_rounding_and_saturation(self):
        bf = nl.bfloat16.encode(np.float32([1 + 2 ** -8, 1 + 3 * 2 ** -8]), True)
        self.assertEqual(bf.tolist(), [1.0, 1 + 2 ** -6])
        self.assertTrue(np.isnan(nl.float8_e4m3fn.encode(np.float32([480.0]), True)[0]))
        self.assertEqual(nl.float8_e4m3fn.encode(np.float32([460.0]), True)[0], 448.0)
        self.assertEqual(nl.float8_e4m3.encode(np.float32([250.0]), True)[0], np.inf)
        self.assertEqual(nl.float8_e5m2.encode(np.float32([-1.3]), True)[0], -1.25)
        self.assertEqual(nl.int8.encode(np.float32([-2.5, 300, np.nan, 2.5]), False).tolist(), [-2, 127, 0, 2])
        self.assertEqual(nl.uint32.encode(np.float32([-1.0]), True).tolist(), [0])
        self.assertEqual(nl.bfloat16.encode(np.float32([1 + 2 ** -8]), False)[0], np.float32(1 + 2 ** -8))

    def test_fresh_allocations_read_as_zero_bits_and_are_reported(self):
        dtypes = (nl.float32, nl.int32, nl.uint8, nl.bfloat16, nl.float8_e4m3)
        for d in dtypes:
            t = allocate("t", d, SBUF, (2, 2))
            with uninit_mode(strict=False), \
                    self.assertWarnsRegex(UndefinedRead, rf"4 elements of 't' \[2, 2\] {d.name} in SBUF"):
                cells = t.read_cells()
            self.assertTrue((d.to_bits(cells) == 0).all(), d.name)


class ViewTest(unittest.TestCase):
    def iota(self, shape, buffer=SHARED_HBM):
        return from_cells("t", nl.float32, buffer, np.arange(np.prod(shape), dtype=np.float32).reshape(shape))

    def test_hbm_indexing_is_numpy_like(self):
        t = self.iota((4, 6))
        v = t[1:4:2, 3]
        self.assertEqual(v.shape, (2,))
        self.assertEqual(vals(v).tolist(), [9, 21])
        self.assertEqual(vals(t[-1]).tolist(), list(range(18, 24)))
        self.assertEqual(vals(t[nl.ds(1, 2), 0]).tolist(), [6, 12])
        for bad in (lambda: t[0:5], lambda: t[4], lambda: t[0, 0, 0], lambda: t[3:1]):
            self.assertRaises(NkiError, bad)

    def test_on_chip_int_index_keeps_the_partition_dim(self):
        t = self.iota((4, 6, 2), SBUF)
        self.assertEqual(t[1].shape, (1, 6, 2))
        self.assertEqual(t[:, 2].shape, (4, 2))
        self.assertEqual(t[:, 2, 1].shape, (4, 1))
        self.assertEqual(t[1, 2, 1].shape, (1, 1))
        self.assertEqual(vals(t[2, 1, 1]).tolist(), [[27]])
        self.assertEqual(vals(self.iota((4, 3), SBUF).select(dim=1, index=2)).tolist(), [[2], [5], [8], [11]])

    def test_reshape_needs_contiguous_elements(self):
        t = self.iota((2, 3, 4))
        self.assertEqual(vals(t.reshape((6, 4))[5]).tolist(), [20, 21, 22, 23])
        self.assertRaises(NkiError, lambda: t[:, 0:2].reshape((4, 4)))
        self.assertRaises(NkiError, lambda: t.reshape((5, 5)))
        s = self.iota((4, 6), SBUF)
        self.assertEqual(s[:, 0:6].reshape((4, 2, 3)).strides, (6, 3, 1))
        self.assertRaises(NkiError, lambda: s.reshape((2, 12)))
        self.assertRaises(NkiError, lambda: s[:, 0:6:2].reshape((4, 3, 1)))
        self.assertEqual(s[:, 0:4].reshape((4, 2, 2)).strides, (6, 2, 1))

    def test_ap_offsets_add_to_the_view_start_and_scalar_offsets_scale_by_the_view_stride(self):
        t = self.iota((2, 3, 4))
        self.assertEqual(vals(t.ap(pattern=[[1, 4], [4, 3]], offset=0)).ravel()[:4].tolist(), [0, 4, 8, 1])
        self.assertEqual(vals(t.ap(pattern=[[1, 2]], offset=1, scalar_offset=nisa.VirtualRegister(2),
                                   indirect_dim=1)).tolist(), [9, 10])
        self.assertEqual(vals(t[1].ap(pattern=[[1, 3]])).tolist(), [12, 13, 14])
        self.assertEqual(vals(t[1].ap(pattern=[[1, 2]], offset=0)).tolist(), [12, 13])
        self.assertEqual(vals(t[1].ap(pattern=[[1, 2]], offset=1)).tolist(), [13, 14])
        wide = t.ap(pattern=[[1, 30]])  # an access pattern is checked when an instruction uses it
        self.assertRaises(NkiError, lambda: vals(wide))
        idx = from_cells("i", nl.int32, SBUF, np.array([[1]], dtype=np.int64))
        self.assertEqual(vals(t.ap(pattern=[[1, 2]], offset=0, scalar_offset=idx, indirect_dim=0)).tolist(), [12, 13])
        s = self.iota((4, 8), SBUF)
        self.assertEqual(vals(s.ap(pattern=[[8, 2], [0, 3]], offset=8 * 2 + 5)).tolist(), [[21] * 3, [29] * 3])

    def test_broadcast_expand_select_slice(self):
        t = self.iota((3, 1))
        self.assertEqual(vals(t.broadcast(dim=1, size=2)).ravel().tolist(), [0, 0, 1, 1, 2, 2])
        self.assertEqual(t.expand_dim(dim=0).shape, (1, 3, 1))
        self.assertEqual(vals(self.iota((2, 3)).select(dim=1, index=2)).tolist(), [2, 5])
        self.assertEqual(vals(self.iota((2, 6)).slice(dim=1, start=1, end=6, step=2)).tolist(), [[1, 3, 5], [7, 9, 11]])
        self.assertRaises(NkiError, lambda: t.broadcast(dim=0, size=2))
        s = self.iota((3, 1), SBUF)
        for bad in (lambda: s.broadcast(dim=0, size=2), lambda: s.expand_dim(dim=0), lambda: s.select(dim=0, index=0)):
            self.assertRaises(NkiError, bad)
        self.assertEqual(s.expand_dim(dim=1).broadcast(dim=1, size=4).shape, (3, 4, 1))

    def test_views_share_storage(self):
        def k():
            t = nl.ndarray(shape=(4, 6), dtype=nl.float32)
            nisa.memset(dst=t, value=0.0)
            nisa.memset(dst=t[1:3, 2:4], value=5.0)
            return vals(t)
        got = run(k)
        want = np.zeros((4, 6), np.float32)
        want[1:3, 2:4] = 5
        np.testing.assert_array_equal(got, want)


class ElementwiseTest(unittest.TestCase):
    def test_tensor_tensor_matches_numpy(self):
        a, b = rand(8, 16), rand(8, 16)
        a[0, 0] = np.nan
        formulas = {
            nl.add: a + b, nl.subtract: a - b, nl.multiply: a * b, nl.divide: a / b, nl.maximum: np.fmax(a, b),
            nl.minimum: np.fmin(a, b), nl.less: (a < b) * 1.0, nl.greater_equal: (a >= b) * 1.0,
            nl.equal: (a == b) * 1.0, nl.not_equal: (a != b) * 1.0, nl.logical_and: ((a != 0) & (b != 0)) * 1.0,
        }

        def k(op):
            x, y, d = load(a), load(b), nl.ndarray(shape=a.shape, dtype=nl.float32)
            nisa.tensor_tensor(dst=d, data1=x, data2=y, op=op)
            return vals(d)
        for op, want in formulas.items():
            np.testing.assert_array_equal(run(k, op), want.astype(np.float32), err_msg=str(op))

    def test_tensor_tensor_on_int32_is_exact_and_checks_geometry(self):
        big = np.array([[2 ** 30 + 1, -7]], dtype=np.int64)

        def k():
            x = nl.ndarray(shape=(1, 2), dtype=nl.int32)
            nisa.dma_copy(dst=x, src=from_cells("i", nl.int32, SHARED_HBM, big))
            nisa.tensor_tensor(dst=x, data1=x, data2=x, op=nl.add)
            return x.read_cells()
        self.assertEqual(run(k).tolist(), [[2 ** 31 - 1, -14]])

        def bad():
            x = load(rand(4, 8))
            nisa.tensor_tensor(dst=x, data1=x, data2=x[:, 0:4], op=nl.add)
        self.assertRaisesRegex(NkiError, "must match", run, bad)

    def test_tensor_scalar_stages_reverse_and_columns(self):
        a, c = rand(8, 16), rand(8, 1)

        def k():
            x, col, d = load(a), load(c), nl.ndarray(shape=a.shape, dtype=nl.float32)
            nisa.tensor_scalar(dst=d, data=x, op0=nl.subtract, operand0=col, reverse0=True, op1=nl.multiply,
                               operand1=3.0)
            u = nl.ndarray(shape=a.shape, dtype=nl.float32)
            nisa.tensor_scalar(dst=u, data=x, op0=nl.abs, operand0=0.0)
            return vals(d), vals(u)
        d, u = run(k)
        np.testing.assert_array_equal(d, (c - a) * np.float32(3))
        np.testing.assert_array_equal(u, np.abs(a))

    def test_scalar_tensor_tensor(self):
        a, b, c = rand(8, 16), rand(8, 16), rand(8, 1)

        def k():
            x, y, col, d = load(a), load(b), load(c), nl.ndarray(shape=a.shape, dtype=nl.float32)
            nisa.scalar_tensor_tensor(dst=d, data=x, op0=nl.multiply, operand0=col, op1=nl.subtract, operand1=y,
                                      reverse1=True)
            return vals(d)
        np.testing.assert_array_equal(run(k), b - a * c)

    def test_copy_memset_reciprocal_and_precision(self):
        a = rand(4, 8)

        def k():
            x, lo = load(a), nl.ndarray(shape=a.shape, dtype=nl.bfloat16)
            nisa.tensor_copy(dst=lo, src=x)
            r = nl.ndarray(shape=a.shape, dtype=nl.float32)
            nisa.reciprocal(dst=r, data=x)
            i = nl.ndarray(shape=(4, 2), dtype=nl.int16)
            nisa.memset(dst=i, value=-3)
            return vals(lo), vals(r), i.read_cells()
        lo, r, i = run(k, precision="hardware")
        np.testing.assert_array_equal(lo, a.astype(ml_dtypes.bfloat16).astype(np.float32))
        np.testing.assert_array_equal(r, np.float32(1) / a)
        self.assertEqual(i.tolist(), [[-3, -3]] * 4)
        np.testing.assert_array_equal(run(k, precision="fp32")[0], a)

        def bad():
            nisa.memset(dst=nl.ndarray(shape=(4, 2), dtype=nl.int32), value=0.5)
        self.assertRaisesRegex(NkiError, "not an integer", run, bad)


class ReduceTest(unittest.TestCase):
    def test_tensor_reduce_over_trailing_axes(self):
        a = rand(8, 4, 16)

        def k(op, axis, negate, dst_shape=(8, 4)):
            x = load(a)
            d = nl.ndarray(shape=dst_shape, dtype=nl.float32)
            nisa.tensor_reduce(dst=d, op=op, data=x, axis=axis, negate=negate)
            return vals(d)
        np.testing.assert_allclose(run(k, nl.add, (1, 2), False, (8, 1)).ravel(), a.sum(axis=(1, 2)), rtol=1e-5)
        np.testing.assert_array_equal(run(k, nl.maximum, 2, True), -a.max(axis=2))
        np.testing.assert_array_equal(run(k, nl.minimum, -1, False), a.min(axis=2))
        np.testing.assert_allclose(run(k, nl.multiply, 2, False), a.prod(axis=2), rtol=1e-5)
        self.assertRaisesRegex(NkiError, "last free dims", run, k, nl.add, 1, False)
        self.assertRaisesRegex(NkiError, "must hold 8 partitions x 4", run, k, nl.add, 2, False, (8, 1))
        self.assertRaisesRegex(NkiError, "cannot reduce", run, k, nl.subtract, 2, False)

    def test_tensor_scalar_reduce_chains_the_vector_accumulators(self):
        a, b = rand(8, 16), rand(8, 16)

        def k():
            x, y, d, res = load(a), load(b), nl.ndarray(shape=a.shape, dtype=nl.float32), nl.ndarray(
                shape=(8, 1), dtype=nl.float32)
            nisa.tensor_scalar_reduce(dst=d, data=x, op0=nl.multiply, operand0=2.0, reduce_op=nl.maximum)
            nisa.tensor_scalar_reduce(dst=d, data=y, op0=nl.add, operand0=1.0, reduce_op=nl.maximum, reduce_res=res,
                                      reduce_cmd=nisa.reduce_cmd.reduce, reduce_res_negate=True)
            first = vals(res)
            nisa.tensor_scalar_reduce(dst=d, data=y, op0=nl.add, operand0=0.0, reduce_op=nl.add, reduce_res=res,
                                      reduce_cmd=nisa.reduce_cmd.load_reduce, reduce_init=10.0)
            return first, vals(res), vals(d)
        first, second, d = run(k)
        np.testing.assert_array_equal(first.ravel(), -np.maximum((2 * a).max(1), (b + 1).max(1)))
        np.testing.assert_allclose(second.ravel(), 10 + b.sum(1), rtol=1e-5)
        np.testing.assert_array_equal(d, b)

    def test_activation_formula_and_scalar_accumulators(self):
        a, c = rand(8, 16), rand(8, 1)

        def k():
            x, col, d, res = load(a), load(c), nl.ndarray(shape=a.shape, dtype=nl.float32), nl.ndarray(
                shape=(8, 1), dtype=nl.float32)
            nisa.activation(dst=d, op=nl.exp, data=x, bias=col, scale=0.5, reduce_op=nl.add, reduce_res=res,
                            reduce_cmd=nisa.reduce_cmd.reset_reduce)
            sums = vals(res)
            nisa.activation(dst=d, op=nl.copy, data=x, reduce_cmd=nisa.reduce_cmd.reduce, reduce_res=res)
            both = vals(res)
            nisa.activation(dst=d, op=nl.tanh, data=x, reduce_cmd=nisa.reduce_cmd.reset, reduce_res=res)
            reset = vals(res)
            nisa.activation_reduce(dst=d, op=nl.square, data=x, reduce_op=nl.add, reduce_res=res, scale=col)
            return sums, both, reset, vals(res), vals(d)
        sums, both, reset, sq, d = run(k)
        e = np.exp(a * np.float32(0.5) + c)
        np.testing.assert_allclose(sums.ravel(), e.sum(1), rtol=1e-5)
        np.testing.assert_allclose(both.ravel(), e.sum(1) + a.sum(1), rtol=1e-5)
        self.assertEqual(reset.ravel().tolist(), [0.0] * 8)
        np.testing.assert_array_equal(d, (a * c) ** 2)
        np.testing.assert_allclose(sq.ravel(), ((a * c) ** 2).sum(1), rtol=1e-5)

        def bad():
            x = load(a)
            nisa.activation(dst=x, op=nl.exp, data=x, bias=1.0)
        self.assertRaisesRegex(NkiError, "scalar bias needs trn2", run, bad, generation="trn1")
        self.assertRaisesRegex(NkiError, "activation function", run,
                               lambda: nisa.activation(dst=load(a), op=nl.add, data=load(a)))


class SelectTest(unittest.TestCase):
    def test_iota_and_affine_select(self):
        a = rand(8, 12)

        def k():
            io, f = nl.ndarray(shape=(8, 3, 4), dtype=nl.int32), nl.ndarray(shape=(8, 12), dtype=nl.float32)
            nisa.iota(dst=io, pattern=[[-1, 3], [5, 4]], offset=7, channel_multiplier=10)
            nisa.iota(dst=f, pattern=[[1, 12]], channel_multiplier=12)
            m = nl.ndarray(shape=a.shape, dtype=nl.float32)
            nisa.affine_select(dst=m, pattern=[[-1, 12]], channel_multiplier=1, on_true_tile=load(a),
                               on_false_value=F32_MIN, cmp_op=nl.greater_equal, offset=2)
            return io.read_cells(), vals(f), vals(m)
        io, f, m = run(k)
        p, i, j = np.meshgrid(np.arange(8), np.arange(3), np.arange(4), indexing="ij")
        np.testing.assert_array_equal(io, 7 + 10 * p - i + 5 * j)
        np.testing.assert_array_equal(f, np.arange(96).reshape(8, 12))
        keep = 2 + np.arange(8)[:, None] - np.arange(12)[None, :] >= 0
        np.testing.assert_array_equal(m, np.where(keep, a, np.float32(F32_MIN)))

    def test_range_select_masks_and_max_reduces(self):
        a = rand(8, 16)
        lo, hi = RNG.integers(0, 20, (8, 1)).astype(np.float32), RNG.integers(10, 30, (8, 1)).astype(np.float32)

        def k(fill):
            d, res = nl.ndarray(shape=a.shape, dtype=nl.bfloat16), nl.ndarray(shape=(8, 1), dtype=nl.float32)
            nisa.range_select(dst=d, on_true_tile=load(a), comp_op0=nl.greater_equal, comp_op1=nl.less,
                              bound0=load(lo), bound1=load(hi), reduce_res=res, range_start=4, on_false_value=fill)
            return vals(d), vals(res)
        d, res = run(k, F32_MIN, precision="hardware")
        idx = 4 + np.arange(16, dtype=np.float32)
        out = np.where((idx >= lo) & (idx < hi), a, np.float32(F32_MIN))
        np.testing.assert_array_equal(d, out.astype(ml_dtypes.bfloat16).astype(np.float32))
        np.testing.assert_array_equal(res.ravel(), out.max(1))
        self.assertRaisesRegex(NkiError, "FLOAT32_MIN", run, k, -1.0)
        self.assertRaisesRegex(NkiError, "trn2 or later", run, k, F32_MIN, generation="trn1")

    def test_stream_shuffle_moves_lanes_within_quadrants(self):
        a = rand(64, 4)

        def k():
            x, d = load(a), nl.ndarray(shape=(64, 4), dtype=nl.float32)
            nisa.memset(dst=d, value=0.0)
            nisa.nc_stream_shuffle(dst=d, src=x, shuffle_mask=[31 - i if i % 2 else 255 for i in range(32)])
            b = nl.ndarray(shape=(128, 4), dtype=nl.float32)
            nisa.memset(dst=b, value=0.0)
            for q in range(4):
                nisa.nc_stream_shuffle(dst=b[32 * q:32 * q + 32], src=x[0:1], shuffle_mask=[0] * 32)
            return vals(d), vals(b)
        d, b = run(k)
        for r in range(64):
            want = a[(r // 32) * 32 + 31 - r % 32] if r % 2 else np.zeros(4)
            np.testing.assert_array_equal(d[r], want)
        np.testing.assert_array_equal(b, np.tile(a[0], (128, 1)))

        def bad():
            x = load(a)
            nisa.nc_stream_shuffle(dst=x[16:48], src=x[0:32], shuffle_mask=[0] * 32)
        self.assertRaisesRegex(NkiError, "starts at partition 16", run, bad)


class MatmulTest(unittest.TestCase):
    def test_accumulate_false_true_and_none(self):
        a, b, c = rand(32, 16), rand(32, 64), rand(32, 64)

        def k():
            st, mv, mv2 = load(a), load(b), load(c)
            acc = nl.ndarray(shape=(16, 64), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=acc, stationary=st, moving=mv)
            nisa.nc_matmul(dst=acc, stationary=st, moving=mv2)
            none = vals(acc)
            nisa.nc_matmul(dst=acc, stationary=st, moving=mv, accumulate=False)
            over = vals(acc)
            nisa.nc_matmul(dst=acc, stationary=st, moving=mv, accumulate=True)
            twice = vals(acc)
            fresh = nl.ndarray(shape=(16, 64), dtype=nl.float32, buffer=nl.psum)
            nisa.memset(dst=fresh[:, 0:32], value=1.0)
            nisa.nc_matmul(dst=fresh, stationary=st, moving=mv)
            return none, over, twice, vals(fresh)
        # On trn3, where a matmul may accumulate onto the memset cells (see the test below).
        none, over, twice, mixed = run(k, generation="trn3")
        ab, ac = a.T @ b, a.T @ c
        np.testing.assert_allclose(none, ab + ac, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(over, ab, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(twice, 2 * ab, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(mixed, np.concatenate([ab[:, :32] + 1, ab[:, 32:]], axis=1), rtol=1e-5,
                                   atol=1e-5)

    def test_explicit_accumulation_onto_memset_or_copied_psum_fails_on_trn1_and_trn2(self):
        a, b = rand(32, 16), rand(32, 64)

        def k(by_copy, accumulate=True):
            st, mv = load(a), load(b)
            acc = nl.ndarray(shape=(16, 64), dtype=nl.float32, buffer=nl.psum, name="dq_psum")
            if by_copy:
                nisa.tensor_copy(dst=acc[:, 8:24], src=load(np.full((16, 16), 0.5, np.float32)))
                nisa.nc_matmul(dst=acc[:, 0:16], stationary=st, moving=mv[:, 0:16], accumulate=False)
                nisa.nc_matmul(dst=acc[:, 0:24], stationary=st, moving=mv[:, 0:24], accumulate=accumulate)
                return vals(acc[:, 0:24])
            nisa.memset(dst=acc, value=0.25)
            nisa.nc_matmul(dst=acc, stationary=st, moving=mv, accumulate=accumulate)
            return vals(acc)
        ab = a.T @ b
        for generation in ("trn1", "trn2"):
            self.assertRaisesRegex(
                NkiError,
                r"nisa\.nc_matmul .*accumulate=True adds onto 'dq_psum' \[16, 64\] float32 in PSUM, but 1024 of its "
                r"1024 elements \(the first at \[0, 0\]\) were last written by nisa\.memset, not by a matmul: a matmul "
                r"accumulating onto PSUM that a non-matmul instruction initialised is undefined behaviour on "
                + generation, run, k, False, generation=generation)
            # The copy covered columns 8:24 and the overwriting matmul re-initialised 8:16,
            # so the accumulating one meets the copied values in 16:24: 8 columns x 16 partitions.
            self.assertRaisesRegex(
                NkiError, r"accumulate=True adds onto 'dq_psum' \[16, 24\] .* 128 of its 384 elements \(the first at "
                r"\[0, 16\]\) were last written by nisa\.tensor_copy, not by a matmul", run, k, True,
                generation=generation)
        np.testing.assert_allclose(run(k, False, generation="trn3"), ab + 0.25, rtol=1e-5, atol=1e-5)
        want = np.concatenate([2 * ab[:, 0:16], ab[:, 16:24] + 0.5], axis=1)
        np.testing.assert_allclose(run(k, True, generation="trn3"), want, rtol=1e-5, atol=1e-5)
        # accumulate=None is the compiler's inference: after a memset or copy it
        # accumulates onto it on every generation.
        for generation in ("trn1", "trn2", "trn3"):
            np.testing.assert_allclose(run(k, False, None, generation=generation), ab + 0.25, rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(run(k, True, None, generation=generation), want, rtol=1e-5, atol=1e-5)

    def test_matmul_initialised_psum_accumulates_on_every_generation(self):
        a, b, c = rand(32, 16), rand(32, 64), rand(32, 64)

        def k():
            st, mv, mv2, x = load(a), load(b), load(c), load(a[0:16])
            acc = nl.ndarray(shape=(16, 64), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=acc, stationary=st, moving=mv)
            nisa.nc_matmul(dst=acc, stationary=st, moving=mv2, accumulate=True)
            # A Tensor Engine transpose is a matmul: the default matmul adds onto it.
            t = nl.ndarray(shape=(16, 16), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_transpose(dst=t, data=x)
            nisa.nc_matmul(dst=t, stationary=st, moving=st)
            return vals(acc), vals(t)
        for generation in ("trn1", "trn2", "trn3"):
            acc, t = run(k, generation=generation)
            np.testing.assert_allclose(acc, a.T @ b + a.T @ c, rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(t, a[0:16].T + a.T @ a, rtol=1e-5, atol=1e-5)

    def test_accumulate_true_onto_unwritten_psum_fails_everywhere(self):
        def k():
            st, mv = load(rand(8, 4)), load(rand(8, 6))
            acc = nl.ndarray(shape=(4, 6), dtype=nl.float32, buffer=nl.psum, name="fresh")
            nisa.nc_matmul(dst=acc[:, 0:3], stationary=st, moving=mv[:, 0:3])
            nisa.nc_matmul(dst=acc, stationary=st, moving=mv, accumulate=True)
        for generation in ("trn1", "trn2", "trn3"):
            self.assertRaisesRegex(
                NkiError, r"accumulate=True adds onto 'fresh' \[4, 6\] float32 in PSUM, but 12 of its 24 elements "
                r"\(the first at \[0, 3\]\) have not been written .* undefined behaviour on every generation", run, k,
                generation=generation)

    def test_transpose_modes_and_limits(self):
        a = rand(64, 32)

        def k(dtype):
            x = load(a, dtype)
            t = nl.ndarray(shape=(32, 64), dtype=dtype, buffer=nl.psum)
            nisa.nc_transpose(dst=t, data=x)
            m = nl.ndarray(shape=(32, 64), dtype=dtype, buffer=nl.psum)
            nisa.nc_matmul(dst=m, stationary=x, moving=x, is_transpose=True)
            v = nl.ndarray(shape=(32, 32), dtype=dtype)
            nisa.nc_transpose(dst=v, data=x[0:32], engine=nisa.engine.vector)
            return vals(t), vals(m), vals(v)
        t, m, v = run(k, nl.bfloat16, precision="hardware")
        ab = a.astype(ml_dtypes.bfloat16).astype(np.float32)
        np.testing.assert_array_equal(t, ab.T)
        np.testing.assert_array_equal(m, ab.T)
        np.testing.assert_array_equal(v, ab[0:32].T)

        def too_big():
            x = load(rand(64, 64))
            nisa.nc_transpose(dst=nl.ndarray(shape=(64, 64), dtype=nl.float32), data=x, engine=nisa.engine.vector)
        self.assertRaisesRegex(NkiError, "32 x 32", run, too_big)

    def test_constraints(self):
        def mm(st_shape, mv_shape, dst_shape, st_dt=nl.float32, mv_dt=nl.float32, dst_dt=nl.float32, buf=nl.psum):
            def k():
                st, mv = load(rand(*st_shape), st_dt), load(rand(*mv_shape), mv_dt)
                d = nl.ndarray(shape=dst_shape, dtype=dst_dt, buffer=buf)
                nisa.nc_matmul(dst=d, stationary=st, moving=mv)
            return k
        cases = [
            (mm((16, 8), (16, 4), (8, 4), buf=nl.sbuf), "must be in PSUM"),
            (mm((16, 8), (8, 4), (8, 4)), "contraction"),
            (mm((16, 129), (16, 4), (128, 4)), "gemm_stationary_fmax"),
            (mm((16, 8), (16, 513), (8, 512)), "gemm_moving_fmax 512"),
            (mm((16, 8), (16, 4), (8, 4), mv_dt=nl.bfloat16), "both must be"),
            (mm((16, 8), (16, 4), (8, 4), st_dt=nl.int32, mv_dt=nl.int32), "float dtype"),
            (mm((16, 8), (16, 4), (8, 5)), "stationary\\^T.moving is 8 x 4"),
            (mm((16, 8), (16, 4), (8, 4), nl.bfloat16, nl.bfloat16, nl.bfloat16), "must be float32"),
        ]
        for k, msg in cases:
            self.assertRaisesRegex(NkiError, msg, run, k)
        run(mm((16, 8), (16, 4), (8, 4), nl.bfloat16, nl.bfloat16, nl.bfloat16), generation="trn3")


class DmaAndRegisterTest(unittest.TestCase):
    def test_dma_copy_casts_and_pairs_row_major(self):
        a = rand(4, 6)

        def k():
            t = nl.ndarray(shape=(4, 6), dtype=nl.bfloat16)
            nisa.dma_copy(dst=t, src=hbm(a))
            out = nl.ndarray(shape=(6, 4), dtype=nl.float32, buffer=nl.shared_hbm)
            nisa.dma_copy(dst=out, src=t)
            return vals(out)
        np.testing.assert_array_equal(run(k, precision="hardware"),
                                      a.astype(ml_dtypes.bfloat16).astype(np.float32).reshape(6, 4))

        def bad(mode):
            t = nl.ndarray(shape=(4, 6), dtype=nl.bfloat16)
            nisa.dma_copy(dst=t, src=hbm(a), dge_mode=mode)
        self.assertRaisesRegex(NkiError, "hwdge", run, bad, nisa.dge_mode.hwdge)

        def from_psum():
            p = nl.ndarray(shape=(4, 6), dtype=nl.float32, buffer=nl.psum)
            nisa.dma_copy(dst=hbm(a), src=p)
        self.assertRaisesRegex(NkiError, "PSUM", run, from_psum)

    def test_dma_transpose(self):
        a, b = rand(6, 4), rand(5, 1, 3, 4)

        def k():
            t, u = nl.ndarray(shape=(4, 6), dtype=nl.float32), nl.ndarray(shape=(4, 1, 3, 5), dtype=nl.float32)
            nisa.dma_transpose(dst=t, src=hbm(a))
            nisa.dma_transpose(dst=u, src=hbm(b), axes=(3, 1, 2, 0))
            return vals(t), vals(u)
        t, u = run(k)
        np.testing.assert_array_equal(t, a.T)
        np.testing.assert_array_equal(u, b.transpose(3, 1, 2, 0))

    def test_dma_transpose_dge_rules(self):
        """One failing call per documented rule, each error naming the op, the
        operand and the rule; then calls at the edge of every hwdge limit."""
        hw, unknown = nisa.dge_mode.hwdge, nisa.dge_mode.unknown

        def flip(src_shape, dst_shape, dtype=nl.bfloat16, kw=None, dst_dtype=None):
            kw = kw or {}
            src = hbm(np.arange(np.prod(src_shape), dtype=np.float32).reshape(src_shape), dtype)
            dst = nl.ndarray(shape=dst_shape, dtype=dst_dtype or dtype)
            nisa.dma_transpose(dst=dst, src=src, **kw)
            return vals(dst)

        for what, pattern, args in [
            ("cast", "does not cast", ((16, 8), (8, 16), nl.bfloat16, {}, nl.float32)),
            ("rank 5", "2-, 3- or 4-d", ((2, 1, 1, 1, 8), (8, 1, 1, 1, 2))),
            ("axes of another rank", "not a supported permutation",
             ((16, 8), (8, 16), nl.bfloat16, {"axes": (2, 1, 0)})),
        ]:
            with self.subTest(what):
                self.assertRaisesRegex(NkiError, "nisa.dma_transpose.*" + pattern, run, flip, *args)

        bf16, f32 = nl.bfloat16, nl.float32
        failing = [
            ("dst rank", "rank included", (4, 1, 1, 8), (8, 4), bf16, {}, "trn2"),
            ("swdge", "dge_mode: swdge", (16, 8), (8, 16), bf16, {"dge_mode": nisa.dge_mode.swdge}, "trn2"),
            ("oob skip", "oob_mode: skip", (16, 8), (8, 16), bf16, {"oob_mode": nisa.oob_mode.skip}, "trn2"),
            ("hwdge on trn1", "dge_mode: hwdge on trn1", (16, 8), (8, 16), bf16, {"dge_mode": hw}, "trn1"),
            ("hwdge fp32", "src: float32 has 4-byte", (16, 8), (8, 16), f32, {"dge_mode": hw}, "trn2"),
            ("hwdge 2-d rows", "src: shape \\[8, 64\\] has 8 rows", (8, 64), (64, 8), bf16, {"dge_mode": hw}, "trn2"),
            ("hwdge 3-d lead", "leads with 3", (3, 16, 8), (8, 16, 3), bf16, {"dge_mode": hw}, "trn2"),
            ("hwdge 4-d rows", "= 8; dge_mode=hwdge needs a multiple of 16", (2, 1, 4, 8), (8, 1, 4, 2), bf16,
             {"dge_mode": hw}, "trn2"),
        ]
        for what, pattern, src_shape, dst_shape, dtype, kw, generation in failing:
            with self.subTest(what):
                with self.assertRaisesRegex(NkiError, "nisa.dma_transpose") as caught:
                    run(flip, src_shape, dst_shape, dtype, kw, generation=generation)
                self.assertRegex(str(caught.exception), pattern)

        for generation in ("trn2", "trn3"):
            x = np.arange(16 * 128, dtype=np.float32).reshape(16, 128)
            np.testing.assert_array_equal(run(flip, (16, 128), (128, 16), nl.float16, {"dge_mode": hw},
                                              generation=generation), x.T)
            for lead, mid in ((1, 16), (16, 1), (8, 2)):
                y = np.arange(lead * mid * 128, dtype=np.float32).reshape(lead, 1, mid, 128)
                got = run(flip, y.shape, (128, 1, mid, lead), nl.float16, {"dge_mode": hw}, generation=generation)
                np.testing.assert_array_equal(got, y.transpose(3, 1, 2, 0))
        z = np.arange(512 * 96, dtype=np.float32).reshape(512, 1, 1, 96)
        np.testing.assert_array_equal(run(flip, z.shape, (96, 1, 1, 512), nl.float32, {"dge_mode": unknown}),
                                      z.transpose(3, 1, 2, 0))
        # A static transpose without a DGE (the DGE reference lists `none` for
        # it; the AWS library's mlp_tkg loads its bias and row scales this way).
        np.testing.assert_array_equal(run(flip, z.shape, (96, 1, 1, 512), nl.float32, {"dge_mode": nisa.dge_mode.none}),
                                      z.transpose(3, 1, 2, 0))

    def test_registers_and_dynamic_offsets(self):
        table = np.arange(12, dtype=np.float32).reshape(3, 4)

        def k():
            r = nisa.register_alloc(x=2)
            s = nl.ndarray(shape=(1, 1), dtype=nl.int32)
            nisa.register_store(dst=s, src=r)
            r2 = nisa.register_alloc()
            nisa.register_load(dst=r2, src=s)
            nisa.register_move(dst=r2, src=r2.value - 1)
            t = nl.ndarray(shape=(1, 4), dtype=nl.float32)
            nisa.dma_copy(dst=t, src=hbm(table).ap(pattern=[[4, 1], [1, 4]], offset=0, scalar_offset=r2,
                                                    indirect_dim=0))
            return r2.value, vals(t)
        value, row = run(k)
        self.assertEqual(value, 1)
        np.testing.assert_array_equal(row, table[1:2])

    def test_register_alloc_from_a_tensor(self):
        # register_alloc(x) with x a one-element tensor loads it (the AWS
        # library's MX all-expert dynamic loop starts its register so).
        def k():
            s = nl.ndarray(shape=(1, 3), dtype=nl.int32)
            nisa.iota(s, [[1, 3]], offset=5)
            return nisa.register_alloc(s[0, 1]).value
        self.assertEqual(run(k), 6)
        self.assertRaisesRegex(NkiError, "register_alloc", run,
                               lambda: nisa.register_alloc(nl.ndarray(shape=(1, 2), dtype=nl.int32)))


class LanguageTest(unittest.TestCase):
    def test_allocation_limits(self):
        self.assertRaisesRegex(NkiError, "pmax 128", run, lambda: nl.ndarray(shape=(129, 2), dtype=nl.float32))
        self.assertRaisesRegex(NkiError, "more than PSUM holds on trn2", run,
                               lambda: nl.ndarray(shape=(128, 4097), dtype=nl.float32, buffer=nl.psum))
        run(lambda: nl.ndarray(shape=(128, 4096), dtype=nl.float32, buffer=nl.psum))

    def test_grid_queries_and_nested_kernels(self):
        inner = nki.jit(lambda: (nl.program_id(axis=0), nl.num_programs(axes=0), nl.program_ndim()))
        self.assertEqual(run(lambda: inner()), (0, 1, 0))
        self.assertEqual(run(lambda: inner[2](), grid=2), (0, 2, 1))
        self.assertEqual(nl.tile_size.pmax, 128)
        self.assertEqual([i for i in nl.affine_range(start=1, stop=7, step=3)], [1, 4])
        self.assertTrue(nisa.nc_version.gen3 == 3 and nisa.nc_version.gen4 > 3)


class MemoryTest(unittest.TestCase):
    """The on-chip memory model (SEMANTICS.md): tiles hold PSUM banks and SBUF bytes
    from their first to their last use; placed tiles share the bytes they overlap."""

    @staticmethod
    def used(shape, value=0.0, dtype=nl.float32, name="", address=None):
        """Inside a kernel: a PSUM tensor that an instruction has written."""
        t = nl.ndarray(shape=shape, dtype=dtype, buffer=nl.psum, name=name, address=address)
        nisa.memset(dst=t, value=value)
        return t

    @staticmethod
    def total(tiles):
        """Inside a kernel: the sum of column 0 of `tiles` (each read by an instruction)."""
        acc = nl.ndarray(shape=(128, 1), dtype=nl.float32)
        nisa.memset(dst=acc, value=0.0)
        for t in tiles:
            nisa.tensor_tensor(dst=acc, data1=acc, data2=t[:, 0:1], op=nl.add)
        return float(vals(acc)[0, 0])

    def test_eight_live_tiles_fit_and_a_ninth_live_at_once_fails(self):
        def k(n):
            tiles = [self.used((128, 1), float(i), name=f"t{i}") for i in range(n)]
            return self.total(tiles), fake.current().memory.psum_peak
        self.assertEqual(run(k, 8), (28.0, 8))
        with self.assertRaises(NkiError) as cm:
            run(k, 9)
        msg = str(cm.exception)
        for part in ("PSUM capacity exceeded: tensor 't8' needs 1 bank (4 B per partition",
                     "8 of the 8 banks are in use: 't0' (1 bank), 't1' (1 bank)", "'t7' (1 bank)",
                     "'t8' is first used at nisa.memset (test_harness.py:", "test_harness.py:"):
            self.assertIn(part, msg)

    def test_more_tiles_than_banks_over_a_lifetime_run_when_at_most_eight_are_live(self):
        def k():
            held = [self.used((128, 512), 1.0) for _ in range(7)]
            steps = []
            for i in range(50):  # every handle kept: each tile is dead after its read
                steps.append(self.used((128, 3), float(i)))
                self.total([steps[-1]])
            return self.total(held), len(steps), fake.current().memory.psum_peak
        self.assertEqual(run(k), (7.0, 50, 8))

    def test_a_two_bank_tile_counts_two_on_trn3(self):
        def k(n):
            wide = self.used((128, 1024), name="wide")  # 4096 B per partition
            rest = [self.used((128, 1), name=f"c{i}") for i in range(n)]
            return self.total([wide] + rest), fake.current().memory.psum_peak
        self.assertEqual(run(k, 6, generation="trn3"), (0.0, 8))
        self.assertRaisesRegex(NkiError, "'c6' needs 1 bank .* 8 of the 8 banks are in use: 'wide' \\(2 banks\\)", run, k, 7,
                               generation="trn3")

    def test_each_lnc_program_has_its_own_banks(self):
        def k(rank):
            tiles = [self.used((128, 1)) for _ in range(8)]
            self.total(tiles)
            return fake.current().memory.psum_peak
        self.assertEqual(run_ranks(k, 2, grid=2), [8, 8])

    def test_placed_tiles_share_their_bank_and_count_it_once(self):
        def k():
            same = [nl.ndarray(shape=(128, 1), dtype=nl.float32, buffer=nl.psum, address=(0, 3 * 2048))
                    for _ in range(10)]
            nisa.memset(dst=same[0], value=5.0)
            through_others = self.total(same[1:])  # a write through one tile is read through the others
            autos = [self.used((128, 1), 1.0) for _ in range(7)]
            return through_others, self.total(autos + same[9:]), fake.current().memory.psum_peak
        self.assertEqual(run(k), (45.0, 12.0, 8))

    def test_an_alias_read_sees_the_other_tiles_bytes_through_their_dtypes(self):
        def k():
            wide = nl.ndarray(shape=(2, 4), dtype=nl.float32, address=(0, 64))
            halves = nl.ndarray(shape=(2, 4), dtype=nl.bfloat16, address=(0, 64))
            nisa.memset(dst=wide, value=1.0)
            out = nl.ndarray(shape=(2, 4), dtype=nl.float32)
            nisa.tensor_copy(dst=out, src=halves)
            return vals(out)
        # 1.0f32 is 0x3F800000: little-endian bf16 halves 0x0000 (0.0) and 0x3F80 (1.0).
        np.testing.assert_array_equal(run(k), [[0, 1, 0, 1]] * 2)

    def test_a_write_over_bytes_another_tile_still_reads_is_a_hazard(self):
        def k(clobber):
            first = nl.ndarray(shape=(128, 512), dtype=nl.float32, buffer=nl.psum, name="first", address=(0, 2048))
            second = nl.ndarray(shape=(64, 256), dtype=nl.float32, buffer=nl.psum, name="second", address=(0, 2048))
            nisa.memset(dst=first, value=1.0)
            nisa.memset(dst=second, value=2.0)
            return self.total([first[:, 300:301] if not clobber else first])
        self.assertEqual(run(k, False), 1.0)  # bytes the second tile did not cover stay the first's
        with self.assertRaises(NkiError) as cm:
            run(k, True)
        msg = str(cm.exception)
        for part in ("nisa.tensor_tensor (test_harness.py:", "reads 'first' (address (0, 2048)) [128, 512] float32, but "
                     "bytes it wrote (at nisa.memset (test_harness.py:", "were overwritten through 'second' (address "
                     "(0, 2048)) [64, 256] float32 (at nisa.memset (test_harness.py:",
                     "finish reading 'first' (address (0, 2048)) before writing 'second'"):
            self.assertIn(part, msg)

    def test_placements_are_checked_against_the_memory(self):
        def refused(shape, buffer, address):
            return lambda: nl.ndarray(shape=shape, dtype=nl.float32, buffer=buffer, name="t", address=address)
        for shape, buffer, address, part in [
            ((128, 512), nl.psum, (0, 1024), "PSUM tensor 't' \\[128, 512\\] float32 at address \\(0, 1024\\): a PSUM "
                                              "tensor must start at the beginning of a bank .*multiple of 2048 B"),
            ((128, 512), nl.psum, (0, 8 * 2048), "end at byte 18432, past the 16384 B of a PSUM partition"),
            ((64, 4), nl.sbuf, (65, 0), "64 partitions from partition 65 reach past the 128 partitions"),
            ((1, 4), nl.sbuf, (-1, 0), "must be non-negative"),
        ]:
            self.assertRaisesRegex(NkiError, "nl.ndarray.*" + part, run, refused(shape, buffer, address))
        run(lambda: nl.ndarray(shape=(128, 512), dtype=nl.float32, buffer=nl.psum, address=(0, 7 * 2048)))

    def test_one_instructions_operands_must_fit_in_sbuf_together(self):
        def k():
            x, y = nl.ndarray(shape=(128, 30000), dtype=nl.float32), nl.ndarray(shape=(128, 30000), dtype=nl.float32)
            nisa.memset(dst=x, value=1.0)
            nisa.tensor_copy(dst=y, src=x)
        self.assertRaisesRegex(NkiError, "SBUF capacity exceeded: nisa.tensor_copy \\(test_harness.py:.* works on "
                               "240000 B per partition of SBUF at once \\('tensor' 120000 B, 'tensor' 120000 B\\)", run, k)


    def test_a_column_operand_counts_toward_the_partition(self):
        # Two 112 KiB tiles fill a trn2 partition; the (P, 1) operand's 4 bytes are one too many.
        def k(use_column):
            x, y = nl.ndarray(shape=(128, 28672), dtype=nl.float32), nl.ndarray(shape=(128, 28672), dtype=nl.float32)
            col = nl.ndarray(shape=(128, 1), dtype=nl.float32)
            nisa.memset(dst=x, value=1.0)
            nisa.memset(dst=col, value=2.0)
            nisa.tensor_scalar(dst=y, data=x, op0=nl.subtract, operand0=col if use_column else 2.0)
        self.assertRaisesRegex(NkiError, "SBUF capacity exceeded: nisa.tensor_scalar .* works on 229380 B", run, lambda: k(True))
        run(lambda: k(False))

class UndefinedReadTest(unittest.TestCase):
    """Reads of memory nothing wrote: zero bits, each site reported (SEMANTICS.md)."""

    @staticmethod
    def half_written():
        """Inside a kernel: copies an SBUF tile whose columns 2..4 were never written."""
        t = nl.ndarray(shape=(4, 4), dtype=nl.float32, name="partial")
        nisa.dma_copy(dst=t[:, 0:2], src=hbm(np.ones((4, 2))))
        out = nl.ndarray(shape=(4, 4), dtype=nl.float32)
        nisa.tensor_copy(dst=out, src=t)  # the line the report names
        return vals(out)

    def line_of(self, text):
        return next(i for i, line in enumerate(Path(__file__).read_text().splitlines(), 1) if text in line)

    def test_a_read_of_unwritten_sbuf_is_reported_with_its_site_and_reads_zero(self):
        line = self.line_of("the line the report names")
        with uninit_mode(strict=False), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = run(self.half_written)
        self.assertEqual([type(w.message) for w in caught], [UndefinedRead])
        self.assertRegex(str(caught[0].message),
                         rf"^undefined behaviour: nisa.tensor_copy \(test_harness.py:{line}\) reads 8 elements of "
                         r"'partial' \[4, 4\] float32 in SBUF that nothing wrote since it was allocated \(the first at "
                         r"\[0, 2\]\)")
        np.testing.assert_array_equal(out, np.repeat([[1.0, 1.0, 0.0, 0.0]], 4, axis=0))

    def test_strict_mode_makes_the_read_an_error(self):
        line = self.line_of("the line the report names")
        with uninit_mode(strict=True), self.assertRaises(NkiError) as cm:
            run(self.half_written)
        self.assertRegex(str(cm.exception), rf"^nisa.tensor_copy \(test_harness.py:{line}\): undefined behaviour: "
                                            r"the instruction reads 8 elements of 'partial'")

    def test_repeated_reads_are_one_report_and_written_tiles_none(self):
        def k():
            t = nl.ndarray(shape=(2, 8), dtype=nl.bfloat16, name="looped")
            nisa.memset(dst=t[:, 0:4], value=1.0)
            acc = nl.ndarray(shape=(2, 1), dtype=nl.float32)
            nisa.memset(dst=acc, value=0.0)
            for j in range(8):
                nisa.tensor_tensor(dst=acc, data1=acc, data2=t[:, j:j + 1], op=nl.add)
            return vals(acc)
        with uninit_mode(strict=False), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            np.testing.assert_array_equal(run(k), [[4.0], [4.0]])
        self.assertEqual(len(caught), 1)
        self.assertIn("nisa.tensor_tensor", str(caught[0].message))
        self.assertIn("reads 8 elements of 'looped' [2, 8] bfloat16 in SBUF", str(caught[0].message))
        self.assertIn("(the first at [0, 4])", str(caught[0].message))

    def test_a_storage_drops_its_mask_once_every_cell_is_written(self):
        masks = []

        def k():
            t = nl.ndarray(shape=(2, 8), dtype=nl.float32, name="filled")
            nisa.memset(dst=t[:, 0:4], value=1.0)
            masks.append(t.storage.unwritten is None)
            nisa.memset(dst=t[:, 4:8], value=2.0)
            masks.append(t.storage.unwritten is None)
            return vals(t)
        with uninit_mode(strict=False), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            np.testing.assert_array_equal(run(k), np.repeat([[1.0] * 4 + [2.0] * 4], 2, axis=0))
        self.assertEqual(caught, [])
        self.assertEqual(masks, [False, True])

    def test_cells_an_instruction_keeps_are_not_reads(self):
        def k():
            pred = nl.ndarray(shape=(2, 4), dtype=nl.uint8)
            nisa.memset(dst=pred[:, 0:2], value=1)
            nisa.memset(dst=pred[:, 2:4], value=0)
            t = nl.ndarray(shape=(2, 4), dtype=nl.float32, name="kept")
            nisa.tensor_copy_predicated(dst=t, src=2.0, predicate=pred)
            return vals(pred)
        with uninit_mode(strict=False), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run(k)
        self.assertEqual(caught, [])

    def test_matmul_reads_only_the_psum_it_adds_onto(self):
        a, b = rand(8, 4), rand(8, 6)

        def k():
            st, mv = load(a), load(b)
            acc = nl.ndarray(shape=(4, 6), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=acc, stationary=st, moving=mv)
            nisa.nc_matmul(dst=acc, stationary=st, moving=mv)
            return vals(acc)
        with uninit_mode(strict=False), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            np.testing.assert_allclose(run(k), 2 * a.T @ b, rtol=1e-5, atol=1e-5)
        self.assertEqual(caught, [])

    def test_matmul_mx_reads_only_the_scale_rows_of_its_scale_tiles(self):
        # A scale tile spans the data's 64 partitions; rows 0..4 and 32..36 hold
        # the 8 groups' scales, and no other row is read.
        def k(last):
            data = nl.ndarray(shape=(64, 4), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
            nisa.dma_copy(dst=data, src=from_cells("input", nl.float8_e4m3fn_x4, SHARED_HBM, np.zeros((64, 4), np.int64)))
            scales = nl.ndarray(shape=(64, 4), dtype=nl.uint8, buffer=nl.sbuf, name="scales")
            nisa.memset(dst=scales[0:4, :], value=127)
            nisa.memset(dst=scales[32:last, :], value=127)
            d = nl.ndarray(shape=(4, 4), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul_mx(dst=d, stationary=data, moving=data, stationary_scale=scales, moving_scale=scales)
            return vals(d)
        with uninit_mode(strict=True):
            np.testing.assert_array_equal(run(k, 36, generation="trn3"), np.zeros((4, 4)))
            with self.assertRaisesRegex(NkiError, r"reads 4 elements of 'scales' \[64, 4\] uint8 in SBUF that nothing "
                                                  r"wrote since it was allocated \(the first at \[35, 0\]\)"):
                run(k, 35, generation="trn3")

    def test_byte_views_and_placed_aliases_count_the_bytes_written(self):
        def k():
            raw = nl.ndarray(shape=(2, 4), dtype=nl.int32, name="raw")
            nisa.memset(dst=raw.view(nl.int8)[:, 0:8], value=1)  # int32 cells 0 and 1 of each row
            first = nl.ndarray(shape=(2, 2), dtype=nl.int32)
            nisa.tensor_copy(dst=first, src=raw[:, 0:2])
            a = nl.ndarray(shape=(2, 4), dtype=nl.float32, address=(0, 0), name="a")
            nisa.memset(dst=a, value=2.0)
            b = nl.ndarray(shape=(2, 4), dtype=nl.float32, address=(0, 0), name="b")
            copy = nl.ndarray(shape=(2, 4), dtype=nl.float32)
            nisa.tensor_copy(dst=copy, src=b)  # b's bytes hold what a wrote
            whole = nl.ndarray(shape=(2, 4), dtype=nl.int32)
            nisa.tensor_copy(dst=whole, src=raw)
            return vals(first), vals(copy), vals(whole)
        with uninit_mode(strict=False), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            first, copy, whole = run(k)
        np.testing.assert_array_equal(first, np.full((2, 2), np.float32(0x01010101)))  # through float32
        np.testing.assert_array_equal(copy, np.full((2, 4), 2.0))
        np.testing.assert_array_equal(whole[:, 2:], 0)
        self.assertEqual(len(caught), 1)
        self.assertIn("reads 4 elements of 'raw' [2, 4] int32 in SBUF", str(caught[0].message))
        self.assertIn("(the first at [0, 2])", str(caught[0].message))


class LaunchTest(unittest.TestCase):
    def test_lnc2_programs_share_hbm_and_meet_at_barriers(self):
        # On the shared output, or on an SBUF tile each program keeps (the
        # library's hybrid MoE loop meets on its SBUF block counter).
        for on_sbuf in (False, True):
            def k(rank, on_sbuf=on_sbuf):
                out = nl.ndarray(shape=(2, 4), dtype=nl.float32, buffer=nl.shared_hbm)
                pid = nl.program_id(axis=0)
                t = nl.ndarray(shape=(1, 4), dtype=nl.float32)
                nisa.memset(dst=t, value=float(pid + 1))
                nisa.dma_copy(dst=out[pid:pid + 1, :], src=t)
                nisa.core_barrier(data=t if on_sbuf else out, cores=(0, 1))
                seen = nl.ndarray(shape=(2, 4), dtype=nl.float32)
                nisa.dma_copy(dst=seen, src=out)
                return vals(seen)
            got = run_ranks(k, 1, grid=2)[0]
            np.testing.assert_array_equal(got, [[1] * 4, [2] * 4])
        self.assertRaisesRegex(NkiError, "without an LNC2 grid", run_ranks, k, 1)

    def test_core_barrier_refuses_psum_and_private_hbm(self):
        for buf in (nl.psum, nl.private_hbm):
            def k(rank, buf=buf):
                nisa.core_barrier(data=nl.ndarray(shape=(1, 4), dtype=nl.float32, buffer=buf), cores=(0, 1))
            self.assertRaisesRegex(NkiError, "shared_hbm tensor or an SBUF tile", run_ranks, k, 1, grid=2)

    def test_kernel_errors_carry_their_source_line(self):
        def k():
            assert False, "boom"
        with self.assertRaises(NkiError) as cm:
            run(k)
        self.assertIn("test_harness.py:", str(cm.exception))
        self.assertIn("AssertionError: boom", str(cm.exception))


class CollectiveTest(unittest.TestCase):
    def test_ring_permute_receives_from_the_predecessor(self):
        def k(rank):
            src, dst = nl.ndarray(shape=(2, 3), dtype=nl.float32), nl.ndarray(shape=(2, 3), dtype=nl.float32)
            s2, d2 = nl.ndarray(shape=(2, 3), dtype=nl.float32), nl.ndarray(shape=(2, 3), dtype=nl.float32)
            nisa.memset(dst=src, value=float(rank))
            nisa.memset(dst=s2, value=float(10 * rank))
            ncc.collective_permute_implicit(srcs_by_channel=[[src], [s2]], dsts_by_channel=[[dst], [d2]],
                                            replica_group=ncc.ReplicaGroup(((0, 1, 2),)), channel_ids=[0, 1])
            red = nl.ndarray(shape=(2, 3), dtype=nl.float32)
            ncc.collective_permute_implicit_reduce(srcs0_by_channel=[[src]], srcs1_by_channel=[[dst]],
                                                   dsts_by_channel=[[red]], replica_group=ncc.ReplicaGroup(()),
                                                   op=nl.add)
            ids = [ncc.collective_permute_implicit_current_processing_rank_id(
                iteration_id=s, replica_group=ncc.ReplicaGroup(((0, 1, 2),))).value for s in range(3)]
            return vals(dst)[0, 0], vals(d2)[0, 0], vals(red)[0, 0], ids
        got = run_ranks(k, 3)
        for r, (recv, recv2, red, ids) in enumerate(got):
            pred = (r - 1) % 3
            self.assertEqual((recv, recv2), (pred, 10 * pred))
            self.assertEqual(red, pred + (pred - 1) % 3)
            self.assertEqual(ids, [r, (r - 1) % 3, (r - 2) % 3])

    def test_sub_rings(self):
        def k(rank):
            src, dst = nl.ndarray(shape=(1, 1), dtype=nl.float32), nl.ndarray(shape=(1, 1), dtype=nl.float32)
            nisa.memset(dst=src, value=float(rank))
            ncc.collective_permute_implicit(srcs_by_channel=[[src]], dsts_by_channel=[[dst]],
                                            replica_group=ncc.ReplicaGroup(((0, 2), (1,))))
            return float(vals(dst)[0, 0])
        self.assertEqual(run_ranks(k, 3), [2.0, 1.0, 0.0])

    def assertFailsFast(self, fn, ranks, pattern):
        start = time.monotonic()
        self.assertRaisesRegex(NkiError, pattern, run_ranks, fn, ranks)
        self.assertLess(time.monotonic() - start, 5.0)

    def test_missing_mismatched_and_deadlocked_collectives_fail_quickly(self):
        def permute(rank, ring):
            t = nl.ndarray(shape=(1, 1), dtype=nl.float32)
            nisa.memset(dst=t, value=0.0)
            ncc.collective_permute_implicit(srcs_by_channel=[[t]], dsts_by_channel=[[t]],
                                            replica_group=ncc.ReplicaGroup(ring))

        self.assertFailsFast(lambda r: permute(r, ((0, 1, 2),)) if r == 0 else None, 3,
                             "program 0 finished without joining collective_permute_implicit, which rank 0")
        self.assertFailsFast(lambda r: permute(r, ((0, 1), (2,)) if r < 2 else ((0, 2), (1,))), 3,
                             "where its partners issued|deadlock|finished without joining")
        self.assertFailsFast(lambda r: permute(r, ((0, 1),) if r == 0 else ((1, 0),)), 2, "deadlock")

        def mismatch(rank):
            t = nl.ndarray(shape=(1, 1), dtype=nl.float32)
            nisa.memset(dst=t, value=0.0)
            g = ncc.ReplicaGroup(())
            if rank == 1:
                ncc.collective_permute_implicit_reduce(srcs0_by_channel=[[t]], srcs1_by_channel=[[t]],
                                                       dsts_by_channel=[[t]], replica_group=g, op=nl.add)
            else:
                ncc.collective_permute_implicit(srcs_by_channel=[[t]], dsts_by_channel=[[t]], replica_group=g)
        self.assertFailsFast(mismatch, 3, "where its partners issued")


class CheckerTest(unittest.TestCase):
    api = Api()

    def problems(self, source):
        with tempfile.TemporaryDirectory() as d:
            p = Path(d, "m.py")
            p.write_text(textwrap.dedent(source))
            return [msg for _, msg in checker.check_file(self.api, p)[0]]

    def test_good_snippet_is_clean(self):
        self.assertEqual(self.problems("""
            import nki
            import nki.language as nl
            import nki.isa as nisa
            import nki.collectives as ncc

            @nki.jit
            def k(a):
                t = nl.ndarray(shape=(nl.tile_size.pmax, 4), dtype=nl.bfloat16, buffer=nl.sbuf)
                nisa.dma_copy(dst=t, src=a[0:128, :], dge_mode=nisa.dge_mode.unknown)
                nisa.activation(dst=t, op=nl.exp, data=t, reduce_cmd=nisa.reduce_cmd.reset_reduce)
                v = t.ap(pattern=[[4, 128], [1, 4]], offset=0).reshape(shape=(128, 2, 2))
                g = ncc.ReplicaGroup(((0, 1),))
                if nisa.get_nc_version() >= nisa.nc_version.gen3:
                    pass
                return t
        """), [])

    def test_bad_snippets_are_reported(self):
        found = self.problems("""
            import nki.language as nl
            import nki.isa as nisa
            import nki.collectives as ncc
            import nki.fancy
            t = nl.ndarray(shape=(1, 1), dtype=nl.float32, buffer=nl.sbuff)
            nisa.dma_copy(dst=t, source=t)
            nisa.dma_copy(t, t)
            nisa.get_nc_version(1)
            x = t.ap(pattern=[[1, 1]], offst=0)
            y = t.slice(0, 0, 1, 1, 9)
            e = nisa.engine.vectr + nl.tile_size.pmax2
            g = ncc.ReplicaGroup(groups=((0,),))
            nl.float32(3)
        """)
        expected = ["unknown module nki.fancy", "nl.sbuff", "no parameter 'source'", "2 positional argument(s)",
                    "at most 0 arguments", "no parameter 'offst'", "NkiTensor.slice) takes at most 4",
                    "nisa.engine.vectr", "nl.tile_size.pmax2", "takes its 1 argument(s) positionally",
                    "is a value, not a function"]
        for want in expected:
            self.assertTrue(any(want in f for f in found), f"{want!r} not in {found}")
        self.assertEqual(len(found), len(expected))


class CommandLineTest(unittest.TestCase):
    PACKAGE = {
        # `other` defines another `Scaling`, which the package exports under that name.
        "__init__.py": "from .kernels import Scaling, ScaleConfig, ScalingConfig, configured, scaled_by, scaled_by_config, scale, ring, ring_in, padded\n"
                       "from .other import Scaling\n",
        "other.py": """
            from enum import Enum


            class Scaling(Enum):
                DOUBLE = 0
        """,
        "helpers.py": """
            import nki.language as nl
            import nki.isa as nisa


            def load(src, rows, cols):
                t = nl.ndarray(shape=(rows, cols), dtype=src.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=t, src=src[0:rows, 0:cols])
                return t
        """,
        "kernels.py": """
            from dataclasses import dataclass
            from enum import Enum

            import nki
            import nki.language as nl
            import nki.isa as nisa
            import nki.collectives as ncc
            from .helpers import load


            @nki.jit
            def scale(x, factor, twice=False):
                n, m = x.shape
                assert n <= 128, f"at most 128 rows, got {n}"
                t = load(x, n, m)
                nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=factor * (2 if twice else 1))
                out = nl.ndarray(shape=(n, m), dtype=x.dtype, buffer=nl.shared_hbm)
                nisa.dma_copy(dst=out, src=t)
                return out, x


            @dataclass
            class ScaleConfig(nl.NKIObject):
                factor: float = 1.0
                rows: int = 0


            @nki.jit
            def configured(x, cfg):
                assert x.shape[0] == cfg.rows, f"cfg.rows={cfg.rows} but x has {x.shape[0]} rows"
                t = load(x, x.shape[0], x.shape[1])
                nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=cfg.factor)
                out = nl.ndarray(shape=x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
                nisa.dma_copy(dst=out, src=t)
                return out


            class Scaling(Enum):
                HALF = 0
                TRIPLE = 1


            @nki.jit
            def scaled_by(x, how):
                assert isinstance(how, Scaling), f"how={how!r} is not a Scaling member"
                t = load(x, x.shape[0], x.shape[1])
                factor = 0.5 if how == Scaling.HALF else 3.0
                nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=factor)
                out = nl.ndarray(shape=x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
                nisa.dma_copy(dst=out, src=t)
                return out


            @dataclass
            class ScalingConfig(nl.NKIObject):
                offset: float = 0.0
                how: Scaling = Scaling.TRIPLE


            @nki.jit
            def scaled_by_config(x, cfg):
                assert isinstance(cfg.how, Scaling), f"cfg.how={cfg.how!r} is not a Scaling member"
                return scaled_by(x, cfg.how)


            @nki.jit
            def ring(x):
                t = load(x, x.shape[0], x.shape[1])
                r = nl.ndarray(shape=x.shape, dtype=x.dtype, buffer=nl.sbuf)
                ncc.collective_permute_implicit(srcs_by_channel=[[t]], dsts_by_channel=[[r]],
                                                replica_group=ncc.ReplicaGroup(((0, 1, 2),)))
                out = nl.ndarray(shape=x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
                nisa.dma_copy(dst=out, src=r)
                return out


            @nki.jit
            def ring_in(x, group):
                assert isinstance(group, ncc.ReplicaGroup), f"group={group!r} is not a ReplicaGroup"
                t = load(x, x.shape[0], x.shape[1])
                r = nl.ndarray(shape=x.shape, dtype=x.dtype, buffer=nl.sbuf)
                ncc.collective_permute_implicit(srcs_by_channel=[[t]], dsts_by_channel=[[r]], replica_group=group)
                out = nl.ndarray(shape=x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
                nisa.dma_copy(dst=out, src=r)
                return out


            @nki.jit
            def padded(x):
                n, m = x.shape
                t = nl.ndarray(shape=(n, m + 2), dtype=x.dtype, buffer=nl.sbuf, name="wide")
                nisa.dma_copy(dst=t[:, 0:m], src=x)
                out = nl.ndarray(shape=(n, m + 2), dtype=x.dtype, buffer=nl.shared_hbm)
                nisa.dma_copy(dst=out, src=t)
                return out
        """,
    }

    def harness(self, *args):
        return subprocess.run([sys.executable, "-m", "nki_harness", *args], cwd=HERE, capture_output=True, text=True,
                              timeout=120)

    def lenient_harness(self, *args):
        """`harness` with reads of unwritten memory warnings, whatever the tests run under."""
        with uninit_mode(strict=False):
            return self.harness(*args)

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self.tmp.name)
        pkg = self.dir / "pkg"
        pkg.mkdir()
        for name, text in self.PACKAGE.items():
            (pkg / name).write_text(textwrap.dedent(text))
        self.pkg = str(pkg)

    def tearDown(self):
        self.tmp.cleanup()

    def spec(self, **fields):
        path = self.dir / "spec.json"
        path.write_text(json.dumps(fields))
        return str(path)

    def test_check_and_run(self):
        r = self.harness("check", self.pkg)
        self.assertEqual((r.returncode, r.stdout.count("\n")), (0, 1), r.stdout + r.stderr)
        x = np.arange(12, dtype=np.float64).reshape(3, 4) / 3
        np.save(self.dir / "x.npy", x)
        spec = self.spec(kernel="scale", lnc=1, ranks=1, precision="hardware", generation="trn2",
                         args=[[{"npy": "x.npy", "dtype": "bfloat16"}, {"float": 0.5}]],
                         kwargs=[{"twice": {"bool": True}}])
        r = self.harness("run", "--package", self.pkg, "--spec", spec, "--out", str(self.dir / "out"))
        self.assertEqual(r.returncode, 0, r.stderr)
        listing = json.loads((self.dir / "out" / "result.json").read_text())
        self.assertEqual(listing, {"ranks": [[{"file": "rank0_out0.npy", "shape": [3, 4], "dtype": "bfloat16"},
                                              {"file": "rank0_out1.npy", "shape": [3, 4], "dtype": "bfloat16"}]]})
        xb = x.astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)
        np.testing.assert_array_equal(np.load(self.dir / "out" / "rank0_out0.npy"), xb)
        np.testing.assert_array_equal(np.load(self.dir / "out" / "rank0_out1.npy"), xb)

    def test_reads_of_unwritten_memory_warn_or_with_strict_uninit_fail(self):
        np.save(self.dir / "x.npy", np.ones((3, 2)))
        spec = self.spec(kernel="padded", args=[[{"npy": "x.npy", "dtype": "float32"}]])
        line = [i for i, text in enumerate(textwrap.dedent(self.PACKAGE["kernels.py"]).splitlines(), 1)
                if "nisa.dma_copy(dst=out, src=t)" in text][-1]  # padded's
        r = self.lenient_harness("run", "--package", self.pkg, "--spec", spec, "--out", str(self.dir / "out"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr.splitlines(), [
            f"warning: undefined behaviour: nisa.dma_copy (kernels.py:{line}) reads 6 elements of 'wide' [3, 4] "
            "float32 in SBUF that nothing wrote since it was allocated (the first at [0, 2]); on hardware they hold "
            "whatever the memory held, here they read as zero bits"])
        np.testing.assert_array_equal(np.load(self.dir / "out" / "rank0_out0.npy"), np.repeat([[1, 1, 0, 0]], 3, 0))
        r = self.harness("run", "--strict-uninit", "--package", self.pkg, "--spec", spec, "--out", str(self.dir / "o2"))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertTrue(r.stderr.startswith(f"error: nisa.dma_copy (kernels.py:{line}): undefined behaviour: the "
                                            "instruction reads 6 elements of 'wide'"), r.stderr)
        self.assertFalse((self.dir / "o2").exists())

    def test_enum_members(self):
        np.save(self.dir / "x.npy", np.ones((2, 3)))
        run = lambda how: self.harness("run", "--package", self.pkg, "--out", str(self.dir / "out"), "--spec",
                                       self.spec(kernel="scaled_by", args=[[{"npy": "x.npy", "dtype": "float32"}, how]]))
        for member, factor in (("HALF", 0.5), ("TRIPLE", 3.0)):
            r = run({"enum": "Scaling", "member": member})
            self.assertEqual(r.returncode, 0, r.stderr)
            np.testing.assert_array_equal(np.load(self.dir / "out" / "rank0_out0.npy"), np.full((2, 3), factor, np.float32))
        # The member's value is not the member: the kernel refuses it.
        r = run({"int": 1})
        self.assertEqual(r.returncode, 1)
        self.assertIn("how=1 is not a Scaling member", r.stderr)
        for bad, want in [({"enum": "Scaling", "member": "DOUBLE"}, "Scaling has no member 'DOUBLE'; its members are HALF, TRIPLE"),
                          ({"enum": "ScaleConfig", "member": "HALF"}, "exports no Enum class named 'ScaleConfig'"),
                          ({"enum": "Missing", "member": "HALF"}, "exports no Enum class named 'Missing'"),
                          ({"enum": "Scaling", "member": 0}, "malformed argument")]:
            r = run(bad)
            self.assertEqual(r.returncode, 1, bad)
            self.assertIn(want, r.stderr)

    def test_an_enum_resolves_in_the_kernels_own_module_first(self):
        # Two modules of a package each define a `Scaling` (as two emitted kernel
        # modules each define the library's enum they take); the package exports
        # `other`'s. A kernel's member names its own module's class.
        np.save(self.dir / "x.npy", np.ones((2, 3)))
        spec = self.spec(kernel="scaled_by", args=[[{"npy": "x.npy", "dtype": "float32"}, {"enum": "Scaling", "member": "HALF"}]])
        r = self.harness("run", "--package", self.pkg, "--out", str(self.dir / "out"), "--spec", spec)
        self.assertEqual(r.returncode, 0, r.stderr)
        np.testing.assert_array_equal(np.load(self.dir / "out" / "rank0_out0.npy"), np.full((2, 3), 0.5, np.float32))
        spec = self.spec(kernel="scaled_by", args=[[{"npy": "x.npy", "dtype": "float32"}, {"enum": "Scaling", "member": "DOUBLE"}]])
        r = self.harness("run", "--package", self.pkg, "--out", str(self.dir / "out"), "--spec", spec)
        self.assertEqual(r.returncode, 1)
        self.assertIn("Scaling has no member 'DOUBLE'; its members are HALF, TRIPLE", r.stderr)

    def test_enum_fields_of_configuration_objects(self):
        np.save(self.dir / "x.npy", np.ones((2, 3)))
        run = lambda fields: self.harness("run", "--package", self.pkg, "--out", str(self.dir / "out"), "--spec",
                                          self.spec(kernel="scaled_by_config", args=[[
                                              {"npy": "x.npy", "dtype": "float32"},
                                              {"object": "ScalingConfig", "fields": fields}]]))
        # A field given as a member, and a field left at its default member.
        for fields, factor in (({"how": {"enum": "Scaling", "member": "HALF"}}, 0.5), ({}, 3.0)):
            r = run(fields)
            self.assertEqual(r.returncode, 0, r.stderr)
            np.testing.assert_array_equal(np.load(self.dir / "out" / "rank0_out0.npy"), np.full((2, 3), factor, np.float32))
        r = run({"how": {"int": 0}})
        self.assertEqual(r.returncode, 1)
        self.assertIn("cfg.how=0 is not a Scaling member", r.stderr)
        r = run({"how": {"enum": "Scaling", "member": "DOUBLE"}})
        self.assertEqual(r.returncode, 1)
        self.assertIn("Scaling has no member 'DOUBLE'; its members are HALF, TRIPLE", r.stderr)

    def test_configuration_objects(self):
        np.save(self.dir / "x.npy", np.ones((2, 3)))
        cfg = {"object": "ScaleConfig", "fields": {"factor": {"float": 2.5}, "rows": {"int": 2}}}
        spec = self.spec(kernel="configured", args=[[{"npy": "x.npy", "dtype": "float32"}, cfg]])
        r = self.harness("run", "--package", self.pkg, "--spec", spec, "--out", str(self.dir / "out"))
        self.assertEqual(r.returncode, 0, r.stderr)
        np.testing.assert_array_equal(np.load(self.dir / "out" / "rank0_out0.npy"), np.full((2, 3), 2.5, np.float32))
        # A field left out keeps the dataclass's default, which the kernel refuses here.
        spec = self.spec(kernel="configured", args=[[{"npy": "x.npy", "dtype": "float32"},
                                                      {"object": "ScaleConfig", "fields": {}}]])
        r = self.harness("run", "--package", self.pkg, "--spec", spec, "--out", str(self.dir / "out"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("cfg.rows=0 but x has 2 rows", r.stderr)
        for bad, want in [({"object": "Missing", "fields": {}}, "exports no class named 'Missing'"),
                          ({"object": "ScaleConfig", "fields": {"factr": {"int": 1}}}, "cannot build ScaleConfig"),
                          ({"object": "ScaleConfig", "extra": 1}, "malformed argument")]:
            spec = self.spec(kernel="configured", args=[[{"npy": "x.npy", "dtype": "float32"}, bad]])
            r = self.harness("run", "--package", self.pkg, "--spec", spec, "--out", str(self.dir / "out"))
            self.assertEqual(r.returncode, 1, bad)
            self.assertIn(want, r.stderr)

    def test_three_rank_run(self):
        for r in range(3):
            np.save(self.dir / f"x{r}.npy", np.full((2, 2), r, dtype=np.int32))
        spec = self.spec(kernel="ring", ranks=3, args=[[{"npy": f"x{r}.npy", "dtype": "int32"}] for r in range(3)])
        r = self.harness("run", "--package", self.pkg, "--spec", spec, "--out", str(self.dir / "out"))
        self.assertEqual(r.returncode, 0, r.stderr)
        for rank in range(3):
            got = np.load(self.dir / "out" / f"rank{rank}_out0.npy")
            self.assertEqual((got.dtype, got.tolist()), (np.int32, [[(rank - 1) % 3] * 2] * 2))

    def test_replica_group_arguments(self):
        for r in range(4):
            np.save(self.dir / f"x{r}.npy", np.full((2, 2), r, dtype=np.int32))
        run = lambda group: self.harness("run", "--package", self.pkg, "--out", str(self.dir / "out"), "--spec", self.spec(
            kernel="ring_in", ranks=4, args=[[{"npy": f"x{r}.npy", "dtype": "int32"}, group] for r in range(4)]))
        # Two rings of two: each rank receives its partner's rows.
        r = run({"replica_group": [[0, 1], [2, 3]]})
        self.assertEqual(r.returncode, 0, r.stderr)
        for rank in range(4):
            self.assertEqual(np.load(self.dir / "out" / f"rank{rank}_out0.npy").tolist(), [[rank ^ 1] * 2] * 2)
        # The rings are not the group: the kernel refuses them.
        r = run({"tuple": [{"tuple": [{"int": 0}, {"int": 1}, {"int": 2}, {"int": 3}]}]})
        self.assertEqual(r.returncode, 1)
        self.assertIn("is not a ReplicaGroup", r.stderr)
        for bad in ({"replica_group": [0, 1]}, {"replica_group": [[0, True]]}, {"replica_group": [[0]], "int": 1}):
            r = run(bad)
            self.assertEqual(r.returncode, 1, bad)
            self.assertIn("a replica group is a list of lists of ranks", r.stderr)

    def test_errors_are_one_line(self):
        np.save(self.dir / "x.npy", np.zeros((200, 2)))
        spec = self.spec(kernel="scale", args=[[{"npy": "x.npy", "dtype": "float32"}, {"int": 2}]])
        r = self.harness("run", "--package", self.pkg, "--spec", spec, "--out", str(self.dir / "out"))
        self.assertEqual(r.returncode, 1)
        self.assertRegex(r.stderr, r"^error: kernels\.py:\d+: AssertionError: at most 128 rows, got 200\n$")
        np.save(self.dir / "y.npy", np.zeros((2, 2)))
        spec = self.spec(kernel="ring", ranks=2, args=[[{"npy": "y.npy", "dtype": "float32"}]] * 2)
        r = self.harness("run", "--package", self.pkg, "--spec", spec, "--out", str(self.dir / "out"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("rank 2 is not", r.stderr)

    def test_outputs_never_overwrite_inputs_and_are_written_all_or_nothing(self):
        out = self.dir / "out"
        out.mkdir()
        x = np.arange(12, dtype=np.float32).reshape(3, 4)
        np.save(out / "rank0_out0.npy", x)
        os.link(out / "rank0_out0.npy", self.dir / "x_link.npy")
        for given in ("out/rank0_out0.npy", "x_link.npy"):
            spec = self.spec(kernel="scale", args=[[{"npy": given, "dtype": "float32"}, {"float": 0.5}]])
            before = sorted((p.name, p.read_bytes()) for p in out.iterdir())
            r = self.harness("run", "--package", self.pkg, "--spec", spec, "--out", str(out))
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertEqual(r.stderr.count("\n"), 1, r.stderr)
            self.assertIn("rank0_out0.npy is the same file as the input", r.stderr)
            self.assertIn("an output never overwrites an input", r.stderr)
            self.assertEqual(sorted((p.name, p.read_bytes()) for p in out.iterdir()), before, given)
        # The spec file itself is an input too.
        spec = out / "result.json"
        spec.write_text(json.dumps({"kernel": "scale", "args": [[{"npy": "rank0_out0.npy", "dtype": "float32"}, {"float": 0.5}]]}))
        r = self.harness("run", "--package", self.pkg, "--spec", str(spec), "--out", str(out))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("result.json is the same file as the input", r.stderr)
        # A run that writes: every output in place, no temporary left.
        np.save(self.dir / "x.npy", x)
        spec = self.spec(kernel="scale", args=[[{"npy": "x.npy", "dtype": "float32"}, {"float": 0.5}]])
        r = self.harness("run", "--package", self.pkg, "--spec", spec, "--out", str(self.dir / "fresh"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(p.name for p in (self.dir / "fresh").iterdir()), ["rank0_out0.npy", "rank0_out1.npy", "result.json"])


if __name__ == "__main__":
    unittest.main()
