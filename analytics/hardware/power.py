"""GPU board power at a utilization: the one linear power model every analysis uses.

Owns :func:`gpu_power_w`, called by the capacity GPU mix (``analytics.decisions.mix``) and
carbon-aware dispatch (``analytics.decisions.dispatch``).
"""

from __future__ import annotations


def gpu_power_w(idle_w: float | None, tdp_w: float, utilization: float) -> float:
    """Power draw of one GPU: ``idle + (TDP - idle) * utilization``.

    The linear idle-to-TDP model of the conformal demand envelopes paper's power-aware
    scheduling (power grows linearly from the idle draw to the board power limit with
    utilization). A kind without a measured idle power uses TDP at any utilization, an upper
    bound.

    Parameters
    ----------
    idle_w : measured idle power (W), or None when no source states one
    tdp_w : board power limit (W)
    utilization : GPU utilization, 0 to 1 (dimensionless)

    Returns
    -------
    float : power (W)

    >>> gpu_power_w(100.0, 700.0, 0.5)
    400.0
    >>> gpu_power_w(None, 700.0, 0.5)
    700.0
    """
    idle = idle_w if idle_w is not None else tdp_w
    return idle + (tdp_w - idle) * utilization
