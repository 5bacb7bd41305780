"""The CSV reader of ingest: read checked, reject with file, line and column.

Owns :func:`read_csv_checked` (typed columns, every row's shape walked, empty required cells,
duplicate header names refused), :func:`locate_structure_error` (a ragged row or an unclosed quote
named where it starts) and :func:`check_header_unique`. Used by every CSV format in
:mod:`analytics.ingest.formats` and by any other CSV headroom reads (measured serving profiles).

A source is a path (plain or gzip-compressed) or the file's bytes (an upload held in memory).
Line numbers are 1-based and count the header as a line, so the first data row of a plain CSV is
line 2. Column is the column's name as written in the file header (or its field number).

The file readers and :class:`FormatError` (:mod:`analytics.ingest.rawfile`) and the row checks
(:mod:`analytics.ingest.rowcheck`) are re-exported here, where the formats have always found them.
"""

from __future__ import annotations

import contextlib
import csv
from pathlib import Path

import polars as pl

from analytics.ingest.encoding import source_codec, utf8_bytes, utf8_path
from analytics.ingest.rawfile import (  # noqa: F401 - re-exported
    ECHO_REASON_CHARS,
    ECHO_TOKEN_CHARS,
    MAX_EXPANSION_RATIO,
    ROW,
    FormatError,
    SkippedByDesign,
    Source,
    check_decompressed_size,
    check_gzip_stream,
    cut_echo,
    decompressed_stream,
    header_fields,
    is_gzip,
    is_parquet,
    max_decompressed_bytes,
    open_text,
    raw_stream,
    read_head,
)
from analytics.ingest.rowcheck import (  # noqa: F401 - re-exported
    NoteTally,
    check_allowed,
    check_monotone,
    check_nonnegative,
    check_range,
    check_rules,
    check_unique,
    note_rows,
    parse_timestamps,
    raise_at_first,
    row_lines,
    ts_range_text,
)


def locate_structure_error(path: Source, display: str, skip_lines: int = 0) -> None:
    """Walk the CSV with the csv module and raise at the first ragged row or bad byte.

    Called only after a fast reader has failed, to turn its message into a position.
    """
    if is_gzip(path):
        check_gzip_stream(path, display)
    line = 0
    limit = csv.field_size_limit(WIDE_FIELD)  # a huge cell is named by the reader, not here
    try:
        with open_text(path) as fh:
            for _ in range(skip_lines):
                fh.readline()
                line += 1
            reader = csv.reader(fh)
            width, ended = None, 0
            for row in reader:
                start, ended = skip_lines + ended + 1, reader.line_num
                line = skip_lines + reader.line_num
                if not row:
                    continue
                if width is None:
                    width = len(row)
                elif any("\n" in cell or "\r" in cell for cell in row) and len(row) != width:
                    raise FormatError(  # a quote opened here ran on over the following lines
                        display, start, _quoted_field(row) + 1,
                        f"a quote opens on this line and is not closed where the row should "
                        f"end (the quoted field runs on to line {line})")
                elif len(row) != width:
                    raise FormatError(
                        display, line, min(len(row), width) + 1,
                        f"row has {len(row)} fields, header has {width}",
                    )
    except UnicodeDecodeError as exc:
        bad_line, bad_col = _locate_bad_utf8(path)
        raise FormatError(display, bad_line, bad_col, "bytes are not UTF-8 text") from exc
    except csv.Error as exc:
        raise FormatError(display, line + 1, 1, f"malformed CSV: {exc}") from exc
    finally:
        csv.field_size_limit(limit)


#: Field size the csv module accepts while a file is walked (its default, 128 KiB, would make
#: a huge cell a "malformed CSV" at column 1 instead of a bad value in its named column)
WIDE_FIELD = 1 << 30


@contextlib.contextmanager
def wide_csv_fields():
    """Within the block the csv module reads fields up to :data:`WIDE_FIELD` characters."""
    limit = csv.field_size_limit(WIDE_FIELD)
    try:
        yield
    finally:
        csv.field_size_limit(limit)


def _quoted_field(row: list[str]) -> int:
    """0-based index of the first field of ``row`` that spans lines."""
    return next((i for i, cell in enumerate(row) if "\n" in cell or "\r" in cell), 0)


def _locate_bad_utf8(path: Source) -> tuple[int, int]:
    """Line and field number (1-based; fields counted by commas) of the first byte that is not
    valid UTF-8."""
    with decompressed_stream(path) as fh:
        data = fh.read()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        line_start = data.rfind(b"\n", 0, exc.start) + 1
        return line, data.count(b",", line_start, exc.start) + 1
    return 1, 1


_KIND = {pl.Int64: "an integer", pl.Float64: "a number", pl.String: "text",
         pl.Boolean: "a boolean"}


def read_csv_checked(
    path: Source,
    display: str,
    spec: dict[str, pl.DataType],
    *,
    skip_lines: int = 0,
    rename: dict[str, str] | None = None,
    optional: dict[str, pl.DataType] | None = None,
) -> pl.DataFrame:
    """Read the ``spec`` columns of a CSV with their types; reject with a position otherwise.

    Parameters
    ----------
    path : the file's path, or its bytes.
    display : the file's name in messages.
    spec : column name -> polars dtype; every one must be present and non-empty on every row.
    skip_lines : lines before the header.
    rename : header name as in file -> name to use (e.g. the empty first header cell).
    optional : columns read when present (empty cells allowed).

    Returns
    -------
    DataFrame with the spec (and present optional) columns plus ``__row`` (0-based data-row
    index); rows that are entirely blank are dropped.

    Raises
    ------
    FormatError
        Missing column (line of the header), a cell that is not of its type, an empty
        required cell, ragged rows, truncated gzip, non-UTF-8 bytes. UTF-16 with a
        byte-order mark is decoded first (:mod:`analytics.ingest.encoding`).
    """
    if source_codec(path) is not None:  # UTF-16 (Excel "Unicode text"): read as UTF-8
        if isinstance(path, bytes):
            path = utf8_bytes(path, display)
        else:
            with utf8_path(path, display) as (text_path, _):
                return read_csv_checked(text_path, display, spec, skip_lines=skip_lines,
                                        rename=rename, optional=optional)
    rename = rename or {}
    optional = optional or {}
    head = read_head(path, display)
    header = [rename.get(h, h) for h in header_fields(head, skip_lines)]
    header_line = skip_lines + 1
    check_header_unique(header, display, header_line, names=[*spec, *optional])
    for name in spec:
        if name not in header:
            raise FormatError(
                display, header_line, name,
                f"missing column {name!r}; the header has {header}",
            )
    if _walk_affordable(path):  # polars pads a short row with empty cells: refuse it instead
        locate_structure_error(path, display, skip_lines)
    present_opt = {k: v for k, v in optional.items() if k in header}
    wanted = {**spec, **present_opt}
    new_columns = header if rename else None
    try:
        frame = pl.read_csv(
            path,
            skip_lines=skip_lines,
            new_columns=new_columns,
            columns=None if new_columns else list(wanted),
            schema_overrides=None if new_columns else wanted,
            row_index_name=ROW,
            infer_schema=new_columns is None,
        )
        if new_columns:
            frame = frame.select([ROW, *wanted]).with_columns(
                [pl.col(c).cast(t) for c, t in wanted.items()]
            )
    except Exception:  # noqa: BLE001 - any reader failure is re-diagnosed with a position below
        frame = _diagnose(path, display, wanted, header, skip_lines, new_columns)
    frame = _drop_blank(frame, list(wanted))
    if frame.height == 0:
        raise FormatError(display, header_line + 1, 1, "no data rows (header only)")
    for name in spec:
        nulls = frame.filter(pl.col(name).is_null())
        if nulls.height:
            row = int(nulls[ROW][0])
            raise FormatError(display, header_line + 1 + row, name, "empty value")
    for name, dtype in wanted.items():
        if dtype == pl.Float64:
            bad = frame.filter(pl.col(name).is_not_null() & ~pl.col(name).is_finite())
            if bad.height:
                raise FormatError(display, header_line + 1 + int(bad[ROW][0]), name,
                                  f"{bad[name][0]} is not a finite number")
    return frame


#: Largest file (bytes on disk; a quarter of it when gzip-compressed) whose rows are all walked
#: with the csv module before the fast read, so that a short or long row (a truncated last line,
#: a missing or extra field) is refused naming its line instead of padded with empty cells.
#: About 20 MB/s; a larger file is checked by the fast reader only (extra fields, empty required
#: cells), to keep ingest of multi-GB traces linear in polars' speed.
STRUCTURE_WALK_MAX_BYTES = 64 * 1024 * 1024


def _walk_affordable(source: Source) -> bool:
    """Whether :func:`locate_structure_error` runs on every row of ``source`` (see
    :data:`STRUCTURE_WALK_MAX_BYTES`)."""
    size = len(source) if isinstance(source, bytes) else Path(source).stat().st_size
    return size * (4 if is_gzip(source) else 1) <= STRUCTURE_WALK_MAX_BYTES


def check_header_unique(header: list[str], display: str, line: int = 1,
                        names: list[str] | None = None) -> None:
    """Refuse a header in which a column name (of ``names``, default every non-empty one)
    appears more than once: which column holds the data would be a guess (issue 16 item 7).

    Raises
    ------
    FormatError
        At (``line``, the name), naming every field number it appears at.
    """
    for name in dict.fromkeys(names if names is not None else [h for h in header if h]):
        where = [i + 1 for i, h in enumerate(header) if h == name]
        if len(where) > 1:
            raise FormatError(display, line, name, (
                f"column name {name!r} appears {len(where)} times (fields "
                f"{', '.join(map(str, where))}): which one holds the data is ambiguous"))


def _drop_blank(frame: pl.DataFrame, cols: list[str]) -> pl.DataFrame:
    return frame.filter(~pl.all_horizontal([pl.col(c).is_null() for c in cols]))


def _diagnose(path, display, wanted, header, skip_lines, new_columns) -> pl.DataFrame:
    """Slow path: re-read as text, then find the first cell that does not convert."""
    try:
        text = pl.read_csv(
            path,
            skip_lines=skip_lines,
            infer_schema=False,
            new_columns=new_columns,
            row_index_name=ROW,
        ).select([ROW, *wanted])
    except Exception as exc:  # noqa: BLE001
        locate_structure_error(path, display, skip_lines)
        raise FormatError(display, skip_lines + 1, 1, f"unreadable CSV: {exc}") from exc
    out = [pl.col(ROW)]
    for name, dtype in wanted.items():
        col = text[name].str.strip_chars()
        cast = col.cast(dtype, strict=False)
        bad = cast.is_null() & col.is_not_null() & (col != "")
        if bad.any():
            idx = int(bad.arg_true()[0])
            raise FormatError(
                display, skip_lines + 2 + int(text[ROW][idx]), name,
                f"{col[idx]!r} is not {_KIND.get(dtype, f'a {dtype}')}",
            )
        out.append(pl.lit(cast).alias(name))
    return text.select(out)


