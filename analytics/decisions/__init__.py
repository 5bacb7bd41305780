"""Decisions from envelopes: admission and overbooking, the GPU mix, carbon-aware dispatch
across sites (conformal demand envelopes paper, Sec. 5-6).
"""
