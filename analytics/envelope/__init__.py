"""Demand envelopes: complete time grids, point forecasts, conformal intervals and the
pipeline that joins them (conformal demand envelopes paper).

Modules: ``grid`` (store -> complete demand grid, chronological split; reads the store),
``forecast`` (features, point models, WAPE/MAE/RMSE, block bootstrap), ``intervals`` (the
interval-method protocol: ``IntervalData`` -> ``Intervals``), ``conformal_methods`` (direct
quantiles, split conformal, CQR), ``online`` (rolling conformal and ACI loop), ``mondrian``
(regime-conditioned conformal), ``registry`` (name -> method), ``metrics`` (coverage, width,
interval score, rolling coverage, shift alarm) and ``pipeline`` (``run_envelope``,
``cold_start``).
"""
