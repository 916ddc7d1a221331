"""Lowering: a workload's layers -> the op graph of one replica's training step.

:func:`~accelsim.lowering.step.lower` is the entry point; each layer kind's rule
lives in :mod:`accelsim.lowering.rules`; :mod:`accelsim.lowering.optimizer` owns
the update ops.
"""
