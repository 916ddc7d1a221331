"""The mapper's settings (``mapping.search``, ``mapping.objective``), without pydantic:
what :mod:`accelsim.timing.mapper` searches and what it minimises."""

from __future__ import annotations

from enum import Enum


class MappingSearch(str, Enum):
    """Whether each GEMM's mapping is searched.

    ``none``: every GEMM as the mapping section fixes it (``array.dataflow``, the
    orientation ``mapping.orientation`` picks, the stream blocking); ``per_layer``:
    each GEMM of each layer takes the cheapest of the mappings the hardware offers
    (every dataflow of ``array.dataflows``, the orientations ``mapping.orientation``
    allows, both stream blockings unless ``mapping.stream_blocking`` names one, and
    for a grouped convolution's GEMMs the vector unit).
    """

    NONE = "none"
    PER_LAYER = "per_layer"


class MappingObjective(str, Enum):
    """What the mapper minimises per GEMM: its lone-op time, its dynamic energy, or
    their product (energy-delay)."""

    TIME = "time"
    ENERGY = "energy"
    EDP = "edp"
