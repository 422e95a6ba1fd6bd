"""`nisa.VirtualRegister`: a runtime 32-bit scalar of one program."""

from .objects import NKIObject


class VirtualRegister(NKIObject):
    """A register; `value` is its current integer content. It converts to an
    integer (`int(r)`, `range(r)`, `while r:`) as under NKI's parser frontend."""

    def __init__(self, state=None, frozen=False):
        self.value = int(state or 0)

    def __int__(self):
        return self.value

    __index__ = __int__

    def __bool__(self):
        return self.value != 0

    def set(self, value):
        """Stores `value` wrapped to a signed 32-bit integer."""
        self.value = (int(value) + (1 << 31)) % (1 << 32) - (1 << 31)

    def __repr__(self):
        return f"VirtualRegister({self.value})"
