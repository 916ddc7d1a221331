"""Mapping: GEMM ops onto systolic arrays, and ops onto processors."""
