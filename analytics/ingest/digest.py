"""sha256 of file bytes: the one hashing helper of ingest.

The ledger identifies a dataset's bytes by their sha256 (a re-upload of the same bytes is a
``duplicate``), and ``headroom pull`` checks downloads against the registry's sha256. Both hash
in 1 MiB chunks, and a copy (a browser upload streamed to a temporary file, a download) is hashed
while it is written, so the bytes are not read a second time.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import BinaryIO

CHUNK_BYTES = 1 << 20


def update_from_file(hasher, path: str | Path, chunk_bytes: int = CHUNK_BYTES):
    """Feed a file's bytes into ``hasher`` (a ``hashlib`` object) in chunks; return ``hasher``.

    Raises
    ------
    OSError
        The file cannot be read.
    """
    with open(path, "rb") as fh:
        while chunk := fh.read(chunk_bytes):
            hasher.update(chunk)
    return hasher


def file_sha256(path: str | Path, chunk_bytes: int = CHUNK_BYTES) -> str:
    """sha256 of a file's bytes as 64 lowercase hex digits, read in ``chunk_bytes`` chunks.

    Raises
    ------
    OSError
        The file cannot be read.
    """
    return update_from_file(hashlib.sha256(), path, chunk_bytes).hexdigest()


def copy_hashed(src: BinaryIO, dst: BinaryIO, chunk_bytes: int = CHUNK_BYTES) -> str:
    """Copy binary stream ``src`` to ``dst`` from their current positions, hashing on the way.

    Returns the sha256 (hex) of the bytes copied, so that
    ``FileIn(path, display, sha256=copy_hashed(upload, tmp))`` spares :func:`file_sha256` a
    second read of the copy.
    """
    hasher = hashlib.sha256()
    while chunk := src.read(chunk_bytes):
        hasher.update(chunk)
        dst.write(chunk)
    return hasher.hexdigest()


def code_digest(paths, libraries=()) -> str:
    """sha256 (hex) of source files and library versions: the code version of a cached result.

    Parameters
    ----------
    paths : iterable of source file paths, hashed in the given order by name and bytes
    libraries : distribution names whose installed versions are hashed too (``?`` when one is
        not installed)

    Raises
    ------
    OSError
        A file cannot be read.
    """
    from importlib import metadata

    h = hashlib.sha256()
    for path in paths:
        path = Path(path)
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    for lib in libraries:
        try:
            h.update(f"{lib}=={metadata.version(lib)}\0".encode())
        except metadata.PackageNotFoundError:
            h.update(f"{lib}==?\0".encode())
    return h.hexdigest()
