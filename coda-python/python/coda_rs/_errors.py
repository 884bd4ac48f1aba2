"""The one way this package's Python code refuses an argument."""

import struct

from ._coda import ArgumentError


def argument_error(name, rule):
    """``ArgumentError("argument `name`: rule")`` with ``argument = name``,
    as the native code raises them."""
    e = ArgumentError(f"argument `{name}`: {rule}")
    e.argument = name
    return e


def f32_number(name, value):
    """``value`` as the kernels' f32 (a float), refused by ``name`` where the
    rounding would change what it is: a finite number past f32's range (it
    would run as ±inf) or a nonzero one below its smallest subnormal (as 0).
    inf and nan pass as they are; what is not a number is refused too."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise argument_error(name, f"{value!r} must be a number, got {type(value).__name__}") from None
    try:
        y = struct.unpack("<f", struct.pack("<f", x))[0]  # standard size: overflow raises
    except OverflowError:
        raise argument_error(name, f"{x!r} is past f32's range (±3.4028235e38): the kernels take f32") from None
    if y == 0 and x != 0:
        raise argument_error(name, f"{x!r} is below f32's smallest subnormal (1.4e-45) and would run as 0: the kernels take f32")
    return x
