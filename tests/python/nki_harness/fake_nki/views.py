"""The view methods of `NkiTensor` (`nki.language.NkiTensor`): reshapes,
permutes, unit dims, merges and splits, explicit access patterns, dtype views
and indirect views. None moves data; each returns a new view of the storage.
On-chip views keep dim 0 as the partition dim. (`reinterpret` and `indirect`
build `NkiTensor`s, so they are imported where first used.)"""

import math

from .errors import NkiError
from .layout import as_int as _int
from .layout import is_contiguous, row_major_strides
from .rearrange import rearrange
from .registers import VirtualRegister

# Keep in step with nki-core/spec/src/registers.rs.
OFFSETS_EXCLUSIVE = ("`scalar_offset` and `vector_offset` of `.ap()` are mutually exclusive (an access pattern takes one "
                     "dynamic offset): add the scalar to every offset on the device (nisa.tensor_scalar on the index "
                     "tile) and pass `vector_offset` alone")


class TensorViews:
    """View methods, mixed into `NkiTensor`."""

    def reshape(self, shape):
        """The same elements with a new shape (the view must be contiguous; on-chip
        views keep their partition dim and only their free dims need be contiguous)."""
        self._direct("reshape")
        shape = tuple(_int("reshape", "a dim", n) for n in shape)
        if math.prod(shape) != self.size:
            raise NkiError("reshape", f"cannot reshape '{self.name}' {list(self.shape)} ({self.size} elements) to "
                                      f"{list(shape)} ({math.prod(shape)} elements)")
        if self.buffer.on_chip:
            if shape[:1] != self.shape[:1]:
                raise NkiError("reshape", f"reshape of on-chip '{self.name}' {list(self.shape)} to {list(shape)} "
                                          f"must keep the partition dim {self.shape[0]}")
            free = (self.shape[1:], self.strides[1:])
            if math.prod(free[0]) > 1 and not is_contiguous(*free):
                raise NkiError("reshape", f"the free dims of '{self.name}' {list(self.shape)} are not contiguous, "
                                          "so it cannot be reshaped")
            return self._view(self.offset, shape, self.strides[:1] + row_major_strides(shape[1:]))
        if self.size > 1 and not is_contiguous(self.shape, self.strides):
            raise NkiError("reshape", f"view of '{self.name}' {list(self.shape)} is not contiguous, so it cannot be "
                                      "reshaped")
        return self._view(self.offset, shape, row_major_strides(shape))

    def ap(self, pattern, offset=None, scalar_offset=None, vector_offset=None, indirect_dim=0, dtype=None):
        """An explicit access pattern `[[step, count], ...]` over the storage.

        The view starts at this view's offset plus `offset` (default 0). With
        `dtype`, the storage is reinterpreted as that dtype first and the pattern,
        offsets and strides count its elements. A `scalar_offset` (a register or a
        one-element tensor) moves the start by its value times the stride of dim
        `indirect_dim` of this view. A `vector_offset` makes the first pattern dim
        indirect: its element r starts at offset r (see `indirect.by_vector_offset`)
        times that stride, read when an instruction uses the view. For on-chip
        tensors the first pair is the partition dim.
        """
        self._direct("ap")
        pairs = [(_int("ap", "a pattern step", st), _int("ap", "a pattern count", c)) for st, c in pattern]
        if not pairs or any(c < 1 for _, c in pairs):
            raise NkiError("ap", f"access pattern {pattern} on '{self.name}' needs at least one [step, count] pair "
                                 "with count >= 1")
        if scalar_offset is not None and vector_offset is not None:
            raise NkiError("ap", OFFSETS_EXCLUSIVE)
        base_view = self if dtype is None or dtype is self.dtype else self._reinterpreted("ap(dtype=)", dtype)
        # On chip the partitions are physical: the docs' "Restriction on SBUF/PSUM
        # Tensors" makes the partition step the allocation's whole free size.
        free = base_view.storage.partition_cells
        if self.buffer.on_chip and pairs[0][1] > 1 and pairs[0][0] != free:
            raise NkiError("ap", f"access pattern {pattern} on '{self.name}': the partition step must be the "
                                 f"allocation's free size {free} (SBUF/PSUM partitions are read whole, one after another)")
        base = base_view.offset + (0 if offset is None else _int("ap", "offset", offset))
        if scalar_offset is not None or vector_offset is not None:
            if not 0 <= indirect_dim < self.ndim:
                raise NkiError("ap", f"indirect_dim {indirect_dim} is not a dim of '{self.name}' {list(self.shape)}")
            stride = base_view.strides[indirect_dim]
        if scalar_offset is not None:
            if isinstance(scalar_offset, VirtualRegister):
                value = scalar_offset.value
            else:
                value = scalar_offset.scalar_value("ap(scalar_offset=)", "scalar_offset")
            base += value * stride
        view = type(self)(base_view.storage, base, [c for _, c in pairs], [st for st, _ in pairs])
        if vector_offset is not None:
            from .indirect import by_vector_offset

            return by_vector_offset("ap(vector_offset=)", view, vector_offset, stride)
        if not view.in_bounds():
            from .indirect import out_of_bounds_rows

            # An access pattern only addresses memory when an instruction uses it, so
            # bounds are checked then: an error, except that a DMA with oob_mode=skip
            # leaves out the rows a dynamic start (scalar_offset) moves outside.
            why = f"scalar_offset {value}" if scalar_offset is not None else f"access pattern {pattern}"
            return out_of_bounds_rows("access pattern", view, why, skippable=scalar_offset is not None)
        return view

    def in_bounds(self):
        """Whether every element of the (direct) view lies inside the storage."""
        r = self.cell_range()
        return r is None or (r[0] >= 0 and r[1] < self.storage.cells.size)

    def _direct(self, op):
        if self._resolve is not None:
            raise NkiError(op, f"'{self.name}' is an indirect view (vector_select, indirect or ap with a "
                               "vector_offset); it cannot be viewed again")

    def _check_dim(self, op, dim):
        self._direct(op)
        if not 0 <= dim < self.ndim:
            raise NkiError(op, f"dim {dim} does not exist in '{self.name}' {list(self.shape)}")

    def _free_dim(self, op, dim, what):
        self._check_dim(op, dim)
        if self.buffer.on_chip and dim == 0:
            raise NkiError(op, f"the partition dim of on-chip '{self.name}' cannot be {what}")

    def is_contiguous(self):
        """Whether the view covers its storage in row-major order (the free dims
        only, for on-chip tensors)."""
        if self.buffer.on_chip:
            return is_contiguous(self.shape[1:], self.strides[1:])
        return is_contiguous(self.shape, self.strides)

    def get_pattern(self):
        """The view as an access pattern `[[stride, count], ...]`."""
        return [[st, n] for st, n in zip(self.strides, self.shape)]

    def is_indirect(self):
        """Whether the view uses indirect (run-time) addressing."""
        return self._resolve is not None

    def permute(self, dims):
        """The dims reordered (`dims` a permutation; on-chip: the partition dim stays first)."""
        self._direct("permute")
        dims = tuple(_int("permute", "a dim", d) for d in dims)
        if sorted(dims) != list(range(self.ndim)):
            raise NkiError("permute", f"dims {list(dims)} are not a permutation of the {self.ndim} dims of "
                                      f"'{self.name}'")
        if self.buffer.on_chip and dims[0] != 0:
            raise NkiError("permute", f"dims {list(dims)} move the partition dim of on-chip '{self.name}'; "
                                      "dims[0] must be 0")
        return self._view(self.offset, [self.shape[d] for d in dims], [self.strides[d] for d in dims])

    def broadcast(self, dim, size):
        """Repeats the unit dim `dim` `size` times (stride 0)."""
        self._free_dim("broadcast", dim, "broadcast")
        if self.shape[dim] != 1:
            raise NkiError("broadcast", f"dim {dim} of '{self.name}' {list(self.shape)} has extent {self.shape[dim]}, "
                                        "only a unit dim can be broadcast")
        shape, strides = list(self.shape), list(self.strides)
        shape[dim], strides[dim] = _int("broadcast", "size", size), 0
        return self._view(self.offset, shape, strides)

    def expand_dim(self, dim):
        """Inserts a unit dim before `dim`."""
        self._direct("expand_dim")
        if not 0 <= dim <= self.ndim or (self.buffer.on_chip and dim == 0):
            raise NkiError("expand_dim", f"cannot insert a dim at position {dim} of '{self.name}' "
                                         f"{list(self.shape)}")
        return self._view(self.offset, self.shape[:dim] + (1,) + self.shape[dim:],
                          self.strides[:dim] + (0,) + self.strides[dim:])

    def squeeze_dim(self, dim):
        """Removes the unit dim `dim`."""
        self._free_dim("squeeze_dim", dim, "squeezed")
        if self.shape[dim] != 1:
            raise NkiError("squeeze_dim", f"dim {dim} of '{self.name}' {list(self.shape)} has extent "
                                          f"{self.shape[dim]}; only a unit dim can be squeezed")
        return self._view(self.offset, self.shape[:dim] + self.shape[dim + 1:],
                          self.strides[:dim] + self.strides[dim + 1:])

    def reshape_dim(self, dim, shape):
        """Splits dim `dim` into `shape` (one entry may be -1, inferred)."""
        self._check_dim("reshape_dim", dim)
        sizes = [_int("reshape_dim", "a size", n) for n in shape]
        n = self.shape[dim]
        if sizes.count(-1) > 1 or any(k < 1 and k != -1 for k in sizes):
            raise NkiError("reshape_dim", f"shape {list(shape)} may hold one -1 and otherwise positive sizes")
        known = math.prod(k for k in sizes if k != -1)
        if -1 in sizes:
            if n % known:
                raise NkiError("reshape_dim", f"cannot split dim {dim} (extent {n}) of '{self.name}' into "
                                              f"{list(shape)}")
            sizes[sizes.index(-1)] = n // known
        if math.prod(sizes) != n:
            raise NkiError("reshape_dim", f"shape {list(shape)} holds {math.prod(sizes)} elements but dim {dim} of "
                                          f"'{self.name}' {list(self.shape)} has {n}")
        if self.buffer.on_chip and dim == 0 and len(sizes) != 1:
            raise NkiError("reshape_dim", f"the partition dim of on-chip '{self.name}' cannot be split")
        strides = [self.strides[dim] * st for st in row_major_strides(sizes)]
        return self._view(self.offset, self.shape[:dim] + tuple(sizes) + self.shape[dim + 1:],
                          self.strides[:dim] + tuple(strides) + self.strides[dim + 1:])

    def flatten_dims(self, start_dim, end_dim):
        """Merges dims `start_dim..=end_dim`, which must be contiguous in storage."""
        self._check_dim("flatten_dims", start_dim)
        self._check_dim("flatten_dims", end_dim)
        if self.buffer.on_chip and start_dim == 0:
            raise NkiError("flatten_dims", f"the partition dim of on-chip '{self.name}' cannot be merged")
        if end_dim < start_dim:
            raise NkiError("flatten_dims", f"cannot merge dims {start_dim}..={end_dim} of '{self.name}': the start "
                                           "is past the end")
        dims = (self.shape[start_dim:end_dim + 1], self.strides[start_dim:end_dim + 1])
        inner = [(n, st) for n, st in zip(*dims) if n != 1]
        if any(st != inner[i + 1][0] * inner[i + 1][1] for i, (_, st) in enumerate(inner[:-1])):
            raise NkiError("flatten_dims", f"dims {start_dim}..={end_dim} of '{self.name}' {list(self.shape)} are "
                                           "not contiguous in storage, so they cannot be merged")
        stride = inner[-1][1] if inner else 1
        return self._view(self.offset, self.shape[:start_dim] + (math.prod(dims[0]),) + self.shape[end_dim + 1:],
                          self.strides[:start_dim] + (stride,) + self.strides[end_dim + 1:])

    def rearrange(self, src_pattern, dst_pattern, fixed_sizes=None):
        """einops-style: splits the grouped dims of `src_pattern` (sizes from
        `fixed_sizes`, one inferred), reorders by name, merges the groups of
        `dst_pattern`."""
        self._direct("rearrange")
        return rearrange(self, src_pattern, dst_pattern, fixed_sizes or {})

    def view(self, dtype):
        """The same bytes as `dtype`: the last dim (contiguous) scales by the size ratio."""
        self._direct("view")
        return self._reinterpreted("view", dtype)

    reinterpret_cast = view

    def _reinterpreted(self, op, dtype):
        from .reinterpret import reinterpret

        return reinterpret(op, self, dtype)

    def select(self, dim, index):
        """Position `index` of `dim`, dropping the dim; a one-element tensor or a
        register index is read when the view is made (a dynamic select)."""
        self._check_dim("select", dim)
        if self.buffer.on_chip and dim == 0:
            raise NkiError("select", f"the partition dim of '{self.name}' cannot be selected away")
        if isinstance(index, TensorViews):
            index = index.scalar_value("select", "a dynamic index")
        elif isinstance(index, VirtualRegister):
            index = index.value
        return self[(slice(None),) * dim + (index,)]

    def vector_select(self, dim, vector_offset):
        """Partition p of the result is row `vector_offset[p]` of dim 0 (HBM only)."""
        from .indirect import vector_select

        self._check_dim("vector_select", dim)
        return vector_select(self, dim, vector_offset)

    def indirect(self, index, num_elem=None):
        """Tensor indirection (trn3+): column i of the (P, num_elem) result is
        column `index[i % 16, i // 16]` of this view."""
        from .indirect import tensor_indirection

        self._direct("indirect")
        return tensor_indirection(self, index, num_elem)

    def slice(self, dim, start, end, step=1):
        """`start:end:step` along `dim`."""
        self._check_dim("slice", dim)
        return self[(slice(None),) * dim + (slice(start, end, step),)]
