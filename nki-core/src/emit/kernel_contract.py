def check_contract(kernel, enums=(), dtypes=()):
    """Asserts that each parameter of `kernel` holds what the kernel takes.

    Each row of `enums` is `(name, value, cls, members, optional)`: `value`
    must be a member of the `Enum` class `cls` (`members`, the class and its
    members, for the message). Each row of `dtypes` is `(name, value, allowed,
    listed, optional)`: `value` must be a tensor of a dtype in `allowed`
    (`listed` names them). An `optional` parameter may also be `None`.
    """
    for row in enums:
        name, value, cls, members, optional = row
        assert (optional and value is None) or isinstance(value, cls), f"{kernel}: {name}={value!r} is not a {members}"
    for row in dtypes:
        name, value, allowed, listed, optional = row
        assert (optional and value is None) or value.dtype in allowed, f"{kernel} takes {name} as {listed}"
