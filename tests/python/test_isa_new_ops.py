"""The nki.isa instructions beyond the emitter's set, each against a float64 /
integer reference written here from its documentation."""

import unittest

import ml_dtypes
import numpy as np

from kernel_helpers import RNG, f32, hbm, host, ints, nisa, nl, run, sbuf
from nki_harness.fake_nki.tensor import SHARED_HBM, from_cells
from nki_harness.fake_nki.errors import NkiError


def tile(shape, dtype=nl.float32):
    return nl.ndarray(shape, dtype=dtype, buffer=nl.sbuf)


class StatsTest(unittest.TestCase):
    def test_bn_stats_and_bn_aggr_give_mean_and_population_variance(self):
        x = RNG.standard_normal((16, 300)) * 2 + 0.5
        y = RNG.standard_normal((16, 211))

        def k():
            st = tile((16, 12))
            nisa.bn_stats(dst=st[:, 0:6], data=sbuf(x))
            nisa.bn_stats(dst=st[:, 6:12], data=sbuf(y))
            mv = tile((16, 2))
            nisa.bn_aggr(dst=mv, data=st)
            return st, mv

        st, mv = run(k)
        even, odd = f32(x)[:, 0::2], f32(x)[:, 1::2]
        want = np.stack([np.full(16, even.shape[1]), even.mean(1), even.var(1) * even.shape[1],
                         np.full(16, odd.shape[1]), odd.mean(1), odd.var(1) * odd.shape[1]], axis=1)
        np.testing.assert_allclose(host(st)[:, :6], want, rtol=1e-5, atol=1e-5)
        both = np.concatenate([f32(x), f32(y)], axis=1)
        np.testing.assert_allclose(host(mv), np.stack([both.mean(1), both.var(1)], axis=1), rtol=1e-5, atol=1e-6)

    def test_bn_stats_limit(self):
        self.assertRaisesRegex(NkiError, "bn_stats_fmax 512",
                               lambda: run(lambda: nisa.bn_stats(dst=tile((4, 6)), data=sbuf(np.zeros((4, 513))))))


class TopValuesTest(unittest.TestCase):
    def test_max8_sorts_descending(self):
        x = RNG.standard_normal((8, 40))

        def k():
            d = tile((8, 8))
            nisa.max8(dst=d, src=sbuf(x))
            return d

        np.testing.assert_array_equal(host(run(k)), -np.sort(-f32(x), axis=1)[:, :8])

    def test_find_index8_pairs_duplicates_in_ascending_order(self):
        data = np.array([[5, 1, 7, 1, 9, 1, 3, 0, 2, 4]], dtype=np.float32)
        vals = np.array([[1, 1, 9, 1, 42, 0, 5, 1]], dtype=np.float32)

        def k():
            d = tile((1, 8), nl.uint32)
            nisa.nc_find_index8(dst=d, data=sbuf(data), vals=sbuf(vals))
            return d

        self.assertEqual(ints(run(k)).tolist(), [[1, 3, 4, 5, 0xFFFFFFFF, 7, 0, 0xFFFFFFFF]])

    def test_match_replace8_follows_the_documented_example(self):
        data = np.array([[1, 2, 3, 4, 8, 8, 8, 8, 8, 8, 8]], dtype=np.float32)
        vals = np.array([[3, 8, 8, 8, 8, 8, 8, 8]], dtype=np.float32)

        def k():
            d, idx = tile((1, 11)), tile((1, 8), nl.uint32)
            nisa.nc_match_replace8(dst=d, data=sbuf(data), vals=sbuf(vals), imm=-1.0, dst_idx=idx)
            return d, idx

        d, idx = run(k)
        self.assertEqual(ints(idx).tolist(), [[2, 10, 9, 8, 7, 6, 5, 4]])
        self.assertEqual(host(d).tolist(), [[1, 2, -1, 4, -1, -1, -1, -1, -1, -1, -1]])

    def test_topk_reads_a_16_partition_snake(self):
        n, k_ = 42, 8
        snake = RNG.permutation(200)[:n].astype(np.float32)
        src = np.zeros((16, 3), dtype=np.float32)
        for e in range(n):
            src[e % 16, e // 16] = snake[e]

        def k():
            v, i = tile((16, k_), nl.bfloat16), tile((16, k_), nl.uint32)
            nisa.topk(val_dst=v, idx_dst=i, src=sbuf(src, nl.bfloat16), n=n)
            return v, i

        v, i = run(k)
        order = np.argsort(snake)[-k_:]
        np.testing.assert_array_equal(host(v), np.tile(snake[order], (16, 1)))
        np.testing.assert_array_equal(ints(i), np.tile(order, (16, 1)))

    def test_topk_refuses_k_of_32768_even_when_n_allows_it(self):
        n, k_ = 40000, 32768

        def k():
            v, i = tile((16, k_), nl.bfloat16), tile((16, k_), nl.uint32)
            nisa.topk(val_dst=v, idx_dst=i, src=tile((16, 2500), nl.bfloat16), n=n)

        with self.assertRaisesRegex(NkiError, "K <= 32767"):
            run(k)


class ScanTest(unittest.TestCase):
    def test_tensor_tensor_scan_recurrence(self):
        a, b = RNG.uniform(0.5, 1.0, (4, 30)), RNG.standard_normal((4, 30))
        init = RNG.standard_normal((4, 1))

        def k():
            d = tile((4, 30))
            nisa.tensor_tensor_scan(dst=d, data0=sbuf(a), data1=sbuf(b), initial=sbuf(init), op0=nl.multiply,
                                    op1=nl.add)
            return d

        want, r = np.zeros((4, 30)), f32(init)[:, 0]
        for i in range(30):
            r = f32(a)[:, i] * r + f32(b)[:, i]
            want[:, i] = r
        np.testing.assert_allclose(host(run(k)), want, rtol=1e-5, atol=1e-6)

    def test_tensor_scalar_cumulative_commands(self):
        x = RNG.standard_normal((8, 20))

        def k():
            d1, d2, d3 = tile((8, 20)), tile((8, 20)), tile((8, 20))
            src = sbuf(x)
            nisa.tensor_scalar_cumulative(dst=d1, src=src, op0=nl.multiply, op1=nl.add, imm0=2.0)
            nisa.tensor_scalar_cumulative(dst=d2, src=src, op0=nl.add, op1=nl.add, imm0=0.0, reduce_cmd=2)
            nisa.tensor_scalar_cumulative(dst=d3, src=src, op0=nl.add, op1=nl.maximum, imm0=1.0, imm1=0.5,
                                          reduce_cmd=nisa.reduce_cmd.load_reduce)
            return d1, d2, d3

        d1, d2, d3 = run(k)
        c = np.cumsum(2 * f32(x), axis=1)
        np.testing.assert_allclose(host(d1), c, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(host(d2), c[:, -1:] + np.cumsum(f32(x), axis=1), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(host(d3), np.maximum.accumulate(np.maximum(f32(x) + 1, 0.5), axis=1), rtol=1e-6)

    def test_tensor_partition_reduce(self):
        x = RNG.standard_normal((32, 12))

        def k():
            outs = [tile((1, 12)) for _ in range(3)]
            for o, op in zip(outs, (nl.add, nl.maximum, nl.average)):
                nisa.tensor_partition_reduce(dst=o, op=op, data=sbuf(x))
            return outs

        s, m, a = run(k)
        np.testing.assert_allclose(host(s)[0], f32(x).sum(0), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(host(m)[0], f32(x).max(0))
        np.testing.assert_allclose(host(a)[0], f32(x).mean(0), rtol=1e-5, atol=1e-6)


class PredicatedTest(unittest.TestCase):
    def test_copy_predicated_and_select_reduce(self):
        x, old = RNG.standard_normal((8, 16)), RNG.standard_normal((8, 16))
        pred = RNG.integers(0, 2, (8, 16))

        def k():
            d = sbuf(old)
            nisa.tensor_copy_predicated(dst=d, src=sbuf(x), predicate=sbuf(pred, nl.uint8))
            s, res = tile((8, 16)), tile((8, 1))
            nisa.select_reduce(dst=s, predicate=sbuf(pred, nl.uint8), on_true=sbuf(x), on_false=-7.0,
                               reduce_res=res, reduce_cmd=3, reverse_pred=True)
            return d, s, res

        d, s, res = run(k)
        np.testing.assert_array_equal(host(d), np.where(pred != 0, f32(x), f32(old)))
        sel = np.where(pred == 0, f32(x), -7.0)
        np.testing.assert_array_equal(host(s), sel)
        np.testing.assert_array_equal(host(res)[:, 0], sel.max(1))


class GatherTest(unittest.TestCase):
    def test_nc_n_gather(self):
        x, idx = RNG.standard_normal((4, 50)), RNG.integers(0, 50, (4, 7))

        def k():
            d = tile((4, 7))
            nisa.nc_n_gather(dst=d, data=sbuf(x), indices=sbuf(idx, nl.uint32))
            return d

        np.testing.assert_array_equal(host(run(k)), np.take_along_axis(f32(x), idx, axis=1))

    def test_local_gather_follows_the_documented_numpy(self):
        src = RNG.random((32, 64, 4)) * 100
        per_core = RNG.integers(0, 64, (16, 3))
        index = np.tile(per_core, (2, 1))
        ne, nv = 4, 40

        def k():
            d = tile((32, nv * ne))
            nisa.local_gather(dst=d, src_buffer=sbuf(src), index=sbuf(index * ne, nl.uint16), num_elem_per_idx=ne,
                              num_valid_indices=nv)
            return d

        want = np.zeros((32, nv, ne))
        for c in range(2):
            flat = index[16 * c:16 * c + 16].flatten(order="F")[:nv]
            want[16 * c:16 * c + 16] = np.take(f32(src)[16 * c:16 * c + 16], flat, axis=1)
        np.testing.assert_array_equal(host(run(k)), want.reshape(32, -1))

    def test_nonzero_with_count_documented_example(self):
        x = np.zeros((32, 8), dtype=np.float32)
        x[0] = [0, 1, 1, 0, 0, 1, 0, 0]
        x[16] = [2, 0, 0, 0, 0, 0, 0, 3]

        def k():
            d = tile((32, 9), nl.int32)
            nisa.memset(dst=d, value=99)
            nisa.nonzero_with_count(dst=d, src=sbuf(x), index_offset=16, padding_val=-1)
            return d

        d = ints(run(k))
        self.assertEqual(d[0].tolist(), [17, 18, 21, -1, -1, -1, -1, -1, 3])
        self.assertEqual(d[16].tolist(), [16, 23, -1, -1, -1, -1, -1, -1, 2])
        self.assertEqual(d[1].tolist(), [99] * 9)

    def test_sequence_bounds_matches_the_documented_reference(self):
        ids = np.sort(RNG.integers(0, 6, 32)).astype(np.float32).reshape(1, 32)

        def k():
            d = nl.ndarray((1, 2, 32), dtype=nl.float32, buffer=nl.sbuf)
            nisa.sequence_bounds(dst=d, segment_ids=sbuf(ids))
            return d

        seq = ids[0]
        n = seq.size
        lo, hi = np.zeros(n), np.zeros(n)
        for i in range(n):
            members = np.flatnonzero(seq == seq[i])
            lo[i], hi[i] = (n, -1) if seq[i] == 0 else (members.min(), members.max() + 1)
        np.testing.assert_array_equal(host(run(k))[0], np.stack([lo, hi]))


class DmaComputeTest(unittest.TestCase):
    def test_sums_the_sources(self):
        xs = [RNG.standard_normal((4, 10)) for _ in range(3)]

        def k():
            d = nl.ndarray((4, 10), dtype=nl.float32, buffer=nl.shared_hbm)
            nisa.dma_compute(dst=d, srcs=[hbm(x) for x in xs], reduce_op=nl.add)
            return d

        np.testing.assert_allclose(host(run(k)), sum(f32(x) for x in xs), rtol=1e-6, atol=1e-6)

    def test_scatter_add_skips_out_of_bound_rows(self):
        table, upd = RNG.standard_normal((8, 5)), RNG.standard_normal((3, 5))
        rows = np.array([[6], [9], [1]])

        def k():
            out = hbm(table)
            target = out.ap(pattern=[[5, 3], [1, 5]], vector_offset=sbuf(rows, nl.uint32), indirect_dim=0)
            nisa.dma_compute(dst=target, srcs=[target, sbuf(upd)], reduce_op=nl.add, oob_mode=nisa.oob_mode.skip)
            return out

        want = f32(table).copy()
        want[[6, 1]] += f32(upd)[[0, 2]]
        np.testing.assert_allclose(host(run(k)), want, rtol=1e-6, atol=1e-6)
        self.assertRaises(NkiError, lambda: run(lambda: nisa.dma_compute(
            dst=nl.ndarray((4, 10), dtype=nl.float32, buffer=nl.shared_hbm), srcs=[hbm(xs[0])], reduce_op=nl.add,
            scales=[2.0])))


class ActivationTest(unittest.TestCase):
    def test_exponential_sums_into_the_vector_accumulators(self):
        x, m = RNG.standard_normal((8, 16)), RNG.standard_normal((8, 1))

        def k():
            d, r = tile((8, 16)), tile((8, 1))
            nisa.exponential(dst=d, src=sbuf(x), max_value=sbuf(m), reduce_res=r,
                             reduce_cmd=nisa.reduce_cmd.load_reduce, reduce_init=1.5)
            return d, r

        d, r = run(k, generation="trn3")
        e = np.exp(f32(x) - f32(m))
        np.testing.assert_allclose(host(d), e, rtol=1e-6)
        np.testing.assert_allclose(host(r)[:, 0], 1.5 + e.sum(1), rtol=1e-6)
        self.assertRaisesRegex(NkiError, "NeuronCore-v4", lambda: run(k))

    def test_activate2_pipeline_with_prelu_and_abs_max(self):
        x = RNG.standard_normal((8, 16))

        def k():
            d, r = tile((8, 16)), tile((8, 1))
            nisa.activate2(dst=d, op=nl.prelu, data=sbuf(x), imm0=3.0, imm1=0.5, op0=nl.multiply, op1=nl.subtract,
                           relu_param=0.1, reverse1=True, reduce_op=nl.abs_max, reduce_res=r, reduce_cmd=3)
            return d, r

        d, r = run(k, generation="trn3")
        t = 0.5 - 3.0 * f32(x)
        want = np.where(t >= 0, t, 0.1 * t)
        np.testing.assert_allclose(host(d), want, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(host(r)[:, 0], np.abs(want).max(1), rtol=1e-6, atol=1e-6)
        self.assertRaises(NkiError, lambda: run(lambda: nisa.activate2(
            dst=tile((8, 16)), op=nl.exp, data=sbuf(x), imm0=1.0, imm1=1.0, op0=nl.add, op1=nl.add), generation="trn3"))


def xorwow(words):
    """One XORWOW step on a list of six ints (x, y, z, w, v, d); returns (output, new words)."""
    x, y, z, w, v, d = words
    m = 0xFFFFFFFF
    t = (x ^ (x >> 2)) & m
    v2 = ((v ^ (v << 4)) ^ (t ^ (t << 1))) & m
    d2 = (d + 362437) & m
    return (v2 + d2) & m, [y, z, w, v, v2, d2]


class RandomTest(unittest.TestCase):
    def test_rng_is_xorwow_from_the_loaded_state(self):
        state = RNG.integers(1, 2 ** 32, (2, 6))

        def k():
            nisa.rand_set_state(src_seeds=sbuf(state, nl.uint32), engine=3)
            d, back = tile((2, 5), nl.uint32), tile((2, 6), nl.uint32)
            nisa.rng(dst=d, engine=nisa.engine.gpsimd)
            nisa.rand_get_state(dst=back)
            return d, back

        d, back = run(k)
        for p in range(2):
            words, outs = [int(w) for w in state[p]], []
            for _ in range(5):
                o, words = xorwow(words)
                outs.append(o)
            self.assertEqual(ints(d)[p].tolist(), outs)
            self.assertEqual(ints(back)[p].tolist(), words)

    def test_seeding_repeats_and_dropout_rate(self):
        def k():
            seed = nl.full((1, 1), 42, dtype=nl.int32, buffer=nl.sbuf)
            a, b, u = tile((128, 64)), tile((128, 64)), tile((128, 64))
            nisa.set_rng_seed(src_seeds=seed)
            nisa.dropout(dst=a, data=nl.ones((128, 64), nl.float32), prob=0.25)
            nisa.set_rng_seed(src_seeds=seed)
            nisa.dropout(dst=b, data=nl.ones((128, 64), nl.float32), prob=0.25)
            nisa.rand2(dst=u, min=-2.0, max=3.0)
            return a, b, u

        a, b, u = run(k, generation="trn3")
        np.testing.assert_array_equal(host(a), host(b))
        self.assertTrue(set(np.unique(host(a))) <= {0.0, 1.0})
        self.assertAlmostEqual(float((host(a) == 0).mean()), 0.25, delta=0.02)
        self.assertTrue(host(u).min() >= -2.0 and host(u).max() < 3.0)
        self.assertAlmostEqual(float(host(u).mean()), 0.5, delta=0.05)

    def test_dropout_of_integer_data_takes_float32_probabilities(self):
        # The docs: with integer data, prob's dtype must be float32.
        def k(prob_dtype):
            data = nl.full((4, 8), 3, nl.int32)
            d = tile((4, 8), nl.int32)
            nisa.dropout(dst=d, data=data, prob=nl.full((4, 1), 0.5, prob_dtype))
            return d

        self.assertTrue(set(np.unique(host(run(lambda: k(nl.float32))))) <= {0.0, 3.0})
        with self.assertRaisesRegex(NkiError, "must be float32"):
            run(lambda: k(nl.bfloat16))


class MxTest(unittest.TestCase):
    def test_quantize_then_matmul_mx(self):
        k_, m, n = 32, 8, 12
        a = RNG.standard_normal((k_, 4 * m)) * 4
        b = RNG.standard_normal((k_, 4 * n))
        a[0:8, 0:4] = 0.0  # an all-zero group takes the smallest scale

        def kern():
            qa, qb = tile((k_, m), nl.float8_e4m3fn_x4), tile((k_, n), nl.float8_e5m2_x4)
            sa, sb = tile((k_ // 8, m), nl.float8_e8m0fnu), tile((k_ // 8, n), nl.uint8)
            nisa.quantize_mx(dst=qa, src=sbuf(a, nl.bfloat16), dst_scale=sa)
            nisa.quantize_mx(dst=qb, src=sbuf(b, nl.bfloat16), dst_scale=sb)
            d = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul_mx(dst=d, stationary=qa, moving=qb, stationary_scale=sa, moving_scale=sb)
            out, twice = tile((m, n)), tile((m, n))
            nisa.tensor_copy(dst=out, src=d)
            nisa.nc_matmul_mx(dst=d, stationary=qa, moving=qb, stationary_scale=sa, moving_scale=sb, accumulate=True)
            nisa.tensor_copy(dst=twice, src=d)
            return sa, sb, out, twice

        sa, sb, out, twice = run(kern, generation="trn3")

        def quantize(x, emax, elem):
            g = x.astype(ml_dtypes.bfloat16).astype(np.float64).reshape(x.shape[0] // 8, 8, -1, 4)
            amax = np.abs(g).max(axis=(1, 3))
            e = np.where(amax > 0, np.floor(np.log2(np.where(amax > 0, amax, 1))) - (emax - 1), -127)
            q = (g / 2.0 ** e[:, None, :, None]).astype(np.float32).astype(elem).astype(np.float64)
            return e, (q * 2.0 ** e[:, None, :, None]).reshape(x.shape)

        ea, da = quantize(a, 8, ml_dtypes.float8_e4m3fn)
        eb, db = quantize(b, 15, ml_dtypes.float8_e5m2)
        np.testing.assert_array_equal(host(sa), 2.0 ** ea)
        np.testing.assert_array_equal(ints(sb), eb + 127)
        self.assertEqual(host(sa)[0, 0], 2.0 ** -127)
        ra, rb = da.reshape(k_, m, 4), db.reshape(k_, n, 4)
        np.testing.assert_allclose(host(out), np.einsum("kmj,knj->mn", ra, rb), rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(host(twice), 2 * np.einsum("kmj,knj->mn", ra, rb), rtol=1e-5, atol=1e-4)

    def test_matmul_mx_sums_each_group_exactly_then_the_groups_in_float64_in_order(self):
        # Written values, not a recomputation: a float32 running sum gives 0 in
        # the first two cells, another group order 1 in the third.
        k_, m, n = 32, 2, 4
        st, mv = np.zeros((k_, m, 4), np.int64), np.zeros((k_, n, 4), np.int64)
        # Cell (0, 0), group 0: 448 * 448 + 2^-9 * 2^-9 - 448 * 448 = 2^-18.
        st[0, 0, :3], mv[0, 0, :3] = (0x7E, 0x01, 0x7E), (0x7E, 0x01, 0xFE)
        # +-1 at the first row of groups 1..3; scale 2^30 on groups 1 and 3 of
        # st column 1 and mv column 2: cell (1, 1) is 2^30 + 1 - 2^30 = 1, cell
        # (1, 2) is 2^60 + 1 - 2^60, 0 in float64 in group order.
        st[[8, 16, 24], 1, 0] = 0x38
        mv[[8, 16, 24], 1, 0] = mv[[8, 16, 24], 2, 0] = (0x38, 0x38, 0xB8)
        es, em = np.full((4, m), 127), np.full((4, n), 127)
        es[[1, 3], 1] = em[[1, 3], 2] = 157

        def packed(codes):
            words = sum(codes[..., j] << (8 * j) for j in range(4))
            t = nl.ndarray(words.shape, dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=from_cells("input", nl.float8_e4m3fn_x4, SHARED_HBM, words))
            return t

        def kern():
            d = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul_mx(dst=d, stationary=packed(st), moving=packed(mv), stationary_scale=sbuf(es, nl.uint8),
                              moving_scale=sbuf(em, nl.uint8))
            out = tile((m, n))
            nisa.tensor_copy(dst=out, src=d)
            return out

        np.testing.assert_array_equal(host(run(kern, generation="trn3")), [[2.0 ** -18, 0, 0, 0], [0, 1, 0, 0]])

    def test_scales_of_four_quadrants_sit_in_their_quadrants_packed_at_offsets(self):
        # The MXFP deep dive: data over 128 partitions keeps group g's scale at row
        # 32 (g // 4) + g % 4; a second tensor's scales may sit at offset 4 of each quadrant.
        k_, m, n = 128, 6, 10
        a, b = RNG.standard_normal((k_, 4 * m)) * 8, RNG.standard_normal((k_, 4 * n)) / 8

        def kern():
            qa, qb = tile((k_, m), nl.float8_e4m3fn_x4), tile((k_, n), nl.float8_e4m3fn_x4)
            packed = nl.full((k_, n), 7, nl.uint8)
            nisa.quantize_mx(dst=qa, src=sbuf(a, nl.bfloat16), dst_scale=packed[0:k_, 0:m])
            nisa.quantize_mx(dst=qb, src=sbuf(b, nl.bfloat16), dst_scale=packed[4:k_, :])
            d = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul_mx(dst=d, stationary=qa, moving=qb, stationary_scale=packed[0:k_, 0:m],
                              moving_scale=packed[4:k_, :])
            out = tile((m, n))
            nisa.tensor_copy(dst=out, src=d)
            return packed, out

        packed, out = run(kern, generation="trn3")
        scales = ints(packed)

        def exps(x):
            g = x.astype(ml_dtypes.bfloat16).astype(np.float64).reshape(k_ // 8, 8, -1, 4)
            return np.floor(np.log2(np.abs(g).max(axis=(1, 3)))) - 7

        ea, eb = exps(a), exps(b)
        rows = [32 * (g // 4) + g % 4 for g in range(k_ // 8)]
        np.testing.assert_array_equal(scales[rows, :m], ea + 127)
        np.testing.assert_array_equal(scales[[r + 4 for r in rows], :], eb + 127)
        used = set(rows) | {r + 4 for r in rows}
        self.assertTrue((scales[[p for p in range(k_) if p not in used]] == 7).all())
        self.assertTrue((scales[rows, m:] == 7).all())

        def dequant(x, e):
            g = x.astype(ml_dtypes.bfloat16).astype(np.float64).reshape(k_ // 8, 8, -1, 4)
            q = (g / 2.0 ** e[:, None, :, None]).astype(np.float32).astype(ml_dtypes.float8_e4m3fn)
            return (q.astype(np.float64) * 2.0 ** e[:, None, :, None]).reshape(k_, -1, 4)

        want = np.einsum("kmj,knj->mn", dequant(a, ea), dequant(b, eb))
        np.testing.assert_allclose(host(out), want, rtol=1e-5, atol=1e-4)

    def test_a_scale_tile_too_short_for_the_quadrant_layout_or_misplaced_is_refused(self):
        def kern(scale_rows, start):
            q = tile((64, 2), nl.float8_e4m3fn_x4)
            s = tile((64, 2), nl.uint8)
            nisa.quantize_mx(dst=q, src=sbuf(np.ones((64, 8)), nl.bfloat16), dst_scale=s[start:start + scale_rows])

        with self.assertRaisesRegex(NkiError, "at least 36 partitions"):
            run(lambda: kern(8, 0), generation="trn3")
        with self.assertRaisesRegex(NkiError, "offset 0, 4, 8 or 12"):
            run(lambda: kern(36, 2), generation="trn3")
        run(lambda: kern(36, 12), generation="trn3")

    def test_quantize_mx_marks_a_nan_group_with_nan_elements_and_the_nan_scale(self):
        x = np.ones((32, 8))
        x[3, 5] = np.nan  # group (0, 1)

        def kern():
            q, s = tile((32, 2), nl.float8_e4m3fn_x4), tile((4, 2), nl.uint8)
            nisa.quantize_mx(dst=q, src=sbuf(x, nl.bfloat16), dst_scale=s)
            return q, s

        q, s = run(kern, generation="trn3")
        scales, words = ints(s), ints(q)
        self.assertEqual(scales[0].tolist(), [127 - 7, 255])
        self.assertTrue((scales[1:] == 127 - 7).all())
        self.assertTrue((words[:8, 1] == 0x7F7F7F7F).all())
        self.assertTrue((words[8:, 1] == 0x70707070).all())  # 1.0 / 2^-7 = 128 = 2^7: exponent field 14, mantissa 0

    def test_memset_clears_a_packed_tile_and_refuses_other_values(self):
        # The library zeroes padded rows of packed tiles; what a nonzero fill packs is not defined.
        def kern(value):
            q = tile((32, 2), nl.float4_e2m1fn_x4)
            nisa.memset(dst=q, value=value)
            return q

        self.assertTrue((ints(run(lambda: kern(0), generation="trn3")) == 0).all())
        with self.assertRaisesRegex(NkiError, "zeros only"):
            run(lambda: kern(1), generation="trn3")


class HandleTest(unittest.TestCase):
    def test_instructions_return_handles_with_dependencies(self):
        def k():
            t = nl.ndarray((4, 4), nl.float32)
            a = nisa.memset(dst=t, value=1.0)
            b = nisa.reciprocal(dst=t, data=t)
            return a, b.depends_on(a), nisa.get_nc_version(), nisa.get_nc_sub_version()

        a, b, version, sub = run(k)
        self.assertIsInstance(a, nisa.NkiInstruction)
        self.assertEqual(b.producers, [a])
        self.assertEqual((version, sub), (nisa.nc_version.gen3, 0))
        self.assertTrue(issubclass(NkiError, nisa.NkiValidationError))


class EnumValueTest(unittest.TestCase):
    def test_integers_name_members_and_bad_values_name_the_choices(self):
        x = np.ones((4, 4))
        run(lambda: nisa.dma_copy(dst=tile((4, 4)), src=hbm(x), dge_mode=3, oob_mode=0))
        with self.assertRaisesRegex(NkiError, r"dge_mode must be a member of nisa.dge_mode or its value \(unknown=0"):
            run(lambda: nisa.dma_copy(dst=tile((4, 4)), src=hbm(x), dge_mode=7))
        self.assertRaisesRegex(NkiError, "GpSimd engine cannot access PSUM", lambda: run(lambda: nisa.tensor_copy(
            dst=nl.ndarray((4, 4), nl.float32, buffer=nl.psum), src=sbuf(x), engine=3)))


if __name__ == "__main__":
    unittest.main()
