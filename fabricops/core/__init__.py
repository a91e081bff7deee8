"""The shared kernel: names, metric catalogue, topology, settings and records.

Nothing here imports another fabricops package.
"""
