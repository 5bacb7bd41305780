"""Decisions from envelopes: admission and overbooking, the GPU mix, carbon-aware dispatch
across sites (conformal demand envelopes paper, Sec. 5-6).

Modules: ``capacity`` (admission, Learn-then-Test overbooking, GPU-hours vs peak), ``mix`` (the
integer GPU-mix MILP), ``dispatch`` (the carbon-aware dispatch LP and its baselines) and
``sites`` (dispatch sites, their series sources and the PUE model). Everything here is pure:
the service layer reads the store.
"""
