"""Public names imported on first use (PEP 562), for the package and its heavy subpackages."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping, Sequence

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str,
    exports: Mapping[str, str],
    namespace: MutableMapping[str, object],
    names: Sequence[str],
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` that import each public name on first use.

    Args:
        package: The package's name, for the error message.
        exports: Each public name and the module that defines it.
        namespace: The package's ``globals()``: a name imported once is kept there, so
            later lookups skip ``__getattr__``.
        names: The package's ``__all__``.

    Returns:
        ``(__getattr__, __dir__)``, to assign at the package's module level.
    """

    def get(name: str) -> object:
        module = exports.get(name)
        if module is None:
            msg = f"module {package!r} has no attribute {name!r}"
            raise AttributeError(msg)
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def listing() -> list[str]:
        return sorted({*namespace, *names})

    return get, listing
