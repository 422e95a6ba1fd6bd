"""PSUM accounting for one program: every PSUM tensor holds whole banks.

NKI places each PSUM tensor at a bank boundary, so a tensor of `b` bytes per
partition takes `ceil(b / bank bytes)` of the generation's banks (8 of 2 KiB per
partition) and no two tensors share a bank; banks are counted, not placed. The
compiler allocates on-chip memory by liveness, which starts at the first
instruction that touches a tensor, so a tensor takes its banks then (not at
`nl.ndarray`) and gives them back when Python frees it: when its last reference
goes, as its name is rebound or its function returns.
"""

import math
import threading

from .errors import NkiError


def _plural(n, what):
    return f"{n} {what}{'' if n == 1 else 's'}"


class PsumBanks:
    """The PSUM banks of one program: who holds how many, and the peak."""

    def __init__(self, hw):
        self.hw = hw
        self.peak = 0
        self._tenants = {}
        self._lock = threading.RLock()  # a release can run from any frame that drops a tensor

    @property
    def in_use(self):
        """Banks held now."""
        return sum(n for _, n in self._tenants.values())

    def lease(self, storage):
        """Takes the banks of PSUM `storage`; returns the token that gives them back.

        Raises a capacity error naming the tensor, the banks it needs, the banks in
        use (and by which tensors) and the bank count when they are not free.
        """
        per_partition = math.prod(storage.shape[1:]) * storage.dtype.size
        need = -(-per_partition // self.hw.psum_bank_bytes)
        with self._lock:
            total, used = self.hw.psum_banks, self.in_use
            if used + need > total:
                held = ", ".join(f"'{name}' ({_plural(n, 'bank')})" for name, n in self._tenants.values())
                raise NkiError(None, f"PSUM capacity exceeded: tensor '{storage.name}' needs {_plural(need, 'bank')} "
                                     f"({per_partition} B per partition; every PSUM tensor takes whole banks of "
                                     f"{self.hw.psum_bank_bytes} B), but {used} of the {total} banks are in "
                                     f"use{': ' + held if held else ''}")
            self._tenants[storage.id] = (storage.name, need)
            self.peak = max(self.peak, used + need)
            return storage.id

    def release(self, token):
        """Gives back the banks leased under `token`."""
        with self._lock:
            del self._tenants[token]
