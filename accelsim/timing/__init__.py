"""Timing: fold-level kernels, per-op costs and the SimPy event engine."""
