"""Convergence-aware gradient skipping (Oh et al., DAC 2020): a plug-in in
:mod:`accelsim.techniques.skipping.technique`."""
