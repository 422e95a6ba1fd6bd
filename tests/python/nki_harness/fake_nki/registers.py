"""`nisa.VirtualRegister`: a runtime 32-bit scalar of one program."""


class VirtualRegister:
    """A register; `value` is its current integer content."""

    def __init__(self, value=0):
        self.value = int(value)

    def set(self, value):
        """Stores `value` wrapped to a signed 32-bit integer."""
        self.value = (int(value) + (1 << 31)) % (1 << 32) - (1 << 31)

    def __repr__(self):
        return f"VirtualRegister({self.value})"
