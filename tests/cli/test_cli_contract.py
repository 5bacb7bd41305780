"""``docs/cli.md`` is the CLI's contract: every command the parser knows has its row there, and
the row names the family module that defines it (issue 32 item 5: the contract in ``docs/``,
where the code cited a ``DESIGN.md`` a clone does not have)."""

from __future__ import annotations

import re

from harness import REPO

from analytics.cli import families


def test_every_command_has_its_row_in_docs_cli_md():
    text = (REPO / "docs" / "cli.md").read_text()
    rows = dict(re.findall(r"^\| `([a-z-]+)` \| `cli/([a-z]+)\.py` \|", text, re.M))
    known = {name: fam.__name__.rsplit(".", 1)[1] for fam in families() for name in fam.COMMANDS}
    assert rows == known


def test_no_module_cites_a_design_document_a_clone_lacks():
    cited = [p for p in (REPO / "analytics").rglob("*.py") if "DESIGN.md" in p.read_text()]
    assert cited == []
