"""Ingest: input files, format detection and parsing, official public sources, the
synthetic demo. One ingest path for browser uploads, the CLI and the first-run bootstrap.

Modules: :mod:`~analytics.ingest.files` (the one path: files -> parse -> store, bootstrap,
synthetic demo), :mod:`~analytics.ingest.formats` (one class per input format, registry in
``FORMATS``), :mod:`~analytics.ingest.csvcheck` (the CSV validator: ``FormatError`` with file,
line and column), :mod:`~analytics.ingest.digest` (sha256 of file bytes, hashed while copying),
:mod:`~analytics.ingest.sources` (registry of public datasets and ``headroom pull``). Canonical
table schemas and ``conform`` live in :mod:`analytics.schema`.
"""
