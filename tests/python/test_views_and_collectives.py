"""NkiTensor view methods (Ellipsis, permute, squeeze / reshape / flatten,
rearrange, dtype views, indirect views) and the group collectives, against
NumPy references."""

import unittest

import ml_dtypes
import numpy as np

import kernel_helpers  # noqa: F401  (installs the executor as `nki` first)

import nki
import nki.collectives as ncc
import nki_harness.fake_nki as fake
from kernel_helpers import RNG, f32, hbm, host, ints, nisa, nl, run, run_ranks, sbuf
from nki_harness.fake_nki.errors import NkiError


class ViewTest(unittest.TestCase):
    def test_ellipsis_and_shape_views(self):
        x = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
        t = hbm(x)
        np.testing.assert_array_equal(host(t[..., 1]), x[..., 1])
        np.testing.assert_array_equal(host(t[0, ..., 2:4]), x[0, ..., 2:4])
        np.testing.assert_array_equal(host(t[...]), x)
        np.testing.assert_array_equal(host(t.permute((3, 1, 0, 2))), x.transpose(3, 1, 0, 2))
        np.testing.assert_array_equal(host(t[:, 1:2].squeeze_dim(1)), x[:, 1])
        np.testing.assert_array_equal(host(t.reshape_dim(3, (-1, 1))), x.reshape(2, 3, 4, 5, 1))
        np.testing.assert_array_equal(host(t.flatten_dims(1, 2)), x.reshape(2, 12, 5))
        self.assertRaisesRegex(NkiError, "not contiguous", lambda: t.permute((0, 2, 1, 3)).flatten_dims(1, 2))
        self.assertEqual(t[:, :, 1:3].get_pattern(), [[60, 2], [20, 3], [5, 2], [1, 5]])
        self.assertFalse(t[:, :, 1:3].is_contiguous())
        self.assertTrue(t[1].is_contiguous())

    def test_setitem_copies_casts_and_fills(self):
        x = RNG.standard_normal((4, 6))

        def k():
            t = nl.zeros((4, 6), nl.float32)
            t[:, 0:3] = sbuf(x[:, 3:6], nl.bfloat16)
            t[..., 5] = 2.0
            return t

        want = np.zeros((4, 6))
        want[:, 0:3] = x[:, 3:6].astype(np.float32).astype(ml_dtypes.bfloat16)
        want[:, 5] = 2.0
        np.testing.assert_array_equal(host(run(k)), want)
        self.assertRaisesRegex(NkiError, "has 8 elements", lambda: run(lambda: nl.zeros((4, 6), nl.float32).__setitem__(
            (slice(None), 0), nl.zeros((4, 2), nl.float32))))

    def test_rearrange_documented_example(self):
        x = RNG.standard_normal((8, 24)).astype(np.float32)
        out = run(lambda: sbuf(x).rearrange(("b", ("h", "w")), ("b", "w", "h"), {"h": 4}))
        self.assertEqual(out.shape, (8, 6, 4))
        np.testing.assert_array_equal(host(out), x.reshape(8, 4, 6).transpose(0, 2, 1))
        y = RNG.standard_normal((8, 3, 4, 2)).astype(np.float32)
        merged = run(lambda: sbuf(y).rearrange(("p", "a", "b", "c"), ("p", "c", ("a", "b"))))
        np.testing.assert_array_equal(host(merged), y.transpose(0, 3, 1, 2).reshape(8, 2, 12))
        self.assertRaisesRegex(NkiError, "not contiguous", lambda: run(
            lambda: sbuf(x).rearrange(("p", ("a", "b")), ("p", ("b", "a")), {"a": 3})))

    def test_on_chip_views_keep_the_partition_dim(self):
        def k():
            t = nl.ndarray((8, 4, 6), nl.float32)
            return [f for f in (lambda: t.permute((1, 0, 2)), lambda: t.squeeze_dim(0), lambda: t.flatten_dims(0, 1))]

        for make in run(k):
            self.assertRaisesRegex(NkiError, "partition dim", lambda: run(make))

    def test_on_chip_ap_steps_whole_partitions(self):
        # The docs' counter-example: a partition step of 64 on a (16, 32) tile
        # reads every other partition, which SBUF/PSUM patterns cannot.
        def k():
            t = nl.ndarray((16, 32), nl.float32, buffer=nl.sbuf)
            return t, lambda: t.ap([[64, 8], [1, 32]], offset=0)

        t, bad = run(k)
        self.assertRaisesRegex(NkiError, r"partition step must be the allocation's free size 32", lambda: run(bad))
        self.assertEqual(list(run(lambda: t.ap([[32, 16], [1, 32]], offset=0)).shape), [16, 32])

    def test_dtype_views_reinterpret_the_bytes(self):
        x = RNG.standard_normal((4, 8)).astype(np.float32)

        def k():
            t = sbuf(x)
            as_u8, as_i32 = t.view(nl.uint8), t.reinterpret_cast(nl.int32)
            halves = t.ap([[16, 4], [1, 16]], dtype=nl.bfloat16)
            nisa.memset(dst=as_i32[:, 0:1], value=0x3F800000)
            return as_u8, halves, t

        u8, halves, t = run(k)
        want = x.copy()
        want[:, 0] = 1.0
        self.assertEqual(u8.shape, (4, 32))
        np.testing.assert_array_equal(ints(u8), want.view(np.uint8))
        np.testing.assert_array_equal(host(halves), want.view(ml_dtypes.bfloat16).astype(np.float64))
        np.testing.assert_array_equal(host(t), want)

    def test_base_tensor_is_the_whole_allocation(self):
        x = RNG.standard_normal((4, 8)).astype(np.float32)

        def k():
            t = sbuf(x)
            part = t[1:3, 2:6]
            as_u8 = t.view(nl.uint8)[0:2, 4:8]
            return part.base_tensor, as_u8.base_tensor

        whole, through_view = run(k)
        for b in (whole, through_view):
            self.assertEqual((b.shape, b.dtype), ((4, 8), nl.float32))
            np.testing.assert_array_equal(host(b), x)

    def test_float8_views_keep_every_byte_nan_codes_included(self):
        # Every byte as a float8_e4m3 element, copied by DMA into a float8 HBM
        # tensor and read back as bytes: NaN codes (0x79..0x7f, 0xf9..0xff) too.
        everything = np.arange(256, dtype=np.uint8).reshape(1, 256)

        def k():
            t = sbuf(everything.view(np.uint32).astype(np.float64), nl.uint32)
            out = nl.ndarray((1, 256), nl.float8_e4m3, buffer=nl.shared_hbm)
            nisa.dma_copy(dst=out, src=t.ap([[256, 1], [1, 256]], dtype=nl.float8_e4m3))
            return out.view(nl.uint8)

        np.testing.assert_array_equal(ints(run(k)), everything)

    def test_vector_select_and_vector_offset_gather_rows(self):
        table = RNG.standard_normal((10, 6)).astype(np.float32)
        rows = np.array([[7], [0], [3], [7]])

        def k():
            offsets = sbuf(rows, nl.int32)
            a, b = nl.ndarray((4, 6), nl.float32), nl.ndarray((4, 6), nl.float32)
            t = hbm(table)
            nisa.dma_copy(dst=a, src=t.vector_select(0, offsets))
            nisa.dma_copy(dst=b, src=t.ap([[0, 4], [1, 6]], vector_offset=offsets, indirect_dim=0))
            return a, b, t.vector_select(0, offsets).is_indirect()

        a, b, indirect = run(k)
        np.testing.assert_array_equal(host(a), table[rows[:, 0]])
        np.testing.assert_array_equal(host(b), table[rows[:, 0]])
        self.assertTrue(indirect)
        bad = np.array([[11]])
        self.assertRaisesRegex(NkiError, "row 11", lambda: run(lambda: nisa.dma_copy(
            dst=nl.ndarray((1, 6), nl.float32), src=hbm(table).vector_select(0, sbuf(bad, nl.int32)))))

    def test_documented_gather_and_scatter_with_skipped_rows(self):
        data = RNG.standard_normal((10, 6)).astype(np.float32)
        rows = np.array([[4], [12], [0], [9]])

        def k(oob):
            idx = sbuf(rows, nl.uint32)
            got = nl.full((4, 6), -5.0, nl.float32)
            nisa.dma_copy(dst=got, src=hbm(data).ap(pattern=[[6, 4], [1, 6]], vector_offset=idx, indirect_dim=0),
                          oob_mode=oob)
            out = hbm(np.zeros((10, 6)))
            nisa.dma_copy(dst=out.ap(pattern=[[6, 4], [1, 6]], vector_offset=idx, indirect_dim=0), src=got,
                          oob_mode=oob)
            return got, out

        got, out = run(k, nisa.oob_mode.skip)
        want = np.full((4, 6), -5.0)
        want[[0, 2, 3]] = data[[4, 0, 9]]
        np.testing.assert_array_equal(host(got), want)
        scattered = np.zeros((10, 6))
        scattered[[4, 0, 9]] = data[[4, 0, 9]]
        np.testing.assert_array_equal(host(out), scattered)
        self.assertRaisesRegex(NkiError, "vector_offset 12 moves row 1", lambda: run(k, 0))
        self.assertRaisesRegex(NkiError, "mutually exclusive", lambda: run(lambda: hbm(data).ap(
            [[6, 4], [1, 6]], scalar_offset=nisa.register_alloc(1), vector_offset=sbuf(rows, nl.uint32))))

    def test_gather_transpose_follows_the_documented_operation(self):
        table = RNG.standard_normal((300, 32))
        idx = RNG.integers(0, 300, (16, 2))

        def k():
            src = hbm(table, nl.bfloat16).ap(pattern=[[32, 32], [1, 32]], vector_offset=sbuf(idx, nl.uint32),
                                               indirect_dim=0)
            d = nl.ndarray((32, 32), nl.bfloat16)
            nisa.dma_transpose(dst=d, src=src, axes=(1, 0), dge_mode=nisa.dge_mode.swdge)
            return d

        flat = idx.T.flatten()[:32]
        want = table.astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)[flat].T
        np.testing.assert_array_equal(host(run(k)), want)

    def test_tensor_indirection_needs_trn3(self):
        x = RNG.standard_normal((16, 40)).astype(np.float32)
        idx = RNG.integers(0, 40, (16, 2))

        def k():
            d = nl.ndarray((16, 32), nl.float32)
            nisa.tensor_copy(dst=d, src=sbuf(x).indirect(sbuf(idx, nl.int32)))
            return d

        cols = np.array([idx[i % 16, i // 16] for i in range(32)])
        np.testing.assert_array_equal(host(run(k, generation="trn3")), x[:, cols])
        self.assertRaisesRegex(NkiError, "NeuronCore-v4", lambda: run(k))


def group(ranks):
    return ncc.ReplicaGroup([ranks])


class CollectiveTest(unittest.TestCase):
    def test_reduce_gather_scatter_all_to_all(self):
        xs = [RNG.standard_normal((8, 3)) for _ in range(4)]

        def k(x):
            rg = ncc.ReplicaGroup([[0, 2], [1, 3]])
            red, gat = (nl.ndarray(s, nl.float32, buffer=nl.shared_hbm) for s in ((8, 3), (16, 3)))
            sca, a2a = (nl.ndarray(s, nl.float32, buffer=nl.shared_hbm) for s in ((4, 3), (8, 3)))
            ncc.all_reduce([x], [red], rg, nl.maximum)
            ncc.all_gather([x], [gat], rg, 0)
            ncc.reduce_scatter([x], [sca], rg, 0, nl.add)
            ncc.all_to_all([x], [a2a], rg, 0)
            return red, gat, sca, a2a, ncc.rank_id().value

        out = run_ranks(k, [[hbm(x)] for x in xs])
        v = [f32(x) for x in xs]
        for r, (red, gat, sca, a2a, rid) in enumerate(out):
            a, b = (0, 2) if r in (0, 2) else (1, 3)
            me = (a, b).index(r)
            self.assertEqual(rid, r)
            np.testing.assert_array_equal(host(red), np.maximum(v[a], v[b]))
            np.testing.assert_array_equal(host(gat), np.concatenate([v[a], v[b]]))
            np.testing.assert_allclose(host(sca), (v[a] + v[b])[4 * me:4 * me + 4], rtol=1e-6)
            np.testing.assert_array_equal(host(a2a), np.concatenate([v[a][4 * me:4 * me + 4], v[b][4 * me:4 * me + 4]]))

    def test_collective_permute_pairs(self):
        xs = [np.full((2, 2), r, dtype=np.float32) for r in range(3)]

        def k(x):
            d = nl.full((2, 2), -1.0, nl.float32, buffer=nl.shared_hbm)
            ncc.collective_permute([x], [d], [(0, 1), (1, 2)])
            return d

        self.assertEqual([host(d)[0, 0] for d in run_ranks(k, [[hbm(x)] for x in xs])], [-1.0, 0.0, 1.0])

    def test_all_to_all_v_moves_counted_chunks(self):
        n = 3
        srcs = [np.arange(10, dtype=np.float32) + 100 * r for r in range(n)]
        # rank r sends (j + 1) elements from offset r to member j
        metas = [np.array([[j + 1 for j in range(n)], [r] * n, [0] * n], dtype=np.int64) for r in range(n)]

        def k(x, meta):
            d = nl.full((12,), -1.0, nl.float32, buffer=nl.shared_hbm)
            ncc.all_to_all_v([x], [d], group(list(range(n))), meta)
            return d, meta

        for j, (d, meta) in enumerate(run_ranks(k, [[hbm(s), hbm(m, nl.uint32)] for s, m in zip(srcs, metas)])):
            want = np.full(12, -1.0)
            for i in range(n):
                want[4 * i:4 * i + j + 1] = srcs[i][i:i + j + 1]
            np.testing.assert_array_equal(host(d), want)
            self.assertEqual(ints(meta)[2].tolist(), [j + 1] * n)

    def test_all_gather_v_broadcasts_one_chunk_per_rank_in_lnc2(self):
        srcs = [np.arange(6, dtype=np.float32) + 10 * r for r in range(4)]
        metas = [np.array([[r + 1] * 4, [1] * 4, [0] * 4], dtype=np.int64) for r in range(4)]

        def k(x, meta):
            d = nl.full((16,), -1.0, nl.float32, buffer=nl.shared_hbm)
            ncc.all_gather_v([x], [d], group([0, 1, 2, 3]), meta)
            return d, meta

        out = fake.launch(nki.jit(k)[2], [[hbm(s), hbm(m, nl.uint32)] for s, m in zip(srcs, metas)], timeout=30)
        want = np.full(16, -1.0)
        for i in range(4):
            want[4 * i:4 * i + i + 1] = srcs[i][1:2 + i]
        for d, meta in out:
            np.testing.assert_array_equal(host(d), want)
            self.assertEqual(ints(meta)[2].tolist(), [1, 2, 3, 4])
        self.assertRaisesRegex(NkiError, "LNC2", lambda: run_ranks(k, [[hbm(s), hbm(m, nl.uint32)]
                                                                      for s, m in zip(srcs, metas)]))

    def test_mismatched_collectives_fail(self):
        def k(x):
            d = nl.ndarray((2, 2), nl.float32, buffer=nl.shared_hbm)
            if ncc.rank_id().value == 0:
                ncc.all_reduce([x], [d], group([0, 1]), nl.add)
            else:
                ncc.all_gather([x], [d], group([0, 1]), 0)

        self.assertRaisesRegex(NkiError, "issued", lambda: run_ranks(k, [[hbm(np.ones((2, 2)))]] * 2))


if __name__ == "__main__":
    unittest.main()
