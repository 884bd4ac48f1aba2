"""The one way this package's Python code refuses an argument."""

from ._coda import ArgumentError


def argument_error(name, rule):
    """``ArgumentError("argument `name`: rule")`` with ``argument = name``,
    as the native code raises them."""
    e = ArgumentError(f"argument `{name}`: {rule}")
    e.argument = name
    return e
