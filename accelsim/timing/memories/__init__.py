"""The DRAM models, one module each, and their registry (:mod:`.registry`).

What a model must provide is said once, in :mod:`accelsim.timing.memory`; the
compiled engine's dispatch to the models' kernels is :mod:`.compiled`.
"""
