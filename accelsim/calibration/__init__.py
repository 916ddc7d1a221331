"""Fitting a hardware file's physical parameters to measured GEMM latencies
(``accelsim calibrate``)."""
