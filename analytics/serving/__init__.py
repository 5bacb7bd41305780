"""Energy-aware serving what-ifs on shared GPUs (Festina paper).
"""
