"""Optimizer fusion (Jiang et al., 2021): a plug-in in
:mod:`accelsim.techniques.fusion.technique`."""
