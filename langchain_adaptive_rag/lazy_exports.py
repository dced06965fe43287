"""Public names imported on first use (PEP 562), and modules that moved, under old paths.

Both keep the package's import light and its old import paths working: a public name
loads its module when first used; an old module path (``langchain_adaptive_rag.policy``)
still imports, with a ``DeprecationWarning`` naming the new one.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
import warnings
from collections.abc import Callable, Mapping, MutableMapping, Sequence

__all__ = ["MOVED_MODULES", "install_moved_modules", "lazy_exports"]

MOVED_MODULES: dict[str, str] = {
    "langchain_adaptive_rag.policy": "langchain_adaptive_rag.graphs.policy",
    "langchain_adaptive_rag.nodes": "langchain_adaptive_rag.graphs._nodes",
    "langchain_adaptive_rag.routing": "langchain_adaptive_rag.graphs._builder",
    "langchain_adaptive_rag.call_config": "langchain_adaptive_rag.graphs.call_config",
    "langchain_adaptive_rag.streaming": "langchain_adaptive_rag.graphs._streaming",
    "langchain_adaptive_rag.query_formulation": "langchain_adaptive_rag.graphs.query_formulation",
    "langchain_adaptive_rag.pos": "langchain_adaptive_rag.graphs.pos",
    "langchain_adaptive_rag.reflection": "langchain_adaptive_rag.graphs.reflection",
    "langchain_adaptive_rag.complexity": "langchain_adaptive_rag.graphs.complexity",
    "langchain_adaptive_rag.commands": "langchain_adaptive_rag.cli.commands",
    "langchain_adaptive_rag.demo_commands": "langchain_adaptive_rag.cli.demo",
    "langchain_adaptive_rag.index_commands": "langchain_adaptive_rag.cli.index",
    "langchain_adaptive_rag.console": "langchain_adaptive_rag.cli.console",
}
"""Each module's old path and where it lives now (the old paths go in a later release)."""


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


class _MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old module path as a module that forwards every name to the new one."""

    def __init__(self, moves: Mapping[str, str]) -> None:
        self.moves = dict(moves)

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.moves:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return None  # a plain module, filled in by exec_module

    def exec_module(self, module: types.ModuleType) -> None:
        new_path = self.moves[module.__name__]
        warnings.warn(
            f"{module.__name__} moved to {new_path}; the old path will be removed in a "
            f"later release. Fix: import from {new_path}.",
            DeprecationWarning,
            stacklevel=2,
        )
        target = importlib.import_module(new_path)

        def forward(name: str) -> object:
            return getattr(target, name)

        module.__getattr__ = forward  # type: ignore[method-assign]
        module.__doc__ = f"Moved to {new_path}."
        module.__dict__["__all__"] = list(getattr(target, "__all__", []))


def install_moved_modules(moves: Mapping[str, str]) -> None:
    """Let the old paths in ``moves`` import (once per process), each warning when imported.

    Args:
        moves: Each old module path and the module that replaced it.
    """
    # one finder, also when the package's modules are imported afresh (a new class)
    sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "_MovedModuleFinder"]
    sys.meta_path.append(_MovedModuleFinder(moves))
