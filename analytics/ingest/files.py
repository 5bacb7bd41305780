"""The one ingest path: files on disk -> formats.parse_file -> store.ingest.

Browser upload, ``headroom ingest`` and the first-run bootstrap all come through here, so a file is
checked the same way whichever door it came in by.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from analytics import store
from analytics.config import ParseOptions, safe_dataset_name
from analytics.ingest.digest import file_sha256
from analytics.ingest.formats import FormatError, Parsed, SkippedByDesign, detect, parse_file
from analytics.ingest.formats._common import file_stem
from analytics.schema import StreamRefused


@dataclass(frozen=True)
class FileIn:
    """A file to ingest: where it is on disk and the name the user knows it by.

    ``name`` is the dataset name (default: the file stem); ``sha256`` the hash of the bytes when
    the caller already has it (:func:`analytics.ingest.digest.copy_hashed` while copying an
    upload), else it is computed from the file.
    """

    path: Path
    display: str
    name: str | None = None
    sha256: str | None = None


def parse_all(files: Sequence[FileIn], fmt: str | None = None, opts: ParseOptions | None = None,
              max_bytes: int | None = None, skipped: list[dict] | None = None,
              append_to: str | None = None) -> list[store.IngestItem]:
    """Parse every file (nothing is written). Raises FormatError at the first bad one.
    ``append_to``: every item's rows go to that existing dataset
    (:mod:`analytics.store.appends`) instead of a new one.

    ``max_bytes`` rejects larger files before reading them (the upload cap). Files of one batch
    that share a base name (every node's scrape is ``metrics.prom``) get unique dataset names
    (:func:`batch_names`). A file that holds nothing by design
    (:class:`~analytics.ingest.csvcheck.SkippedByDesign`, e.g. ML.ENERGY diffusion runs) raises
    like a rejection unless ``skipped`` is a list: then its :func:`skipped_result` is appended
    there and the file is left out of the items.
    """
    kept, parsed = [], []
    for f in files:
        check_size(f, max_bytes)
        try:
            parsed.append(parse_file(f.path, f.display, fmt, opts, stream=True))
        except SkippedByDesign as exc:
            if skipped is None:
                raise
            skipped.append(skipped_result(exc))
            continue
        kept.append(f)
    items = []
    for f, p, (name, why) in zip(kept, parsed, batch_names(kept, parsed), strict=True):
        if why:
            p = dataclasses.replace(p, warnings=(why, *p.warnings))
        items.append(store.IngestItem(p, name, f.sha256 or file_sha256(f.path),
                                      append_to=append_to))
    return items


def store_items(con, items: list[store.IngestItem]) -> list[dict]:
    """:func:`analytics.store.ingest` of ``items`` (one transaction). A streamed item
    (``Parsed.stream``, a large trace read in batches inside the transaction) that meets a value
    the fast reader leaves to the checked one rolls the transaction back; that file is then read
    by the checked reader (which raises the FormatError naming line and column, or returns its
    rows) and the batch is written again. A file whose direct read (one ``INSERT ... SELECT``)
    met a row for the batch checks (``StreamRefused.batches``) is written again batch by batch.

    Raises
    ------
    FormatError, store.NameTaken, store.StoreError, ValueError : as :func:`store.ingest`;
        nothing is written
    """
    while True:
        try:
            return store.ingest(con, items)
        except StreamRefused as exc:
            if exc.batches:  # the direct read left the file to the batch checks: read again
                continue
            items = [_checked_item(it, str(exc)) if it.parsed.stream is exc.stream else it
                     for it in items]


def _checked_item(item: store.IngestItem, why: str = "") -> store.IngestItem:
    """``item`` read again by the checked reader, keeping the warnings added to it (its
    name). A file too large for that reader (which holds it whole) is refused with what
    stopped the streamed one (``why``)."""
    from analytics.ingest.csvcheck import _walk_affordable, locate_structure_error
    from analytics.ingest.rawfile import TooLargeInMemory, cut_echo

    stream = item.parsed.stream
    if not _walk_affordable(stream.path):  # the checked reader walks only smaller files' rows:
        locate_structure_error(stream.path, stream.display)  # a ragged row is named first (a
    try:                                  # 2-field row was read as an empty cell, "," dropped)
        checked = stream.checked()  # type: ignore[union-attr]
    except TooLargeInMemory as exc:
        raise FormatError(exc.file, exc.line, exc.column, (
            f"the streamed reader stopped at a row it leaves to the checked reader "
            f"({cut_echo(why, 300)}), and {exc.reason}")) from exc
    parsed = dataclasses.replace(checked, warnings=(*item.parsed.warnings, *checked.warnings))
    return dataclasses.replace(item, parsed=parsed)


def skipped_result(exc: SkippedByDesign) -> dict:
    """The ingest report entry of a file skipped by design: ``{"file", "dataset": None,
    "format", "rows": 0, "status": "skipped", "reason"}``."""
    return {"file": exc.file, "dataset": None, "format": exc.format, "rows": 0,
            "status": "skipped", "reason": exc.reason}


def in_file_order(files: Sequence[FileIn], results: list[dict]) -> list[dict]:
    """``results`` (one per file, ``file`` = its display name) in the order of ``files``."""
    order = {}
    for i, f in enumerate(files):
        order.setdefault(str(f.display), i)
    return sorted(results, key=lambda r: order.get(str(r["file"]), len(order)))


def check_size(f: FileIn, max_bytes: int | None) -> None:
    """Raise FormatError when the file is over ``max_bytes`` (None: no cap)."""
    size = Path(f.path).stat().st_size
    if max_bytes is not None and size > max_bytes:
        raise FormatError(
            f.display, 1, 1,
            f"file is {size / 1e6:.1f} MB, over the {max_bytes / 1e6:.0f} MB upload cap; "
            "ingest it with `headroom ingest` instead",
        )


def name_qualifier(parsed: Parsed) -> str | None:
    """What tells this file's rows apart from a same-named file's: the one ``host`` (DCGM
    ``Hostname``) or ``site`` its rows carry, cleaned to ``[A-Za-z0-9._-]``; None when the
    rows carry none or several."""
    for col in ("host", "site"):
        if col in parsed.frame.columns:
            values = parsed.frame[col].drop_nulls().unique()
            if values.len() == 1 and str(values[0]).strip():
                return re.sub(r"[^A-Za-z0-9._-]+", "-", str(values[0]).strip()).strip("-") or None
    return None


def batch_names(files: Sequence[FileIn], parsed: Sequence[Parsed]) -> list[tuple[str, str | None]]:
    """A unique dataset name for every file of one batch, and why it is not the file stem.

    A given ``FileIn.name`` is kept. Files whose stems are shared within the batch are named
    ``<stem>-<folder>`` when their parent folders (in the display path) tell them apart, else
    ``<stem>-<host or site>`` when their rows do (:func:`name_qualifier`), else the first keeps
    the stem and the others are numbered ``<stem>-2``, ``<stem>-3`` ...; a name an earlier
    file took is skipped the same way. E.g. ``node-a/metrics.prom`` and
    ``node-b/metrics.prom`` -> ``metrics-node-a``, ``metrics-node-b``.
    """
    stems = [f.name or safe_dataset_name(file_stem(f.display)) for f in files]
    groups: dict[str, list[int]] = {}
    for i, (f, stem) in enumerate(zip(files, stems, strict=True)):
        if not f.name:
            groups.setdefault(stem, []).append(i)
    used = {f.name for f in files if f.name}
    out: list[tuple[str, str | None]] = [(s, None) for s in stems]
    for stem, idx in groups.items():
        if len(idx) == 1:
            used.add(stem)
            continue
        tags = _distinct([safe_dataset_name(Path(files[i].display).parent.name)
                          if Path(files[i].display).parent.name else None for i in idx]) or \
            _distinct([name_qualifier(parsed[i]) for i in idx]) or [None] * len(idx)
        for i, tag in zip(idx, tags, strict=True):
            candidates = [*([f"{stem}-{tag}"] if tag else []), stem,
                          *(f"{stem}-{k}" for k in range(2, 10_000))]
            name = next(c for c in candidates if c not in used)
            used.add(name)
            out[i] = (name, f"dataset named {name!r}: {len(idx)} files of this batch are "
                            f"called {stem!r}")
    return out


def _distinct(tags: list[str | None]) -> list[str] | None:
    """``tags`` when every one is set and no two are equal, else None."""
    return tags if all(tags) and len(set(tags)) == len(tags) else None  # type: ignore[return-value]


def ingest_files(con, files: Sequence[FileIn], fmt: str | None = None,
                 opts: ParseOptions | None = None, max_bytes: int | None = None,
                 append_to: str | None = None) -> list[dict]:
    """Parse all files, then write them in one transaction (all or nothing); with
    ``append_to``, as more rows of that dataset.

    Returns the per-file results of :func:`analytics.store.ingest` (status ``ingested``,
    ``appended`` or ``duplicate``) and of the files skipped by design (:func:`skipped_result`),
    in file order.

    Raises
    ------
    FormatError : a file is not valid; nothing is written
    store.NameTaken : a dataset name is in use with other content; nothing is written
    store.UnknownDataset, store.AppendRefused : ``append_to`` names no dataset, or one that
        cannot take these rows; nothing is written
    """
    skipped: list[dict] = []
    items = parse_all(files, fmt, opts, max_bytes, skipped, append_to)
    return in_file_order(files, (store_items(con, items) if items else []) + skipped)


def recognised_files(folder: str | Path) -> list[Path]:
    """Files under ``folder`` (recursively) that some format recognises, sorted by path."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    found = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        if path.name.endswith(".part") or path.name.startswith("."):
            continue
        try:
            detect(path)
        except (FormatError, OSError):
            continue
        found.append(path)
    return found


def bootstrap(con, folder: str | Path, opts: ParseOptions | None = None,
              on_file: Callable[[int, int, str], None] | None = None) -> list[dict]:
    """Ingest every recognised file under ``folder``, one transaction per file.

    Returns one result per file: status ``"ingested"``, ``"duplicate"`` (its bytes are
    stored already), ``"skipped"`` with ``reason`` (valid, but nothing for any table by design:
    ML.ENERGY diffusion runs) or ``"rejected"`` with ``error`` (file, line, column, reason); a
    bad file does not stop the others. ``on_file(i, n, name)`` is called before each file.
    """
    files = recognised_files(folder)
    results = []
    for i, path in enumerate(files):
        if on_file:
            on_file(i, len(files), path.name)
        try:
            results.extend(ingest_files(con, [FileIn(path, path.name)], opts=opts))
        except (FormatError, store.NameTaken, store.StoreError, ValueError) as exc:
            results.append({"file": path.name, "dataset": None, "format": None, "rows": 0,
                            "status": "rejected", "error": str(exc)})
    return results


def ingest_synthetic(con, seed: int = 0, days: int = 14) -> list[dict]:
    """Generate and store the synthetic demo, one dataset per kind of input
    (:func:`analytics.ingest.demo.ingest_demo`; ``synthetic = true`` in the ledger)."""
    from analytics.ingest import demo

    return demo.ingest_demo(con, seed, days)
