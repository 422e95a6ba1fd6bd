"""The nki.language tile functions, allocation helpers, loops and dtypes
against NumPy float64 references."""

import contextlib
import io
import unittest
from dataclasses import dataclass

import numpy as np

from kernel_helpers import RNG, f32, hbm, host, ints, nisa, nl, run, sbuf
from nki_harness.fake_nki.errors import NkiError


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


class ElementwiseTest(unittest.TestCase):
    def test_tokens_called_on_tiles(self):
        x, y = RNG.uniform(0.5, 2.0, (8, 16)), RNG.standard_normal((8, 16))
        cases = {
            "add": (lambda a, b: nl.add(a, b), lambda a, b: a + b),
            "subtract_scalar": (lambda a, b: nl.subtract(a, 1.5), lambda a, b: a - 1.5),
            "abs_max": (lambda a, b: nl.abs_max(a, b), lambda a, b: np.maximum(np.abs(a), np.abs(b))),
            "fmod": (lambda a, b: nl.fmod(b, a), lambda a, b: np.fmod(b, a)),
            "mod": (lambda a, b: nl.mod(b, a), lambda a, b: np.mod(b, a)),
            "greater": (lambda a, b: nl.greater(a, b), lambda a, b: (a > b).astype(float)),
            "logical_xor": (lambda a, b: nl.logical_xor(nl.greater(b, 0.0), 1.0), lambda a, b: (b <= 0).astype(float)),
            "gelu_apprx_tanh": (lambda a, b: nl.gelu_apprx_tanh(b),
                                lambda a, b: 0.5 * b * (1 + np.tanh(np.sqrt(2 / np.pi) * (b + 0.044715 * b ** 3)))),
            "gelu_apprx_sigmoid": (lambda a, b: nl.gelu_apprx_sigmoid(b), lambda a, b: b / (1 + np.exp(-1.702 * b))),
            "silu_dx": (lambda a, b: nl.silu_dx(b), lambda a, b: sigmoid(b) * (1 + b * (1 - sigmoid(b)))),
            "mish": (lambda a, b: nl.mish(b), lambda a, b: b * np.tanh(np.log1p(np.exp(b)))),
            "softplus": (lambda a, b: nl.softplus(x=b), lambda a, b: np.log1p(np.exp(b))),
            "erf_dx": (lambda a, b: nl.erf_dx(b), lambda a, b: 2 / np.sqrt(np.pi) * np.exp(-b * b)),
            "sign": (lambda a, b: nl.sign(b), lambda a, b: np.sign(b)),
            "arctan": (lambda a, b: nl.arctan(b), lambda a, b: np.arctan(b)),
            "trunc": (lambda a, b: nl.trunc(nl.multiply(b, 3.0)), lambda a, b: np.trunc(b * 3)),
        }
        for name, (kernel_fn, ref) in cases.items():
            with self.subTest(name):
                out = run(lambda: kernel_fn(sbuf(x), sbuf(y)))
                self.assertEqual(out.buffer, nl.sbuf)
                np.testing.assert_allclose(host(out), ref(f32(x), f32(y)), rtol=2e-6, atol=2e-6)

    def test_integer_tiles_stay_exact_and_dtype_casts(self):
        a, b = RNG.integers(-2 ** 30, 2 ** 30, (4, 8)), RNG.integers(0, 31, (4, 8))

        def k():
            ta, tb = sbuf(a, nl.int32), sbuf(b, nl.int32)
            return nl.bitwise_xor(ta, tb), nl.right_shift(ta, tb), nl.add(ta, tb, dtype=nl.bfloat16)

        x, s, bf = run(k, precision="hardware")
        self.assertEqual(ints(x).tolist(), (a ^ b).tolist())
        self.assertEqual(ints(s).tolist(), (a >> b).tolist())
        self.assertIs(bf.dtype, nl.bfloat16)
        np.testing.assert_allclose(host(bf), (a + b).astype(np.float64), rtol=2 ** -8)

    def test_invert_flips_every_bit_of_the_dtype(self):
        a = np.array([[0, 5, 200, 255]])

        def k():
            return nl.invert(sbuf(a, nl.uint8)), nl.invert(sbuf(a, nl.int32)), nl.invert(sbuf(a * 256, nl.uint16))

        u8, i32, u16 = run(k)
        self.assertEqual(ints(u8).tolist(), (255 - a).tolist())
        self.assertEqual(ints(i32).tolist(), (-a - 1).tolist())
        self.assertEqual(ints(u16).tolist(), (65535 - a * 256).tolist())

    def test_broadcasting_columns_and_where(self):
        x, c = RNG.standard_normal((8, 16)), RNG.standard_normal((8, 1))

        def k():
            tx = sbuf(x)
            return nl.multiply(tx, sbuf(c)), nl.where(nl.greater(tx, 0.0), tx, -1.0)

        m, w = run(k)
        np.testing.assert_allclose(host(m), f32(x) * f32(c), rtol=1e-6)
        np.testing.assert_array_equal(host(w), np.where(f32(x) > 0, f32(x), -1.0))

    def test_a_tensor_is_true_whatever_its_values(self):
        # The AWS library's mlp_tkg constants read `K` only `if
        # params.expert_params.expert_index:`, a tensor of expert ids that may
        # hold zeros; on hardware the test sees an object, not values.
        x = RNG.standard_normal((4, 4))
        self.assertTrue(run(lambda: bool(nl.equal(sbuf(x), nl.add(sbuf(x), 1.0)))))
        self.assertTrue(run(lambda: bool(hbm(np.zeros((4, 2), np.int32)))))

    def test_tile_functions_reject_hbm(self):
        self.assertRaisesRegex(NkiError, "cannot access HBM", lambda: run(lambda: nl.exp(hbm(np.ones((4, 4))))))


class ReductionTest(unittest.TestCase):
    def test_reductions_over_trailing_axes(self):
        x = RNG.standard_normal((8, 4, 6))

        def k():
            t = sbuf(x)
            return (nl.sum(t, axis=(1, 2)), nl.max(t, axis=2, keepdims=True), nl.min(t, axis=-1), nl.mean(t, axis=2),
                    nl.prod(t, axis=2), nl.var(t, axis=2), nl.all(nl.greater(t, -10.0), axis=(1, 2)))

        s, mx, mn, me, pr, va, al = run(k)
        v = f32(x)
        np.testing.assert_allclose(host(s), v.sum((1, 2)), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(host(mx), v.max(2, keepdims=True))
        np.testing.assert_array_equal(host(mn), v.min(2))
        np.testing.assert_allclose(host(me), v.mean(2), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(host(pr), v.prod(2), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(host(va), v.var(2, keepdims=True), rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(host(al), np.ones(8))
        self.assertRaisesRegex(NkiError, "partition dim 0 cannot be reduced",
                               lambda: run(lambda: nl.sum(sbuf(x), axis=0)))

    def test_elementwise_max_skips_nan_and_row_max_shows_it(self):
        x = np.array([[np.nan, 2.0, -3.0, 0.5]])
        y = np.array([[1.0, np.nan, -4.0, 0.25]])
        hi, lo, rmax = run(lambda: (nl.maximum(sbuf(x), sbuf(y)), nl.minimum(sbuf(x), sbuf(y)), nl.max(sbuf(x), axis=1)))
        np.testing.assert_array_equal(host(hi), [[1.0, 2.0, -3.0, 0.5]])
        np.testing.assert_array_equal(host(lo), [[1.0, 2.0, -4.0, 0.25]])
        self.assertTrue(np.isnan(host(rmax)).all())

    def test_softmax(self):
        x = RNG.standard_normal((16, 32)) * 4
        z = np.exp(f32(x) - f32(x).max(1, keepdims=True))
        np.testing.assert_allclose(host(run(lambda: nl.softmax(sbuf(x), axis=1))), z / z.sum(1, keepdims=True),
                                   rtol=1e-5, atol=1e-7)


class MovementTest(unittest.TestCase):
    def test_identity_transposes_and_matmul(self):
        x, y = RNG.standard_normal((32, 48)), RNG.standard_normal((32, 24))

        def k():
            ident = nl.shared_identity_matrix(n=32, dtype=nl.float32)
            t = nl.transpose(sbuf(x))
            ts = nl.ndarray(t.shape, nl.float32)
            nisa.tensor_copy(dst=ts, src=t)
            return ident, t, ts, nl.matmul(sbuf(x), sbuf(y), transpose_x=True), nl.matmul(ts, sbuf(y))

        ident, t, ts, m1, m2 = run(k)
        np.testing.assert_array_equal(host(ident), np.eye(32))
        self.assertEqual(t.buffer, nl.psum)
        np.testing.assert_array_equal(host(ts), f32(x).T)
        np.testing.assert_allclose(host(m1), f32(x).T @ f32(y), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(host(m2), f32(x).T @ f32(y), rtol=1e-5, atol=1e-5)

    def test_load_store_transpose2d_gather_and_broadcast(self):
        x = RNG.standard_normal((16, 20))
        idx = RNG.integers(0, 20, (16, 5))

        def k():
            tx = nl.load(hbm(x), dtype=nl.bfloat16)
            out = nl.ndarray((16, 20), nl.float32, buffer=nl.shared_hbm)
            nl.store(out, tx)
            tt = nl.load_transpose2d(hbm(x))
            g = nl.gather_flattened(sbuf(x), sbuf(idx, nl.uint32))
            b = nl.broadcast_to(sbuf(x[:, :1]), (16, 7))
            return out, tt, g, b, nl.expand_dims(tt, 1)

        out, tt, g, b, e = run(k, precision="hardware")
        np.testing.assert_allclose(host(out), x, rtol=2 ** -8)
        np.testing.assert_array_equal(host(tt), f32(x).T)
        np.testing.assert_array_equal(host(g), np.take_along_axis(f32(x), idx, 1))
        np.testing.assert_array_equal(host(b), np.repeat(f32(x)[:, :1], 7, axis=1))
        self.assertEqual(e.shape, (20, 1, 16))

    def test_constructors(self):
        const = RNG.standard_normal((4, 6)).astype(np.float32)

        def k():
            return (nl.zeros((4, 6), nl.float32), nl.ones((4, 6), nl.int8), nl.full((4, 6), 2.5, nl.bfloat16),
                    nl.zeros_like(nl.ones((4, 6), nl.int32)), nl.shared_constant(const),
                    nl.empty_like(nl.ones((4, 6), nl.float32), buffer=nl.MemoryRegion.shared_hbm))

        z, o, f, zl, c, e = run(k)
        self.assertEqual((host(z).sum(), host(o).sum(), host(f).mean()), (0.0, 24.0, 2.5))
        self.assertIs(zl.dtype, nl.int32)
        self.assertEqual(c.buffer, nl.shared_hbm)
        np.testing.assert_array_equal(host(c), const)
        self.assertEqual(e.buffer, nl.shared_hbm)
        self.assertTrue(nl.is_hbm(nl.hbm) and nl.is_sbuf("sbuf") and nl.is_psum(nl.psum) and nl.is_on_chip(nl.sbuf))


class ControlTest(unittest.TestCase):
    def test_fori_and_while_loops_with_registers(self):
        def k():
            acc = nl.zeros((1, 1), nl.float32)
            one = nl.ones((1, 1), nl.float32)
            bound = nisa.register_alloc(5)

            def body(i):
                nisa.tensor_tensor(dst=acc, data1=acc, data2=one, op=nl.add)

            nl.fori_loop(1, bound, body)
            count = nl.full((1, 1), 3, nl.int32)
            reg = nisa.register_alloc()
            nisa.register_load(reg, count)

            def again(r):
                nisa.tensor_tensor(dst=acc, data1=acc, data2=one, op=nl.add)
                nisa.tensor_scalar(dst=count, data=count, op0=nl.subtract, operand0=1)
                nisa.register_load(r, count)
                return r

            nl.while_loop(reg, again)
            steps = [(i.value, i.frozen) for i in nl.dynamic_range(bound)]
            with nl.no_reorder():
                nl.device_print("acc", acc)
            return acc, steps, nl.tile_size.bn_stats_fmax, nl.tile_size.gemm_moving_fmax

        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            acc, steps, fmax, moving = run(k)
        self.assertEqual(host(acc).tolist(), [[7.0]])
        self.assertEqual(steps, [(i, True) for i in range(5)])
        self.assertEqual((fmax, moving), (512, 512))
        self.assertIn("acc", printed.getvalue())
        # The constant stays 512 on trn3, whose PE takes wider moving operands:
        # the library's trn3 rmsnorm_mx_quantize_tkg sizes a PSUM tile by it.
        self.assertEqual(run(lambda: nl.tile_size.gemm_moving_fmax, generation="trn3"), 512)

    def test_a_device_loop_index_is_read_only_where_a_register_belongs(self):
        from nki_harness.fake_nki.registers import ARITHMETIC, FROZEN, TESTED, TRACE_TIME

        def k():
            table = nl.ndarray((4, 3), nl.float32, buffer=nl.shared_hbm)
            nisa.dma_copy(dst=table, src=nl.full((4, 3), 0.0, nl.float32))
            row = nl.ndarray((1, 3), nl.float32)
            seen = nl.ndarray((1, 1), nl.int32)
            count = nl.full((1, 1), 0.0, nl.float32)
            for i in nl.dynamic_range(4):
                nisa.memset(dst=row, value=1.0)
                nisa.register_store(seen, i)
                nisa.tensor_copy(dst=row[0:1, 0:1], src=seen)
                # The index moves a dynamic offset, bounds a nested device loop and
                # selects dynamically; a register of one's own may copy it.
                nisa.dma_copy(dst=table.ap([[3, 1], [1, 3]], scalar_offset=i, indirect_dim=0), src=row)
                for j in nl.dynamic_range(i, 4):
                    nisa.tensor_scalar(dst=count, data=count, op0=nl.add, operand0=1.0)
                    own = nisa.register_alloc()
                    nisa.register_move(own, j)
                    nisa.dma_copy(dst=table.select(0, own)[2:3], src=count)
            return table

        want, count = [[float(i), 1.0, 1.0] for i in range(4)], 0
        for i in range(4):
            want[i] = [float(i), 1.0, 1.0]
            for j in range(i, 4):
                count += 1
                want[j][2] = float(count)
        np.testing.assert_array_equal(host(run(k)), want)
        refused = {
            TESTED: lambda i: i == 0,
            ARITHMETIC: lambda i: i * 128 + 1,
            TRACE_TIME: lambda i: nl.ndarray((i, 4), nl.float32),
        }
        refused_too = [
            (TESTED, lambda i: bool(i)),
            (TRACE_TIME, lambda i: nl.ndarray((4, 4), nl.float32)[i]),
            (TRACE_TIME, lambda i: nl.ndarray((4, 4), nl.float32)[nl.ds(i, 2)]),
            (TRACE_TIME, lambda i: f"{i}"),
            (TRACE_TIME, lambda i: range(i)),
            (TRACE_TIME, lambda i: nisa.memset(dst=nl.ndarray((4, 4), nl.float32), value=i)),
            (TRACE_TIME, lambda i: nisa.tensor_scalar(dst=nl.ndarray((4, 4), nl.float32), data=nl.zeros((4, 4), nl.float32),
                                                      op0=nl.add, operand0=i)),
            (FROZEN, lambda i: nisa.register_move(i, 3)),
            (FROZEN, lambda i: nisa.register_load(i, nl.full((1, 1), 2, nl.int32))),
        ]
        for why, use in list(refused.items()) + refused_too:
            def bad(use=use):
                for i in nl.dynamic_range(2):
                    use(i)
            with self.assertRaises(NkiError) as caught:
                run(bad)
            self.assertIn(why, str(caught.exception))
        # fori_loop's index is a copy its body may write, but no more readable by the trace.
        for why, use in [(TESTED, lambda j: bool(j)), (ARITHMETIC, lambda j: j + 1), (TRACE_TIME, lambda j: int(j))]:
            with self.assertRaises(NkiError) as caught:
                run(lambda use=use: nl.fori_loop(0, 2, use))
            self.assertIn(why, str(caught.exception))
        run(lambda: nl.fori_loop(0, 2, lambda j: nisa.register_move(j, 5)))

    def test_a_while_loop_that_never_ends_fails_at_the_emulators_bound(self):
        iterations = []

        def k():
            reg = nisa.register_alloc(1)

            def forever(r):
                iterations.append(1)
                return r

            nl.while_loop(reg, forever)

        with self.assertRaisesRegex(Exception, "still nonzero after 1048576 iterations"):
            run(k)
        self.assertEqual(len(iterations), 1 << 20)

    def test_random_tiles_repeat_after_reseeding(self):
        def k():
            seed = nl.full((1, 1), 7, nl.int32)
            nl.random_seed(seed)
            a = nl.rand((64, 32), nl.float32)
            nl.random_seed(seed)
            b = nl.rand((64, 32), nl.float32)
            return a, b, nl.dropout(nl.ones((64, 32), nl.float32), rate=1.0), nl.dropout(a, rate=0.0)

        a, b, dropped, kept = run(k)
        np.testing.assert_array_equal(host(a), host(b))
        self.assertTrue(0 <= host(a).min() and host(a).max() < 1)
        self.assertEqual(host(dropped).sum(), 0.0)
        np.testing.assert_array_equal(host(kept), host(a))

    def test_random_seed_takes_a_one_element_32_bit_on_chip_tensor(self):
        # The docs: "a [1,1] tensor on SBUF or PSUM with a 32-bit seed value".
        for make in (lambda: nl.full((1, 1), 7, nl.int16),
                     lambda: nl.full((1, 1), 7, nl.int32, buffer=nl.shared_hbm),
                     lambda: nl.full((1, 2), 7, nl.int32)):
            with self.assertRaisesRegex(NkiError, "seed must be a \\[1, 1\\] 32-bit SBUF or PSUM tensor"):
                run(lambda: nl.random_seed(make()))


@dataclass
class Config(nl.NKIObject):
    tile = 128
    scale = 0.5
    name = "cfg"


@dataclass
class Dims(nl.NKIObject):
    rows: int
    cols: int
    spare: int
    tag: str = "dims"


class ConventionsTest(unittest.TestCase):
    def test_nki_object_dataclass_fields_need_no_annotations(self):
        c = Config(tile=64)
        self.assertEqual((c.tile, c.scale, c.name), (64, 0.5, "cfg"))
        self.assertEqual(Config(), Config(tile=128, scale=0.5, name="cfg"))
        self.assertRaises(TypeError, lambda: Config(unknown=1))

    def test_nki_object_field_left_out_is_an_error_only_when_read(self):
        # The AWS library's mlp_tkg constants build their dims object without one
        # declared field that nothing reads; the kernel runs on hardware.
        d = Dims(rows=4, cols=8)
        self.assertEqual((d.rows, d.cols, d.tag), (4, 8, "dims"))
        with self.assertRaisesRegex(AttributeError, "Dims.spare was never given a value"):
            _ = d.spare
        d.spare = 2
        self.assertEqual(d.spare, 2)
        self.assertEqual(Dims(1, 2, 3), Dims(rows=1, cols=2, spare=3))
        self.assertRaises(TypeError, lambda: Dims(rows=1, unknown=1))

    def test_dtypes(self):
        self.assertEqual(nl.tfloat32.round(np.float32([1 + 2 ** -11, 1 + 3 * 2 ** -11])).tolist(),
                         [1.0, 1 + 2 ** -9])
        self.assertEqual(nl.bool_.encode(np.float32([0, -2, 0.5]), True).tolist(), [0, 1, 1])
        self.assertEqual(nl.float8_e8m0fnu.encode(np.float32([3.0]), True).tolist(), [4.0])
        self.assertEqual((nl.float8_e4m3fn_x4.size, nl.float4_e2m1fn_x4.size), (4, 2))
        self.assertRaisesRegex(NkiError, "packs 4", lambda: nl.float8_e5m2_x4.decode(np.zeros(1)))


if __name__ == "__main__":
    unittest.main()
