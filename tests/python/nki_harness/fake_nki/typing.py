"""`nki.typing` (`nt`): annotations of kernel tensor parameters, as the NKI
migration guide introduces them (`X: nt.tensor[128, 512]`), plus
`nt.mutable_tensor`, the annotation of an HBM tensor a kernel writes (the AWS
NKI library's `router_topk` uses it). They document; nothing checks them when a
kernel runs.
"""


class TensorAnnotation:
    """`nt.tensor` / `nt.mutable_tensor`, optionally with a shape (`nt.tensor[128, 512]`)."""

    def __init__(self, name, shape=None):
        self._name = name
        self.shape = shape

    def __getitem__(self, shape):
        return TensorAnnotation(self._name, shape if isinstance(shape, tuple) else (shape,))

    def __repr__(self):
        dims = "" if self.shape is None else "[" + ", ".join(map(str, self.shape)) + "]"
        return f"nt.{self._name}{dims}"


tensor = TensorAnnotation("tensor")
mutable_tensor = TensorAnnotation("mutable_tensor")

__all__ = ["tensor", "mutable_tensor"]
