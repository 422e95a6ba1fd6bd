"""The package's `check_contract` helper (`nki-core/src/emit/kernel_contract.py`)
under the executor: a kernel's enum and dtype contracts, each refusal naming the
kernel, the parameter and what it takes."""

import enum
import importlib.util
import unittest
from pathlib import Path

import kernel_helpers  # noqa: F401  (installs the executor as `nki` first)

from kernel_helpers import hbm, nl, run
from nki_harness.fake_nki.errors import NkiError

SOURCE = Path(__file__).resolve().parents[2] / "nki-core/src/emit/kernel_contract.py"
_spec = importlib.util.spec_from_file_location("kernel_contract", SOURCE)
kernel_contract = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(kernel_contract)
check_contract = kernel_contract.check_contract


class Act(enum.Enum):
    SiLU = 0
    GELU = 1


def checked(act, x, bias):
    """A kernel asserting its contract as emitted kernels do, returning `x`."""
    check_contract(
        "k",
        enums=(("act", act, Act, "Act member (SiLU, GELU)", False),),
        dtypes=(("x", x, (nl.float32, nl.bfloat16), "float32 or bfloat16", False),
                ("bias", bias, (nl.float32,), "float32", True)),
    )
    return x


class CheckContractTest(unittest.TestCase):
    def refused(self, message, *args):
        """Runs `checked(*args)`, asserting it fails in the helper with `message`."""
        with self.assertRaises(NkiError) as e:
            run(checked, *args)
        self.assertRegex(str(e.exception), r"^kernel_contract\.py:\d+: " + message + "$")

    def test_arguments_within_the_contract_pass(self):
        x = hbm([[1.0, 2.0]])
        self.assertIs(run(checked, Act.GELU, x, None), x)
        self.assertIs(run(checked, Act.SiLU, x, hbm([[0.5]])), x)

    def test_a_value_that_is_not_a_member_names_the_class_and_its_members(self):
        self.refused(r"AssertionError: k: act=1 is not a Act member \(SiLU, GELU\)", 1, hbm([[1.0]]), None)

    def test_a_tensor_of_another_dtype_names_the_dtypes_taken(self):
        self.refused("AssertionError: k takes x as float32 or bfloat16", Act.SiLU, hbm([[1]], dtype=nl.int32), None)
        self.refused("AssertionError: k takes bias as float32", Act.SiLU, hbm([[1.0]]), hbm([[1.0]], dtype=nl.bfloat16))

    def test_only_an_optional_parameter_may_be_none(self):
        self.refused("AttributeError: 'NoneType' object has no attribute 'dtype'", Act.SiLU, None, None)


if __name__ == "__main__":
    unittest.main()
