"""Hybrid batch + inference power profiles: a discrete-event simulation of a shared GPU pool
(hybrid power paper).
"""
