"""Races between the programs of a launch on shared HBM: an element one program
writes and another writes or reads with no synchronisation between is an error
naming the element and the programs; a barrier between orders them."""

import time
import unittest
import warnings

import numpy as np

import kernel_helpers  # noqa: F401  (installs the executor as `nki` first)

import nki.collectives as ncc
from kernel_helpers import hbm, host, nisa, nl, run_ranks, sbuf
from nki_harness.fake_nki.errors import NkiError


def rows(barrier, overlap, read_other=False):
    """An LNC2 kernel: program p writes row p (both row 0 when `overlap`)
    of a shared output, meets the other at a barrier when `barrier`, then (when
    `read_other`) copies the other program's row onto its own."""

    def k():
        out = nl.ndarray(shape=(2, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        pid = nl.program_id(axis=0)
        t = sbuf(np.full((1, 4), 1.0 + pid, dtype=np.float32))
        row = 0 if overlap else pid
        nisa.dma_copy(dst=out[row:row + 1, :], src=t)
        if barrier:
            nisa.core_barrier(data=out, cores=(0, 1))
        if read_other:
            seen = nl.ndarray(shape=(1, 4), dtype=nl.float32)
            nisa.dma_copy(dst=seen, src=out[1 - pid:2 - pid, :])
        return out

    return k


class RaceTest(unittest.TestCase):
    def test_two_programs_writing_one_element_without_a_barrier_is_an_error(self):
        with self.assertRaises(NkiError) as cm:
            run_ranks(rows(barrier=False, overlap=True), [[]], grid=2)
        text = str(cm.exception)
        self.assertRegex(text, r"element \[0, 0\] of '\w+' \[2, 4\] float32 in shared HBM is written by program (0|1) "
                               r"and by program (0|1) without a synchronisation between")
        self.assertIn("nisa.dma_copy", text)

    def test_reading_what_the_other_program_wrote_needs_a_barrier(self):
        with self.assertRaises(NkiError) as cm, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a read before the other's write also reads unwritten memory
            run_ranks(rows(barrier=False, overlap=False, read_other=True), [[]], grid=2)
        # Whichever comes first in time, the write or the read, the pair is found.
        self.assertRegex(str(cm.exception), r"(written by program (0|1) and read|read by program (0|1) and written) by "
                                            r"program (0|1) without")
        out = run_ranks(rows(barrier=True, overlap=False, read_other=True), [[]], grid=2)[0]
        np.testing.assert_array_equal(host(out), [[1] * 4, [2] * 4])

    def test_a_read_of_a_fresh_tensor_races_with_the_other_programs_first_write_in_either_order(self):
        def k(barrier, late):
            def kernel():
                out = nl.ndarray(shape=(1, 4), dtype=nl.float32, buffer=nl.shared_hbm)
                pid = nl.program_id(axis=0)
                if pid == late:
                    time.sleep(0.2)  # the other program's access comes first, even on a loaded machine
                if pid == 0:
                    nisa.dma_copy(dst=out, src=sbuf(np.ones((1, 4), dtype=np.float32)))
                if barrier:
                    nisa.core_barrier(data=out, cores=(0, 1))
                if pid == 1:
                    seen = nl.ndarray(shape=(1, 4), dtype=nl.float32)
                    nisa.dma_copy(dst=seen, src=out)
                return out

            return kernel

        orders = ["read by program 1 and written by program 0", "written by program 0 and read by program 1"]
        for late in (0, 1):
            with self.subTest(late=late):
                with self.assertRaises(NkiError) as cm, warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # the read of an unwritten tensor is undefined too
                    run_ranks(k(False, late), [[]], grid=2)
                self.assertIn(orders[late], str(cm.exception))
                out = run_ranks(k(True, late), [[]], grid=2)[0]
                np.testing.assert_array_equal(host(out), [[1] * 4])

    def test_disjoint_writes_and_writes_a_barrier_orders_pass(self):
        out = run_ranks(rows(barrier=False, overlap=False), [[]], grid=2)[0]
        np.testing.assert_array_equal(host(out), [[1] * 4, [2] * 4])

        def k():
            out = nl.ndarray(shape=(1, 4), dtype=nl.float32, buffer=nl.shared_hbm)
            pid = nl.program_id(axis=0)
            for turn in range(2):
                if pid == turn:
                    nisa.dma_copy(dst=out, src=sbuf(np.full((1, 4), 5.0 + turn, dtype=np.float32)))
                nisa.core_barrier(data=out, cores=(0, 1))
            return out

        np.testing.assert_array_equal(host(run_ranks(k, [[]], grid=2)[0]), [[6] * 4])

    def test_writes_of_the_value_an_element_holds_do_not_race(self):
        def k():
            out = nl.ndarray(shape=(1, 4), dtype=nl.float32, buffer=nl.shared_hbm)
            nisa.dma_copy(dst=out, src=sbuf(np.zeros((1, 4), dtype=np.float32)))
            nisa.core_barrier(data=out, cores=(0, 1))
            return out

        np.testing.assert_array_equal(host(run_ranks(k, [[]], grid=2)[0]), [[0] * 4])

    def test_a_write_that_leaves_the_elements_as_they_were_is_no_access(self):
        def k(first, value):
            out = nl.ndarray(shape=(1, 4), dtype=nl.float32, buffer=nl.shared_hbm)
            pid = nl.program_id(axis=0)
            if pid == 0 and first is not None:
                nisa.dma_copy(dst=out, src=sbuf(np.full((1, 4), first, dtype=np.float32)))
            nisa.core_barrier(data=out, cores=(0, 1))
            if pid == 0:
                nisa.dma_copy(dst=out, src=sbuf(np.full((1, 4), value, dtype=np.float32)))
            else:
                seen = nl.ndarray(shape=(1, 4), dtype=nl.float32, buffer=nl.sbuf)
                nisa.dma_copy(dst=seen, src=out)
            return out

        np.testing.assert_array_equal(host(run_ranks(k, [[3.0, 3.0]], grid=2)[0]), [[3] * 4])
        # A store that changes them races with the read, and so does one over
        # memory nothing wrote (whatever it held), zeros included.
        for first, value in [(3.0, 4.0), (None, 0.0)]:
            with self.assertRaisesRegex(NkiError, r"element \[0, 0\] of '.*' \[1, 4\] float32 in shared HBM"):
                run_ranks(k, [[first, value]], grid=2)

    def test_collectives_order_the_programs_of_every_rank_they_join(self):
        def k(x):
            out = nl.ndarray(shape=(1, 4), dtype=nl.float32, buffer=nl.shared_hbm)
            pid = nl.program_id(axis=0)
            if pid == 0:
                nisa.dma_copy(dst=out, src=sbuf(np.full((1, 4), 1.0, dtype=np.float32)))
            ncc.all_reduce([x], [x], ncc.ReplicaGroup([[0, 1]]), nl.add)
            if pid == 1:
                nisa.dma_copy(dst=out, src=sbuf(np.full((1, 4), 2.0, dtype=np.float32)))
            return out

        for out in run_ranks(k, [[hbm(np.ones((1, 4)))] for _ in range(2)], grid=2):
            np.testing.assert_array_equal(host(out), [[2] * 4])


if __name__ == "__main__":
    unittest.main()
