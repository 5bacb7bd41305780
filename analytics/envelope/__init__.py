"""Demand envelopes: complete time grids, point forecasts, conformal intervals and the
pipeline that joins them (conformal demand envelopes paper).
"""
