"""`NkiTensor.rearrange`: einops-style split, reorder and merge of dims."""

from .errors import NkiError


def _names(op, pattern):
    flat, groups = [], []
    for entry in pattern:
        names = [entry] if isinstance(entry, str) else list(entry)
        if not names or not all(isinstance(n, str) for n in names):
            raise NkiError(op, f"pattern {pattern!r} must hold names or tuples of names")
        groups.append(names)
        flat.extend(names)
    if len(set(flat)) != len(flat):
        raise NkiError(op, f"pattern {pattern!r} repeats a name")
    return flat, groups


def rearrange(t, src_pattern, dst_pattern, fixed_sizes):
    """`t` with the grouped dims of `src_pattern` split, the names reordered as in
    `dst_pattern` and its groups merged."""
    op = "rearrange"
    src, src_groups = _names(op, src_pattern)
    dst, dst_groups = _names(op, dst_pattern)
    if len(src_groups) != t.ndim:
        raise NkiError(op, f"src pattern {src_pattern!r} names {len(src_groups)} dims but '{t.name}' has {t.ndim}")
    if sorted(src) != sorted(dst):
        raise NkiError(op, f"patterns {src_pattern!r} and {dst_pattern!r} must name the same dims")
    view = t
    for d in reversed(range(len(src_groups))):
        group = src_groups[d]
        if len(group) > 1:
            view = view.reshape_dim(d, [int(fixed_sizes.get(n, -1)) for n in group])
    view = view.permute([src.index(n) for n in dst])
    at = sum(len(g) for g in dst_groups)
    for group in reversed(dst_groups):
        at -= len(group)
        if len(group) > 1:
            view = view.flatten_dims(at, at + len(group) - 1)
    return view
