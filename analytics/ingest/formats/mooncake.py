"""Mooncake request traces (Kimi / Moonshot AI, FAST'25), JSON Lines.

Source: kvcache-ai/Mooncake ``*_trace.jsonl``, Apache-2.0. Each line is
``{"timestamp": ms since the trace start, "input_length", "output_length", "hash_ids": [...]}``.
``ts = t0 + timestamp`` (relative, see :class:`analytics.config.ParseOptions`). ``hash_ids`` are
KV-cache block hashes (prefix sharing, one per 512-token block); headroom does not store them.
``output_length`` and ``hash_ids`` are optional: a line without ``output_length`` keeps its
request with completion tokens empty (NULL, never 0) and a note naming the line; one without
``hash_ids`` is kept with a note; a ``hash_ids`` count other than ``ceil(input_length / 512)``
is noted (kept as given). No model, failure, session or latency fields exist in the trace.
"""

from __future__ import annotations

import json
import math

import polars as pl

from analytics.ingest.formats._common import (
    ROW,
    FormatError,
    Note,
    Parsed,
    check_monotone,
    check_nonnegative,
    note_rows,
    open_text,
)
from analytics.ingest.rawfile import GZIP_FAULTS

_KEYS = ("timestamp", "input_length", "output_length")
_REQUIRED = ("timestamp", "input_length")

#: Tokens per KV-cache block of a Mooncake ``hash_ids`` entry (Mooncake FAST'25 trace README:
#: "the block size is 512"), so a request of ``input_length`` tokens has
#: ``ceil(input_length / 512)`` hash ids.
BLOCK_TOKENS = 512


class Mooncake:
    """Mooncake JSON Lines request trace -> ``requests``."""

    NAME = "mooncake"
    SOURCE_COLUMNS = {"ts": "timestamp", "prompt_tokens": "input_length",
                      "completion_tokens": "output_length"}
    ASSUMES_T0 = "Mooncake timestamps are ms from the trace start (no dates)"
    TABLE = "requests"

    @staticmethod
    def detect(name: str, head: str) -> bool:
        first = head.lstrip().splitlines()[0] if head.strip() else ""
        if not first.startswith("{"):
            return False
        try:
            rec = json.loads(first)
        except ValueError:
            return all(f'"{k}"' in first for k in _KEYS)
        return isinstance(rec, dict) and all(k in rec for k in _REQUIRED) and (
            "output_length" in rec or "hash_ids" in rec)

    @staticmethod
    def parse(path, display, opts) -> Parsed:
        cols = _read(path, display)
        frame = pl.DataFrame(
            cols, schema={ROW: pl.Int64, "timestamp": pl.Float64, "input_length": pl.Int64,
                          "output_length": pl.Int64, "hash_blocks": pl.Int64},
        )
        # header_line=0: JSONL has no header, so data row i sits on line i + 1
        check_nonnegative(frame, list(_KEYS), display, header_line=0)
        t0_us = int(opts.t0.timestamp() * 1_000_000)
        frame = frame.with_columns(
            pl.from_epoch((pl.col("timestamp") * 1000).round().cast(pl.Int64) + t0_us, "us").alias("ts")
        )
        check_monotone(frame, display, opts.max_backstep_s, "timestamp", header_line=0)
        out = frame.select(
            "ts",
            pl.lit(None, pl.String).alias("model"),
            pl.col("input_length").alias("prompt_tokens"),
            pl.col("output_length").alias("completion_tokens"),
            pl.lit(False).alias("failed"),
            pl.lit(None, pl.String).alias("session_id"),
            pl.lit(None, pl.Float64).alias("latency_s"),
        )
        warnings = (
            "hash_ids (KV-cache block hashes) are not stored",
            *_notes(frame),
        )
        return Parsed("requests", Mooncake.NAME, out, display, 1e-3, warnings)


def _notes(frame: pl.DataFrame) -> list[Note]:
    """Notes for the optional keys: ``output_length`` missing (completion tokens NULL, never
    0), ``hash_ids`` missing, and ``hash_ids`` whose count is not ``ceil(input_length / 512)``."""
    expected = (pl.col("input_length") + BLOCK_TOKENS - 1) // BLOCK_TOKENS
    bad_blocks = frame.select(pl.col("hash_blocks").is_not_null()
                              & (pl.col("hash_blocks") != expected)).to_series()
    notes = [
        note_rows(frame, frame["output_length"].is_null(),
                  "no output_length: completion tokens left empty (NULL, not 0); known output "
                  f"{int(frame['output_length'].sum()):,} tokens over "
                  f"{int(frame['output_length'].is_not_null().sum()):,} rows",
                  "output_length", header_line=0),
        note_rows(frame, frame["hash_blocks"].is_null(),
                  "no hash_ids: KV-cache prefix blocks unknown (the request is kept)",
                  "hash_ids", header_line=0),
        note_rows(frame, bad_blocks,
                  f"hash_ids count differs from ceil(input_length / {BLOCK_TOKENS}) "
                  f"({BLOCK_TOKENS}-token blocks): prefix blocks inconsistent with the length "
                  "(kept as given)", "hash_ids", header_line=0),
    ]
    return [n for n in notes if n is not None]


def _read(path, display) -> dict[str, list]:
    """The records' columns (``__row``, timestamp, input_length, output_length or None,
    hash_blocks: number of hash ids or None). Raises FormatError naming line and key."""
    cols: dict[str, list] = {ROW: [], "timestamp": [], "input_length": [], "output_length": [],
                             "hash_blocks": []}
    try:
        with open_text(path) as fh:
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except ValueError as exc:
                    raise FormatError(display, lineno, exc.colno, f"invalid JSON: {exc.msg}") from exc
                if not isinstance(rec, dict):
                    raise FormatError(display, lineno, 1, "line is not a JSON object")
                for key in _KEYS:
                    _check(rec, key, display, lineno)
                hashes = rec.get("hash_ids")
                if hashes is not None and not isinstance(hashes, list):
                    raise FormatError(display, lineno, "hash_ids", f"{hashes!r} is not a list")
                cols[ROW].append(lineno - 1)
                cols["timestamp"].append(rec["timestamp"])
                cols["input_length"].append(int(rec["input_length"]))
                out = rec.get("output_length")
                cols["output_length"].append(None if out is None else int(out))
                cols["hash_blocks"].append(None if hashes is None else len(hashes))
    except GZIP_FAULTS as exc:
        raise FormatError(display, len(cols[ROW]) + 1, 1,
                          f"gzip stream is truncated or corrupt ({exc})") from exc
    except UnicodeDecodeError as exc:
        raise FormatError(display, len(cols[ROW]) + 1, 1, "bytes are not UTF-8 text") from exc
    if not cols[ROW]:
        raise FormatError(display, 1, 1, "no records")
    return cols


def _check(rec: dict, key: str, display: str, lineno: int) -> None:
    """Raise FormatError unless ``rec[key]`` is a finite, in-range number (whole for lengths);
    ``output_length`` may be absent or null."""
    if key not in rec or rec[key] is None:
        if key in _REQUIRED:
            raise FormatError(display, lineno, key, f"missing key {key!r}")
        return
    val = rec[key]
    if isinstance(val, bool) or not isinstance(val, int | float):
        raise FormatError(display, lineno, key, f"{val!r} is not a number")
    if not math.isfinite(val) or abs(val) > 10 * 365 * 86400 * 1000:
        raise FormatError(display, lineno, key, f"{val!r} is out of range")
    if key != "timestamp" and val != int(val):
        raise FormatError(display, lineno, key, f"{val!r} is not a whole number of tokens")
