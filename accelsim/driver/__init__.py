"""The driver: load a run, simulate its steps, and (``layer``) single GEMMs.

Sits on top of the layered core; ``cli.py`` and :mod:`accelsim.api` call it.
"""
