"""Activation recomputation (gradient checkpointing: Chen et al. 2016; Korthikanti et al.
2023): a plug-in in :mod:`accelsim.techniques.recomputation.technique`."""
