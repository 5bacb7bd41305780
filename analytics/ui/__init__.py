"""Streamlit glue: caches over the services, widgets, and charts (DataFrame -> Plotly).
"""
