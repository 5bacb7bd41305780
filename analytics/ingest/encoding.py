"""Text encodings of input files: UTF-16 exports decoded to UTF-8 once, before any format reads.

Excel's "Unicode text" export and PowerShell 5 redirection (``>``) write UTF-16 with a
byte-order mark (``FF FE`` little-endian, ``FE FF`` big-endian) and CRLF line ends; Excel's
"Unicode text" is also TAB-separated. Every format reads UTF-8 (polars' CSV reader reads nothing
else), so :func:`utf8_path` transcodes such a file once, streaming in 1 MiB chunks (memory stays
bounded), to a UTF-8 temporary file; a TAB-separated one is rewritten as comma-separated CSV
(cells quoted where needed, so a comma inside a cell stays in its cell). Line numbers are kept:
one output line per input line. A UTF-8 file (with or without its ``EF BB BF`` mark) is
returned as it is; gzip-compressed UTF-16 is decompressed and decoded in the same pass.
UTF-16 without a byte-order mark cannot be told apart reliably: it is refused with
"UTF-16 text: re-save as CSV UTF-8".
"""

from __future__ import annotations

import codecs
import csv
import io
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from analytics import tempfiles

#: Byte-order marks of UTF-16 and the codec that reads past them.
UTF16_BOMS = ((codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))

#: Message of a UTF-16 file that cannot be decoded.
RESAVE = "UTF-16 text: re-save as CSV UTF-8"


def _decompressed(source) -> io.BufferedIOBase:
    raw = io.BytesIO(source) if isinstance(source, bytes) else open(source, "rb")  # noqa: SIM115
    magic = raw.read(2)
    raw.seek(0)
    if magic != b"\x1f\x8b":
        return raw
    from analytics.ingest.rawfile import gzip_reader  # it imports this module

    return gzip_reader(raw)


def utf16_codec(start: bytes) -> str | None:
    """The codec of a UTF-16 text whose first (decompressed) bytes are ``start``, from its
    byte-order mark, or None when it has none.

    >>> utf16_codec(b"\\xff\\xfeT\\x00"), utf16_codec(b"\\xfe\\xff\\x00T"), utf16_codec(b"T")
    ('utf-16-le', 'utf-16-be', None)
    """
    for bom, codec in UTF16_BOMS:
        if start.startswith(bom):
            return codec
    return None


def looks_utf16_without_bom(raw: bytes) -> bool:
    """Whether ``raw`` reads as ASCII text in UTF-16 without a byte-order mark: one of the two
    byte lanes is (almost) all NUL and the other holds printable text."""
    sample = raw[:4096]
    if len(sample) < 8:
        return False
    for zeros, text in ((sample[1::2], sample[0::2]), (sample[0::2], sample[1::2])):
        if zeros.count(0) >= 0.9 * len(zeros) and text.count(0) <= 0.1 * len(text):
            return True
    return False


def decode_head(raw: bytes, codec: str) -> str:
    """The head bytes of a UTF-16 file (mark included) as text, a cut last character dropped,
    TAB-separated rows shown comma-separated as :func:`utf8_path` will write them."""
    body = raw[2:]
    body = body[: len(body) - len(body) % 2]
    text = body.decode(codec, errors="ignore")
    lines = text.splitlines(keepends=True)
    if lines and _is_tab_separated(lines[0]):
        return "".join(_tab_to_csv(lines))
    return text


def _is_tab_separated(first_line: str) -> bool:
    return "\t" in first_line and "," not in first_line


def _tab_to_csv(lines) -> Iterator[str]:
    """TAB-separated lines as comma-separated CSV lines ("\\n" line ends)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for row in csv.reader(lines, delimiter="\t"):
        writer.writerow(row)
        yield out.getvalue()
        out.seek(0)
        out.truncate()


@contextmanager
def utf8_path(path: str | Path, display: str) -> Iterator[tuple[Path, str | None]]:
    """The file as UTF-8 text on disk: ``(path, None)`` for a file that already is, or
    ``(temporary UTF-8 copy, note)`` for UTF-16 with a byte-order mark, the note saying what
    was done (for ``Parsed.warnings``). The copy is deleted on exit.

    Raises
    ------
    FormatError
        ``"UTF-16 text: re-save as CSV UTF-8"`` with the line where decoding failed (an odd
        byte count or an unpaired surrogate).
    """
    from analytics.ingest.csvcheck import FormatError

    path = Path(path)
    with _decompressed(path) as fh:
        first = fh.read(3)
        codec = utf16_codec(first[:2])
    if codec is None and first == b"\xef\xbb\xbf":  # a UTF-8 byte-order mark: read without it
        with _without_utf8_bom(path) as plain:
            yield plain, None
        return
    if codec is None:
        yield path, None
        return
    fd, tmp = tempfiles.mkstemp("headroom-utf8", suffix=".csv")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as out, _decompressed(path) as raw:
            raw.read(2)  # the byte-order mark
            text = io.TextIOWrapper(raw, encoding=codec, newline="")
            lineno = 0
            try:
                first = text.readline()
                tabs = _is_tab_separated(first)
                lines = _chain(first, text)
                for line in _tab_to_csv(lines) if tabs else lines:
                    out.write(line)
                    lineno += 1
            except UnicodeDecodeError as exc:
                raise FormatError(display, lineno + 1, 1, f"{RESAVE} ({codec} does not decode: "
                                                          f"{exc.reason})") from exc
            except csv.Error as exc:
                raise FormatError(display, lineno + 1, 1, f"malformed TAB-separated text: "
                                                          f"{exc}") from exc
        note = (f"{codec.upper()} text (byte-order mark) decoded to UTF-8"
                + ("; TAB-separated cells read as columns" if tabs else ""))
        yield Path(tmp), note
    finally:
        Path(tmp).unlink(missing_ok=True)


@contextmanager
def _without_utf8_bom(path: Path) -> Iterator[Path]:
    """A temporary copy of the (decompressed) file without its leading UTF-8 byte-order mark,
    streamed in 1 MiB chunks (Excel's "CSV UTF-8" and some JSON writers add one; the JSON,
    Prometheus and header-matching readers would otherwise see U+FEFF in the first name)."""
    fd, tmp = tempfiles.mkstemp("headroom-nobom", suffix=".txt")
    try:
        with os.fdopen(fd, "wb") as out, _decompressed(path) as raw:
            raw.read(3)
            while chunk := raw.read(1 << 20):
                out.write(chunk)
        yield Path(tmp)
    finally:
        Path(tmp).unlink(missing_ok=True)


def _chain(first: str, rest) -> Iterator[str]:
    yield first
    yield from rest


def source_codec(source) -> str | None:
    """The UTF-16 codec of a path or bytes source (gzip-compressed or not), from its
    byte-order mark; None for anything else."""
    with _decompressed(source) as fh:
        return utf16_codec(fh.read(2))


def utf8_bytes(data: bytes, display: str) -> bytes:
    """UTF-16 bytes (with a byte-order mark, gzip-compressed or not) as UTF-8 CSV bytes, TAB-
    separated rows made comma-separated, as :func:`utf8_path` does for files (for sources
    already held in memory, e.g. an uploaded profile CSV). Raises FormatError as it does."""
    from analytics.ingest.csvcheck import FormatError

    codec = source_codec(data)
    if codec is None:
        return data
    with _decompressed(data) as fh:
        raw = fh.read()
    try:
        text = raw[2:].decode(codec)
    except UnicodeDecodeError as exc:
        line = raw[2:exc.start + 2].decode(codec, errors="ignore").count("\n") + 1
        raise FormatError(display, line, 1, f"{RESAVE} ({codec} does not decode: "
                                            f"{exc.reason})") from exc
    lines = text.splitlines(keepends=True)
    if lines and _is_tab_separated(lines[0]):
        text = "".join(_tab_to_csv(lines))
    return text.encode("utf-8")
