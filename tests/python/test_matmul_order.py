"""The executor's float32 `nc_matmul` sum against an exact reference written
here: products added in partition order from zero, each step the exact value
`acc + a·b` rounded once to float32 (round to nearest, ties to even)."""

import unittest
from fractions import Fraction

import numpy as np

from kernel_helpers import host, nisa, nl, run, sbuf
import ml_dtypes

from nki_harness.fake_nki.isa.matmul import _products_exact_in_float32, k_ordered_product


def round_f32(q):
    """The float32 nearest the rational `q` (ties to even), as a Fraction."""
    if q == 0:
        return Fraction(0)
    sign, q = (-1 if q < 0 else 1), abs(q)
    e = q.numerator.bit_length() - q.denominator.bit_length()
    if Fraction(2) ** e > q:
        e -= 1
    e = max(e, -126)  # subnormals share the smallest normal exponent
    step = Fraction(2) ** (e - 23)
    n, r = divmod(q, step)
    if r > step / 2 or (r == step / 2 and n % 2 == 1):
        n += 1
    return sign * n * step


def exact_k_ordered(a, b):
    out = np.zeros((a.shape[1], b.shape[1]))
    for i in range(a.shape[1]):
        for j in range(b.shape[1]):
            acc = Fraction(0)
            for k in range(a.shape[0]):
                acc = round_f32(acc + Fraction(float(a[k, i])) * Fraction(float(b[k, j])))
            out[i, j] = float(acc)
    return out


class MatmulOrderTest(unittest.TestCase):
    def test_each_step_rounds_once_in_partition_order(self):
        # A product 2^-24 below the running sum survives only fused.
        x, y = 1 + 2.0 ** -12, -(1 + 2.0 ** -11)
        a = np.array([[y], [x]], np.float32)
        b = np.array([[1.0], [x]], np.float32)
        self.assertEqual(k_ordered_product(a, b)[0, 0], np.float32(2.0 ** -24))
        self.assertEqual(k_ordered_product(a[::-1], b[::-1])[0, 0], 0.0)

    def test_random_sums_equal_the_exact_reference(self):
        rng = np.random.default_rng(7)
        # Mixed magnitudes make the order and the rounding of each step matter.
        a = (rng.standard_normal((40, 5)) * 2.0 ** rng.integers(-12, 12, (40, 5))).astype(np.float32)
        b = (rng.standard_normal((40, 6)) * 2.0 ** rng.integers(-12, 12, (40, 6))).astype(np.float32)
        np.testing.assert_array_equal(k_ordered_product(a, b), exact_k_ordered(a, b).astype(np.float32))

    def test_short_significands_take_float32_steps_with_the_same_result(self):
        rng = np.random.default_rng(9)
        # Mixed magnitudes, as in the float32 test, within float16's range.
        a = (rng.standard_normal((40, 5)) * 2.0 ** rng.integers(-20, 20, (40, 1))).astype(ml_dtypes.bfloat16).astype(np.float32)
        b = (rng.standard_normal((40, 6)) * 2.0 ** rng.integers(-8, 8, (40, 1))).astype(np.float16).astype(np.float32)
        self.assertTrue(_products_exact_in_float32(a) and _products_exact_in_float32(b))
        np.testing.assert_array_equal(k_ordered_product(a, b), exact_k_ordered(a, b).astype(np.float32))

    def test_only_values_whose_products_are_exact_take_float32_steps(self):
        ok = [np.float32(0), np.float32(1.5), np.float32(-(2.0 ** 62)), np.float32(2.0 ** -62), np.float32(1 + 2.0 ** -11)]
        for v in ok:
            self.assertTrue(_products_exact_in_float32(np.array([v, 1], np.float32)), v)
        bad = [1 + 2.0 ** -12, 2.0 ** 63, 2.0 ** -63, np.inf, np.nan, 2.0 ** -140]
        for v in bad:
            self.assertFalse(_products_exact_in_float32(np.array([v, 1], np.float32)), v)

    def test_nc_matmul_uses_the_defined_order(self):
        rng = np.random.default_rng(8)
        a = rng.standard_normal((128, 16)).astype(np.float32)
        b = rng.standard_normal((128, 24)).astype(np.float32)

        def k():
            ps = nl.ndarray((16, 24), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=ps, stationary=sbuf(a), moving=sbuf(b))
            return ps

        np.testing.assert_array_equal(host(run(k)), exact_k_ordered(a, b).astype(np.float32))


if __name__ == "__main__":
    unittest.main()
