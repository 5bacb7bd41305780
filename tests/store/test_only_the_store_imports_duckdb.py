"""Issue 28: the DuckDB code lives behind the store. Every module of ``analytics/`` outside
``analytics/store/`` is parsed and none imports ``duckdb`` (at module level or inside a
function); the one road's DuckDB calls are in ``analytics/store/csvread.py``."""

from __future__ import annotations

import ast

from conftest import REPO


def _imports(path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


def test_no_module_outside_the_store_imports_duckdb():
    analytics = REPO / "analytics"
    outside = [p for p in analytics.rglob("*.py") if (analytics / "store") not in p.parents]
    assert len(outside) > 100  # the walk found the package
    assert [str(p.relative_to(REPO)) for p in outside if "duckdb" in _imports(p)] == []
    assert "duckdb" in _imports(analytics / "store" / "csvread.py")
