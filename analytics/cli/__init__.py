"""The ``headroom`` command: argparse and JSON only; every analysis goes through
:mod:`analytics.services`.
"""

from analytics.cli.main import main

__all__ = ["main"]
