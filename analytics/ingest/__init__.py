"""Ingest: input files, format detection and parsing, official public sources, the
synthetic demo. One ingest path for browser uploads, the CLI and the first-run bootstrap.
"""
