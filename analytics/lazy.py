"""A module imported on first use, for libraries that cost a light command its start-up time.

``headroom datasets`` or ``--help`` must start in a fraction of a second (issue 15: the CLI paid
2.2 s CPU importing pandas, SciPy, scikit-learn and MAPIE it never used). A module that needs a
heavy library only inside some functions binds it with :func:`lazy_module`: the import happens
at the first attribute access, once, and later accesses are a dictionary look-up.

>>> json = lazy_module("json")
>>> json.dumps([1])
'[1]'
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType


class _LazyModule:
    """Stands in for module ``name`` until an attribute of it is asked for."""

    __slots__ = ("_name",)

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str):
        module = sys.modules.get(self._name) or importlib.import_module(self._name)
        return getattr(module, attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"


def lazy_module(name: str) -> ModuleType:
    """A stand-in for ``import name`` that imports it when first used (typed as the module)."""
    return _LazyModule(name)  # type: ignore[return-value]
