"""The live road (issue 29): a running fleet's demand, read from the operator's Prometheus,
binned like a trace and judged bin by bin against a calibrated envelope.

* :mod:`analytics.live.source`: the Prometheus HTTP API (raw counter samples of the engines'
  own metric names, per ``model_name``), bounded in time and size.
* :mod:`analytics.live.bins`: counter samples -> the weighted-token target per bin, increases
  with counter resets handled as Prometheus' ``increase()`` does (without its extrapolation),
  gaps named, never negative.
* :mod:`analytics.live.envelope`: the envelope fitted on stored history and updated online as
  each bin closes (ACI), with the above-the-band alarm and the coverage so far.

The Prometheus URL is operator configuration (CLI flag or ``HEADROOM_PROMETHEUS_URL``), never a
page field: whoever picks it makes the server connect out.
"""

#: The environment variable that holds the operator's Prometheus address (the live road reads
#: from it; the Fleet plan page writes it into its KEDA trigger): never a page field.
PROMETHEUS_ENV = "HEADROOM_PROMETHEUS_URL"
