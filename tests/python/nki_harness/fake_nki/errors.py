"""Errors raised by emulated kernels."""


class NkiValidationError(Exception):
    """`nki.isa.NkiValidationError`: a hardware constraint was violated."""


class NkiError(NkiValidationError):
    """A kernel broke a rule of the NKI API or the hardware.

    Printed as `[rank r program p] op (file:line): message`, each part only when known.
    """

    def __init__(self, op, message):
        super().__init__(message)
        self.op = op
        self.message = message
        self.origin = None
        self.location = None

    def __str__(self):
        head = f"[rank {self.origin[0]} program {self.origin[1]}] " if self.origin else ""
        where = f"{self.location[0]}:{self.location[1]}" if self.location else None
        if self.op and where:
            head += f"{self.op} ({where}): "
        elif self.op or where:
            head += f"{self.op or where}: "
        return head + self.message


class Aborted(NkiError):
    """A program stopped because another program of the launch failed."""

    def __init__(self):
        super().__init__(None, "stopped because another program of the launch failed")
