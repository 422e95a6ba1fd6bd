"""`nl.NKIObject`, the base of NKI configuration dataclasses, and
`nisa.NkiInstruction`, the handle every instruction returns.

NKI treats every class attribute of an `NKIObject` subclass as a field, with or
without a type annotation: `@dataclass class Cfg(nl.NKIObject): tile = 128`
makes `Cfg(tile=64)` valid. A plain dataclass ignores unannotated attributes,
so `__init_subclass__` annotates them (as `typing.Any`) before `@dataclass`
reads the class. Subclasses without `@dataclass` take keyword fields too.
"""

import typing


def _is_field(name, value):
    if name.startswith("__") or callable(value):
        return False
    return not isinstance(value, (staticmethod, classmethod, property, type))


class NKIObject:
    """Base class of NKI kernel dataclasses and configuration objects."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("__annotations__", {})
        extra = {n: typing.Any for n, v in cls.__dict__.items() if n not in own and _is_field(n, v)}
        if extra:
            cls.__annotations__ = {**own, **extra}

    def __init__(self, **kwargs):
        for name, value in kwargs.items():
            setattr(self, name, value)


class NkiInstruction(NKIObject):
    """The handle of an issued instruction. The executor runs instructions in
    program order, so dependencies are recorded but change nothing."""

    def __init__(self, handle):
        self.handle = handle
        self.producers = []

    def __repr__(self):
        return f"NkiInstruction({self.handle})"

    def depends_on(self, *producers):
        """Records that this instruction runs after every producer; returns self."""
        self.producers.extend(producers)
        return self
