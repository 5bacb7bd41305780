"""The app's ASGI entry: ``streamlit run serve.py`` (``make run``) serves ``app.py`` with
Streamlit's ``st.App`` plus headroom's own streamed-upload route
(:mod:`analytics.ui.upload_route`: large files go to disk as they arrive instead of into server
memory) and headroom's ``/metrics`` (:mod:`analytics.ui.metrics_route`: the live envelope for
Prometheus), behind :class:`analytics.ui.hostguard.HostGuard` (only the configured host names, and
no state-changing request from another origin: DNS rebinding). ``app.py`` stays the Streamlit
script (``AppTest`` runs it directly); the settings in ``.streamlit/config.toml`` apply
unchanged.
"""

from pathlib import Path

import streamlit as st
from starlette.middleware import Middleware

from analytics.ui import metrics_route
from analytics.ui.hostguard import HostGuard
from analytics.ui.startup import on_server_start
from analytics.ui.upload_route import PlainUploadCap, routes

on_server_start()  # what a killed server left, the open-file limit, the log's rate limit
app = st.App(Path(__file__).resolve().parent / "app.py",
             routes=[*routes(), *metrics_route.routes()],
             middleware=[Middleware(HostGuard), Middleware(PlainUploadCap)])
