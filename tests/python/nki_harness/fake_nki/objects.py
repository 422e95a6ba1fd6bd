"""`nl.NKIObject`, the base of NKI configuration dataclasses, and
`nisa.NkiInstruction`, the handle every instruction returns.

NKI treats every class attribute of an `NKIObject` subclass as a field, with or
without a type annotation: `@dataclass class Cfg(nl.NKIObject): tile = 128`
makes `Cfg(tile=64)` valid. A plain dataclass ignores unannotated attributes,
so `__init_subclass__` annotates them (as `typing.Any`) before `@dataclass`
reads the class. Subclasses without `@dataclass` take keyword fields too.

A field without a default may be left out of the constructor call; reading it
is the error (see SEMANTICS.md, "NKIObject fields"). `__init_subclass__` gives
such a field an `_UnsetField` descriptor whose class-level value is a sentinel
`@dataclass` takes as the default.
"""

import typing


class _Unset:
    def __repr__(self):
        return "<unset>"


_UNSET = _Unset()


class _UnsetField:
    """The class attribute of a field declared without a default: instances
    keep their value in `__dict__`; a value never given reads as an error."""

    def __init__(self, name):
        self.name = name

    def __get__(self, obj, owner=None):
        if obj is None:
            return _UNSET
        value = obj.__dict__.get(self.name, _UNSET)
        if value is _UNSET:
            raise AttributeError(f"{type(obj).__name__}.{self.name} was never given a value")
        return value

    def __set__(self, obj, value):
        obj.__dict__[self.name] = value


def _is_field(name, value):
    if name.startswith("__") or callable(value):
        return False
    return not isinstance(value, (staticmethod, classmethod, property, type))


def _is_class_var(kind):
    if isinstance(kind, str):
        return kind.startswith(("ClassVar", "typing.ClassVar"))
    return typing.get_origin(kind) is typing.ClassVar or kind is typing.ClassVar


class NKIObject:
    """Base class of NKI kernel dataclasses and configuration objects."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("__annotations__", {})
        extra = {n: typing.Any for n, v in cls.__dict__.items() if n not in own and _is_field(n, v)}
        if extra:
            cls.__annotations__ = {**own, **extra}
        for name, kind in own.items():
            if not hasattr(cls, name) and not _is_class_var(kind):
                setattr(cls, name, _UnsetField(name))

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
