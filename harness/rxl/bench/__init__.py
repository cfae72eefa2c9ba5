"""Benchmarks runnable on the build host.

``accept``: the accept-distribution rig (``rxl bench accept``), which
measures the design's Linux neighbours (EPOLLEXCLUSIVE, SO_REUSEPORT and
its CPU-steering variants) with one workload, the C server ``acceptd.c``.
"""
