"""Hardware: THE GPU catalog (:mod:`~analytics.hardware.catalog`, one record per GPU kind with a
cited source per value, plus hardware / precision name normalisation). Every other table of GPU
kinds in headroom (the capacity kinds, the serving DVFS kinds) is a view of that catalog.
"""
