"""A CSV written by pandas with its index (``df.to_csv(path)``): an unnamed first column.

``DataFrame.to_csv`` writes the row index as a first column whose header is empty (or
``Unnamed: 0`` after a round trip through ``read_csv``), so a file that is otherwise a known
format is not recognised. :func:`without_index_column` detects that column (an empty or
``Unnamed: N`` first header name over whole numbers counting up by one) and streams a copy of
the file without it, once, so every format reads it; line numbers are kept (one output line per
input line).
"""

from __future__ import annotations

import csv
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from analytics import tempfiles
from analytics.ingest.csvcheck import open_text

_UNNAMED = re.compile(r"(Unnamed: \d+)?")
#: Data rows looked at to decide that the first column is an index
SAMPLE_ROWS = 200


def is_index_column(head: str) -> bool:
    """Whether the text ``head`` (the file's first lines) starts with a pandas index column:
    an empty or ``Unnamed: N`` first header over integers that count up by one.

    >>> is_index_column(",TIMESTAMP,ContextTokens\\n0,2023-11-16,1\\n1,2023-11-16,2\\n")
    True
    >>> is_index_column("timestamp,avg_CI\\n2022-01-01,1.0\\n")
    False
    """
    rows = list(csv.reader(head.splitlines()[: SAMPLE_ROWS + 1]))
    if len(rows) < 2 or len(rows[0]) < 2 or not _UNNAMED.fullmatch(rows[0][0].strip()):
        return False
    cells = [r[0].strip() for r in rows[1:-1] or rows[1:] if r]  # the last line may be cut
    if not cells or not all(c.lstrip("-").isdigit() for c in cells):
        return False
    values = [int(c) for c in cells]
    return all(b - a == 1 for a, b in zip(values, values[1:], strict=False))


@contextmanager
def without_index_column(path: Path) -> Iterator[Path]:
    """A temporary plain copy of the UTF-8 CSV at ``path`` (plain or gzip) without its first
    column, deleted on exit."""
    fd, tmp = tempfiles.mkstemp("headroom-noindex", suffix=".csv")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as out, open_text(path) as src:
            writer = csv.writer(out, lineterminator="\n")
            for row in csv.reader(src):
                writer.writerow(row[1:])
        yield Path(tmp)
    finally:
        Path(tmp).unlink(missing_ok=True)
