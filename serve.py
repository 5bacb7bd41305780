"""The app's ASGI entry: ``streamlit run serve.py`` (``make run``) serves ``app.py`` with
Streamlit's ``st.App`` plus headroom's own streamed-upload route
(:mod:`analytics.ui.upload_route`: large files go to disk as they arrive instead of into server
memory). ``app.py`` stays the Streamlit script (``AppTest`` runs it directly); the settings in
``.streamlit/config.toml`` apply unchanged.
"""

from pathlib import Path

import streamlit as st

from analytics.ui.upload_route import routes

app = st.App(Path(__file__).resolve().parent / "app.py", routes=routes())
