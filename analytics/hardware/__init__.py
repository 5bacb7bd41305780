"""Hardware: one catalog of GPU kinds with a cited source per value.
"""
