"""``python -m analytics.cli``: the same as the ``headroom`` console script."""

from analytics.cli import entry

entry()
