"""Reading an input file's bytes and text, and the one rejection every reader raises.

Owns :class:`FormatError` (every rejection names file, line, column and reason, with echoed
values cut by :func:`cut_echo`) and :class:`SkippedByDesign`, the source helpers (plain or
gzip, a path or an upload's bytes: :func:`is_gzip`, :func:`is_parquet`, :func:`open_text`,
:func:`read_head`, :func:`header_fields`), and the limits on compressed files
(:func:`check_decompressed_size`, :func:`check_gzip_stream`) and on what the readers that hold
a file whole may take (:func:`check_in_memory`, :func:`check_parquet_size`). The CSV reader is
:mod:`analytics.ingest.csvcheck`; the row checks are :mod:`analytics.ingest.rowcheck`.
"""

from __future__ import annotations

import csv
import gzip
import io
import os
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from analytics.config import env_number
from analytics.ingest.encoding import (
    RESAVE,
    decode_head,
    looks_utf16_without_bom,
    utf16_codec,
)

#: A file to read: its path, or its bytes.
Source = str | Path | bytes

ROW = "__row"  # 0-based data-row index carried through parsing to report line numbers


#: Longest run of non-space characters an error message echoes from a file (a cell, a header)
ECHO_TOKEN_CHARS = 80
#: Longest error reason (a 100 MB cell must not make a 100 MB message)
ECHO_REASON_CHARS = 1000


def cut_echo(text: str, limit: int = ECHO_TOKEN_CHARS) -> str:
    """``text`` with every run of non-space characters over :data:`ECHO_TOKEN_CHARS` cut to
    its first 40 characters and the whole cut to ``limit`` characters, each cut said
    (``...[+N chars]``). Used on everything a FormatError echoes from a file.

    >>> cut_echo("value " + "x" * 120)
    'value xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...[+80 chars]'
    """
    def cut(match: re.Match) -> str:
        token = match.group(0)
        return f"{token[:40]}...[+{len(token) - 40:,} chars]"

    text = re.sub(rf"\S{{{ECHO_TOKEN_CHARS + 1},}}", cut, str(text))
    if len(text) > limit:
        text = f"{text[:limit]}...[+{len(text) - limit:,} chars]"
    return text


class FormatError(ValueError):
    """A file was rejected; says where and why.

    Attributes
    ----------
    file : str   name of the file as the user gave it
    line : int   1-based line number (header = line 1)
    column : str or int   column name, or 1-based field number
    reason : str
    """

    def __init__(self, file: str, line: int, column: str | int, reason: str):
        column = cut_echo(column) if isinstance(column, str) else column
        reason = cut_echo(reason, ECHO_REASON_CHARS)
        self.file, self.line, self.column, self.reason = file, line, column, reason
        super().__init__(f"{file}: line {line}, column {column}: {reason}")

    def as_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "column": self.column, "reason": self.reason}


class SkippedByDesign(FormatError):
    """A recognised, valid file that holds nothing a canonical table keeps, by design (e.g. an
    ML.ENERGY v3 file whose configurations are all diffusion runs: images / videos, no tokens).

    Ingest reports it with status ``skipped`` and ``reason`` (not ``rejected``) and writes
    nothing (:mod:`analytics.ingest.files`); a caller that knows only :class:`FormatError`
    still refuses it, naming file, line and column. Attributes as :class:`FormatError`, and
    ``format``: the name of the format that recognised the file (set by ``parse_file``).
    """

    format: str | None = None



def gzip_reader(fileobj: BinaryIO) -> BinaryIO:
    """A gzip file object over ``fileobj`` (every member, CRC checked): ISA-L's ``igzip``
    (python-isal; 3.5x less CPU than the standard library's on a 48 MB trace: 0.15 s against
    0.52 s, ``bench/bench_ingest.py``), the standard library's where it is missing. Its faults:
    :data:`GZIP_FAULTS`."""
    try:
        from isal import igzip
    except ImportError:  # pragma: no cover - isal is a dependency; a build without ISA-L
        return gzip.GzipFile(fileobj=fileobj)
    return igzip.GzipFile(fileobj=fileobj)


def _gzip_faults() -> tuple[type[BaseException], ...]:
    try:
        from isal.isal_zlib import error as isal_error
    except ImportError:  # pragma: no cover
        return (OSError, EOFError, zlib.error)
    return (OSError, EOFError, zlib.error, isal_error)


#: What reading a truncated or corrupt gzip stream raises (either library)
GZIP_FAULTS = _gzip_faults()


def raw_stream(source: Source) -> BinaryIO:
    """The source's bytes as a binary file object (compressed bytes stay compressed)."""
    return io.BytesIO(source) if isinstance(source, bytes) else open(source, "rb")  # noqa: SIM115


def decompressed_stream(source: Source) -> BinaryIO:
    """The source's bytes as a binary file object, gunzipped when gzip-compressed."""
    return gzip_reader(raw_stream(source)) if is_gzip(source) else raw_stream(source)


def is_gzip(source: Source) -> bool:
    """Whether the source starts with the gzip magic bytes."""
    with raw_stream(source) as fh:
        return fh.read(2) == b"\x1f\x8b"


def is_parquet(source: Source) -> bool:
    """Whether the source starts with the Parquet magic bytes ``PAR1``."""
    with raw_stream(source) as fh:
        return fh.read(4) == b"PAR1"


#: what a spreadsheet or archive is, and what to do with it (issue 27: an .xlsx is a ZIP, not
#: "binary data"); matched on the first bytes and, for a ZIP, the member names in its head
_SHEET = "save the sheet as CSV UTF-8 (File > Save As > CSV UTF-8) and give that file"


def container_kind(head: bytes) -> str | None:
    """The refusal for a file that is a spreadsheet workbook or an archive, by its first bytes
    (``head``: the file's first bytes, decompressed): an Excel ``.xlsx`` (a ZIP holding
    ``xl/``), an OpenDocument ``.ods``, another ZIP, or a legacy Excel ``.xls`` (OLE2
    compound file); None for anything else."""
    if head.startswith(b"PK\x03\x04"):
        if b"xl/" in head:
            return f"Excel workbook (.xlsx), not CSV text: {_SHEET}"
        if b"opendocument.spreadsheet" in head:
            return f"OpenDocument spreadsheet (.ods), not CSV text: {_SHEET}"
        return "ZIP archive, not a trace: unzip it and give the file inside"
    if head.startswith(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"):
        return f"Excel 97-2003 workbook (.xls, a compound file), not CSV text: {_SHEET}"
    return None


def read_head(path: Source, display: str, nbytes: int = 65536) -> str:
    """First ``nbytes`` of the (decompressed) file as text.

    UTF-16 with a byte-order mark is decoded (TAB-separated rows shown comma-separated, as
    :func:`analytics.ingest.encoding.utf8_path` hands them to the formats).

    Raises
    ------
    FormatError
        Empty file, unreadable gzip, a spreadsheet workbook or ZIP archive named as such
        (:func:`container_kind`), UTF-16 without a byte-order mark ("UTF-16 text: re-save
        as CSV UTF-8"), or bytes that are not UTF-8 text (binary garbage).
        Parquet files return ``"PAR1"``.
    """
    size = len(path) if isinstance(path, bytes) else Path(path).stat().st_size
    if size == 0:
        raise FormatError(display, 1, 1, "empty file")
    if is_parquet(path):
        return "PAR1"
    try:
        with decompressed_stream(path) as fh:
            raw = fh.read(nbytes)
    except GZIP_FAULTS as exc:
        raise FormatError(display, 1, 1, f"gzip stream is unreadable: {exc}") from exc
    if not raw.strip():
        raise FormatError(display, 1, 1, "empty file (no data after decompression)")
    if (what := container_kind(raw)) is not None:
        raise FormatError(display, 1, 1, what)
    codec = utf16_codec(raw)
    if codec is not None:
        return decode_head(raw, codec)
    if b"\x00" in raw:
        if looks_utf16_without_bom(raw):
            raise FormatError(display, 1, 1, f"{RESAVE} (UTF-16 without a byte-order mark)")
        line = raw[: raw.index(b"\x00")].count(b"\n") + 1
        raise FormatError(display, line, 1, "binary data (NUL byte), not a text trace")
    if raw.startswith(b"\xef\xbb\xbf"):  # UTF-8 byte-order mark
        raw = raw[3:]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start > len(raw) - 4:  # a multi-byte character cut by the head window
            return raw[: exc.start].decode("utf-8")
        line = raw[: exc.start].count(b"\n") + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise FormatError(display, line, col, "bytes are not UTF-8 text (binary data?)") from exc


def header_fields(head: str, skip_lines: int = 0) -> list[str]:
    """Fields of the header line (after ``skip_lines``), as the csv module reads them."""
    lines = head.splitlines()
    if len(lines) <= skip_lines:
        return []
    return next(csv.reader([lines[skip_lines]]))


def max_decompressed_bytes() -> int:
    """Most bytes a compressed file may expand to: ``$HEADROOM_MAX_DECOMPRESSED_MB`` (default
    2,000 MB)."""
    return int(env_number("HEADROOM_MAX_DECOMPRESSED_MB", 2000) * 1_000_000)


#: Largest expansion ratio accepted once a file expands past 64 MB (real CSV and JSON traces
#: compress 5-30x; a decompression bomb, 1,000x)
MAX_EXPANSION_RATIO = 200


@dataclass(frozen=True)
class Expanded:
    """What a file holds once decompressed: ``bytes``; for a gzip file also
    ``last_line_bytes`` (length of its last line, without its newline), found on the one pass
    that checks its size (None for a plain file: read from the file itself), and
    :meth:`newlines`, counted only when asked (to name a refused last line: a count on every
    pass cost 0.08 s of a 5 M-row trace's 2.3 s)."""

    bytes: int
    lines: int | None = None
    last_line_bytes: int | None = None
    trailing_newline: bool = True
    source: Source | None = None

    def newlines(self) -> int:
        """The newline bytes of the decompressed file (``lines``, or one more pass)."""
        if self.lines is not None or self.source is None:
            return self.lines or 0
        count = 0
        with decompressed_stream(self.source) as fh:
            while chunk := fh.read(1 << 20):
                count += chunk.count(b"\n")
        return count


def check_decompressed_size(path: Source, display: str) -> Expanded:
    """Stream a gzip file to its end in 1 MiB chunks (memory stays flat), refusing it as soon as
    it expands past :func:`max_decompressed_bytes` or, beyond 64 MB, past
    :data:`MAX_EXPANSION_RATIO` times its compressed size; returns what it expands to (a plain
    file: its size, untouched).

    Raises
    ------
    FormatError
        Line 1, naming the limit, the size reached and what to do.
    """
    if isinstance(path, bytes):
        return Expanded(len(path))
    packed = Path(path).stat().st_size
    if not is_gzip(path):
        return Expanded(packed)
    cap, done, line_len, last_len = max_decompressed_bytes(), 0, 0, 0
    try:
        with gzip_reader(raw_stream(path)) as fh:
            while chunk := fh.read(1 << 20):
                done += len(chunk)
                if done > cap or (done > 64_000_000 and done > MAX_EXPANSION_RATIO * packed):
                    why = (f"over the {cap / 1e6:,.0f} MB limit" if done > cap else
                           f"over {MAX_EXPANSION_RATIO}x its compressed {packed / 1e6:,.1f} MB")
                    raise FormatError(display, 1, 1, (
                        f"the compressed file expands to more than {done / 1e6:,.0f} MB, {why} "
                        "(a decompression bomb?); decompress it yourself and ingest the plain "
                        "file, or raise HEADROOM_MAX_DECOMPRESSED_MB"))
                last = chunk.rfind(b"\n")  # the lines are counted only to name a refusal
                if last >= 0:
                    before = chunk.rfind(b"\n", 0, last)
                    last_len = (line_len + last) if before < 0 else last - before - 1
                    line_len = len(chunk) - last - 1
                else:
                    line_len += len(chunk)
    except GZIP_FAULTS:  # truncated or corrupt: the parsers name the line
        return Expanded(done)
    return Expanded(done, None, line_len if line_len else last_len,
                    trailing_newline=not line_len, source=path)


def max_in_memory_bytes() -> int:
    """Largest file (decompressed text, or a Parquet file's decoded columns) the checked readers
    take, which hold a file whole in memory: ``$HEADROOM_MAX_IN_MEMORY_MB`` (default 1,000 MB;
    they peak at about 2.5x a file's size). Larger request traces of the formats with a
    streamed road (BurstGPT, Azure LLM) go that way, plain or gzip, at any size."""
    return int(env_number("HEADROOM_MAX_IN_MEMORY_MB", 1000) * 1_000_000)


class TooLargeInMemory(FormatError):
    """A file over :func:`max_in_memory_bytes` for a reader that holds it whole."""


#: How many times its size a JSON text counts against :func:`max_in_memory_bytes`: Python's
#: JSON objects take 10-25x the text (a 150 MB file peaked at 3.65 GB; break-it review).
JSON_WEIGHT = 10


def check_in_memory(size: int, display: str, what: str = "expands to",
                    weight: int = 1) -> None:
    """Refuse a file of ``size`` bytes (decompressed) for the in-memory readers, a JSON text
    (``weight``: :data:`JSON_WEIGHT`) counting ``weight`` times its size.

    Raises
    ------
    TooLargeInMemory
        Line 1, naming the size, the limit, which traces are read at any size, and what to do.
    """
    cap = max_in_memory_bytes()
    if size * weight > cap:
        json = (f" of JSON, which a reader holds at 10-25x its size (JSON files are read up to "
                f"{cap / weight / 1e6:,.0f} MB)" if weight > 1 else "")
        raise TooLargeInMemory(display, 1, 1, (
            f"the file {what} {size / 1e6:,.0f} MB{json}; a file over {cap / 1e6:,.0f} MB of "
            "text is read only by the streamed road of BurstGPT and Azure LLM traces (this one "
            "is read whole into memory): split it into smaller files, or raise "
            "HEADROOM_MAX_IN_MEMORY_MB"))


#: Largest Parquet footer (bytes) read: a footer is the file's metadata, some KB a row group;
#: 100,000 row groups made a 355 MB footer whose parse alone took 2.9 GB (break-it review).
MAX_PARQUET_FOOTER = 16 * 1024 * 1024


def check_parquet_size(path: Source, display: str) -> int:
    """Refuse a Parquet file whose decoded columns would pass :func:`max_in_memory_bytes`,
    from its footer alone (no row is read): each leaf column's value count (a list column's
    values, not its rows) times its width, and for a string column the larger of its
    uncompressed bytes and its value count times its longest statistic (a dictionary-encoded
    1,000-character string repeated 20 M times is small on disk and 20 GB decoded). A 2 MB
    file of 150 M constant rows took the server to 6 GB in 9 s; a 43 KB file of 1,000 lists of
    1 M zeros, over 6 GB. A footer over :data:`MAX_PARQUET_FOOTER` is refused before it is
    parsed. Returns the row count.

    Raises
    ------
    FormatError
        An unreadable footer, a footer too large, or a decoded size over the limit (naming
        rows, columns and size).
    """
    import pyarrow.parquet as pq

    with raw_stream(path) as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        fh.seek(max(0, size - 8))
        tail = fh.read(8)
    footer = int.from_bytes(tail[:4], "little") if len(tail) == 8 else 0
    if footer > MAX_PARQUET_FOOTER:
        raise FormatError(display, 1, 1, f"the Parquet footer (its metadata) is "
                                         f"{footer / 1e6:,.0f} MB, over the "
                                         f"{MAX_PARQUET_FOOTER / 2**20:.0f} MiB read: write the "
                                         "file with fewer, larger row groups")
    try:
        meta = pq.ParquetFile(raw_stream(path)).metadata
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a bad footer
        raise FormatError(display, 1, 1, f"unreadable Parquet: {exc}") from exc
    rows, schema, decoded = meta.num_rows, meta.schema, meta.num_rows * 8  # the row index
    widths = {"BOOLEAN": 1, "INT32": 4, "FLOAT": 4, "INT64": 8, "DOUBLE": 8, "INT96": 12}
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for i in range(meta.num_columns):
            chunk, physical = group.column(i), schema.column(i).physical_type
            values = max(chunk.num_values, 0)
            if physical in widths:
                decoded += values * widths[physical]
                continue
            longest = 0
            stats = chunk.statistics
            if stats is not None and stats.has_min_max:
                longest = max(len(str(stats.min)), len(str(stats.max)))
            decoded += max(chunk.total_uncompressed_size, values * (longest + 4))
    check_in_memory(decoded, display, f"holds {rows:,} rows x {meta.num_columns} columns: "
                                      "decoded, about")
    return rows


def check_gzip_stream(path: Source, display: str) -> None:
    """Read a gzip file (of one or more members) to its end with zlib itself, so that every
    byte decompressed before a fault is counted (``GzipFile`` dropped its buffered bytes: a
    junk tail after 19,366 lines was reported after 17,659); raise FormatError at the line
    where it breaks off."""
    lines, member, fed = 0, zlib.decompressobj(16 + zlib.MAX_WBITS), False
    try:
        with raw_stream(path) as fh:
            pending = b""
            while block := pending or fh.read(1 << 16):
                pending, fed = b"", True
                lines += member.decompress(block).count(b"\n")
                if member.eof:  # a member ended: what follows must be another one
                    pending = member.unused_data
                    member, fed = zlib.decompressobj(16 + zlib.MAX_WBITS), False
            if fed and not member.eof:
                lines += member.flush().count(b"\n")
                raise EOFError("the stream ends inside a gzip member")
    except (*GZIP_FAULTS, zlib.error) as exc:
        raise FormatError(
            display, lines + 1, 1,
            f"gzip stream is truncated or corrupt after {lines:,} complete lines ({exc})",
        ) from exc


def open_text(path: Source) -> io.TextIOWrapper:
    """The source as text (gunzipped if needed), newlines untranslated (``newline=""``), for
    the csv module and line-by-line parsers: UTF-8 (a leading byte-order mark is kept as
    U+FEFF), or UTF-16 when it starts with a UTF-16 byte-order mark (the mark skipped)."""
    with decompressed_stream(path) as fh:
        codec = utf16_codec(fh.read(2))
    raw = decompressed_stream(path)
    if codec is not None:
        raw.read(2)
    return io.TextIOWrapper(raw, encoding=codec or "utf-8", newline="")


