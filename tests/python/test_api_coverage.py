"""The executor provides every public name of the official NKI 2.32 API
(`tests/data/nki-api-names.json`) with the official parameter names
(`tests/data/nki-api-signatures.json`)."""

import inspect
import json
import unittest
from pathlib import Path

import nki_harness.fake_nki as fake

DATA = Path(__file__).resolve().parents[1] / "data"
MODULES = {"nki": fake, "nki.language": fake.language, "nki.isa": fake.isa, "nki.collectives": fake.collectives}

# Names of the stubs that are Python machinery of the stub files, not NKI API.
HOST_ONLY = {
    "*": "the stubs' `from typing import *`, which only serves their type annotations",
    "annotations": "the stubs' `from __future__ import annotations`, a compiler directive",
}


def _api():
    return {m: names for m, names in json.loads((DATA / "nki-api-names.json").read_text()).items()
            if not m.startswith("_")}


def _resolve(dotted):
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        module = ".".join(parts[:i])
        if module in MODULES:
            obj = MODULES[module]
            for p in parts[i:]:
                obj = getattr(obj, p)
            return obj
    raise KeyError(dotted)


class ApiCoverageTest(unittest.TestCase):
    def test_every_public_name_exists(self):
        missing = []
        for module, names in _api().items():
            for name, kind in names.items():
                if name in HOST_ONLY:
                    continue
                obj = getattr(MODULES[module], name, None)
                if obj is None:
                    missing.append(f"{module}.{name}")
                    continue
                if kind == "function" and not callable(obj):
                    missing.append(f"{module}.{name} (not callable)")
                if isinstance(kind, dict):
                    missing += [f"{module}.{name}.{m}" for m in kind["members"] if not hasattr(obj, m)]
        self.assertEqual(missing, [])

    def test_host_only_names_are_only_stub_machinery(self):
        kinds = {kind for names in _api().values() for name, kind in names.items() if name in HOST_ONLY}
        self.assertEqual(kinds, {"import"})

    def test_functions_take_the_official_parameters(self):
        signatures = json.loads((DATA / "nki-api-signatures.json").read_text())
        wrong = []
        for dotted, sig in signatures.items():
            if dotted.startswith("_"):
                continue
            want = sig["params"] + ([sig["var_positional"]] if sig.get("var_positional") else [])
            got = list(inspect.signature(_resolve(dotted)).parameters)
            if got != want:
                wrong.append(f"{dotted}: {got} != {want}")
        self.assertEqual(wrong, [])

    def test_enums_carry_the_documented_values(self):
        isa = fake.isa
        self.assertEqual({m.name: m.value for m in isa.engine},
                         {"tensor": 1, "vector": 5, "scalar": 2, "gpsimd": 3, "dma": 4, "sync": 6, "unknown": 0})
        self.assertEqual([m.value for m in isa.dge_mode], [0, 1, 2, 3])
        self.assertEqual([m.value for m in isa.reduce_cmd], [0, 1, 2, 3, 4])
        self.assertEqual([m.value for m in isa.dma_engine], [1, 2])
        self.assertIs(isa.vector_engine, isa.engine.vector)
        self.assertIs(isa.gpsimd_engine, isa.engine.gpsimd)


if __name__ == "__main__":
    unittest.main()
