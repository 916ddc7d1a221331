"""StepSummary: the typed record behind ``summary.json`` for one simulated step.

:meth:`accelsim.report.result.RunResult.step_summary` builds it;
:meth:`StepSummary.to_dict` gives the ``summary.json`` record, key for key and
in the same order as schema version :data:`SCHEMA_VERSION` has always written
it (plus ``accelsim_version``, the version that wrote it, after
``schema_version``), with ints kept as ints and floats as floats.  :meth:`StepSummary.from_dict`
reads such a record back.

Three parts of ``summary.json`` are deliberately not typed here:

* the run's *settings* (``step``, ``convention``, ``assignment``,
  ``optimizer``, ``strided_dx``, ``psums``, ``fold_overlap``, ``workload_variant``, ``engine``:
  which event engine ran the step, as the driver records them) are a
  ``str -> str`` mapping, spread into the top level of the record right after
  ``array``;
* the ``training`` section, present when a technique defines step kinds, is
  the techniques' part: a dict each technique builds in its ``training`` method
  (:attr:`accelsim.report.training.TrainingResult.training`), added to the
  baseline step's record by :meth:`accelsim.report.training.TrainingResult.summary`
  and ignored by :meth:`StepSummary.from_dict`;
* ``workload_provenance``, present when the workload has ``notes`` (a SCALE-Sim
  topology's assumptions): its ``source`` and ``notes``, also ignored by
  :meth:`StepSummary.from_dict`.

Energy by component and busy cycles by unit are mappings because their keys
depend on the hardware: techniques add units (e.g. a predictor array) and
energy components (e.g. ``predictor_mac``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from accelsim.mapping.groups import ProcessorGroup
from accelsim.report.design_knobs import NAMED_DESIGN_KEYS as NAMED_DESIGN_KEYS
from accelsim.report.design_knobs import DesignKnobs as DesignKnobs
from accelsim.report.mapping_summary import MappingSummary
from accelsim.report.record_fields import checked as _check
from accelsim.report.record_fields import get_checked as _get
from accelsim.report.silicon import RECORD_KEYS as SILICON_KEYS
from accelsim.report.silicon import SiliconSummary, silicon_dict
from accelsim.report.simulated import SimulatedProcessors

# 2: ``accelsim_version``, ``git_commit`` and the numeric ``design`` knobs added; the
# DRAM model, its channels and its own parameters joined ``design`` later, and then every
# other hardware field, as keys a reader of an older record takes at their defaults
# (fifo, one channel, none); ``communication`` and ``groups`` joined later too, read as
# empty from an older record.
SCHEMA_VERSION = 2

TRAINING_KEY = "training"
PIPELINE_KEY = "pipeline"
"""A pipeline plan's section (:mod:`accelsim.report.pipeline`)."""
PROVENANCE_KEY = "workload_provenance"
VERSION_KEY = "accelsim_version"


def _float_map(data: Mapping[str, Any], key: str) -> dict[str, float]:
    values = _get(data, key, dict)
    return {k: _check(v, f"{key}.{k}", float) for k, v in values.items()}


@dataclass(frozen=True)
class MacCounts:
    """MACs of the step by phase (``aux``: a technique's extra work) and in all."""

    fwd: int
    bwd_input: int
    bwd_weight: int
    aux: int
    total: int

    def to_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MacCounts:
        return cls(
            fwd=_get(data, "fwd", int),
            bwd_input=_get(data, "bwd_input", int),
            bwd_weight=_get(data, "bwd_weight", int),
            aux=_get(data, "aux", int),
            total=_get(data, "total", int),
        )


@dataclass(frozen=True)
class DramBytes:
    """DRAM bytes read, written and both, in the whole step."""

    read: int
    write: int
    total: int

    def to_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DramBytes:
        return cls(
            read=_get(data, "read", int),
            write=_get(data, "write", int),
            total=_get(data, "total", int),
        )


@dataclass(frozen=True)
class StashSummary:
    """Activations saved for backward: how many tensors, their bytes (and how many of
    those stay on chip), and the DRAM bytes written in forward and read back in backward."""

    tensors: int
    bytes: int
    on_chip_bytes: int
    dram_write_bytes: int
    dram_read_bytes: int

    def to_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StashSummary:
        return cls(
            tensors=_get(data, "tensors", int),
            bytes=_get(data, "bytes", int),
            on_chip_bytes=_get(data, "on_chip_bytes", int),
            dram_write_bytes=_get(data, "dram_write_bytes", int),
            dram_read_bytes=_get(data, "dram_read_bytes", int),
        )


@dataclass(frozen=True)
class EnergySummary:
    """Energy in pJ: the total, by component (``static`` last) and by phase (``static`` last).

    Both breakdowns sum to ``total``.  Components are the energy model's (plus any
    a technique's extra units add); phases are the :class:`~accelsim.graph.ops.Phase`
    values.
    """

    total: float
    by_component: Mapping[str, float]
    by_phase: Mapping[str, float]

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "by_component": dict(self.by_component),
            "by_phase": dict(self.by_phase),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EnergySummary:
        return cls(
            total=_get(data, "total", float),
            by_component=_float_map(data, "by_component"),
            by_phase=_float_map(data, "by_phase"),
        )


@dataclass(frozen=True)
class WorkSummary:
    """The work of one stage of the step (what ran when) or of one owner (who caused
    it): its ops, MACs, vector ops, DRAM bytes read and written, op energy (pJ, the
    static energy aside) and each unit's busy cycles on every processor (as
    ``busy_cycles``).  A step's stages, and its owners, each add up to the step."""

    ops: int
    macs: int
    vector_ops: int
    dram_read_bytes: int
    dram_write_bytes: int
    energy_pj: float
    busy_cycles: Mapping[str, tuple[int, ...]]

    def to_dict(self) -> dict[str, Any]:
        return {
            "ops": self.ops,
            "macs": self.macs,
            "vector_ops": self.vector_ops,
            "dram_read_bytes": self.dram_read_bytes,
            "dram_write_bytes": self.dram_write_bytes,
            "energy_pj": self.energy_pj,
            "busy_cycles": {unit: list(cycles) for unit, cycles in self.busy_cycles.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WorkSummary:
        return cls(
            ops=_get(data, "ops", int),
            macs=_get(data, "macs", int),
            vector_ops=_get(data, "vector_ops", int),
            dram_read_bytes=_get(data, "dram_read_bytes", int),
            dram_write_bytes=_get(data, "dram_write_bytes", int),
            energy_pj=_get(data, "energy_pj", float),
            busy_cycles=_busy(_get(data, "busy_cycles", dict)),
        )


@dataclass(frozen=True)
class CommunicationSummary:
    """What one kind of collective moved in a step: the bytes its ops put on the links,
    the cycles they span (summed over its ops) and of those the cycles exposed, when
    none of an op's processors computes (:mod:`accelsim.report.communication`), and
    the others, overlapped with compute (written, not read back: the difference)."""

    bytes: int
    cycles: int
    exposed_cycles: int

    @property
    def overlapped_cycles(self) -> int:
        """The cycles some processor of the op computes: ``cycles - exposed_cycles``."""
        return self.cycles - self.exposed_cycles

    def to_dict(self) -> dict[str, int]:
        return {
            "bytes": self.bytes,
            "cycles": self.cycles,
            "exposed_cycles": self.exposed_cycles,
            "overlapped_cycles": self.overlapped_cycles,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CommunicationSummary:
        return cls(
            bytes=_get(data, "bytes", int),
            cycles=_get(data, "cycles", int),
            exposed_cycles=_get(data, "exposed_cycles", int),
        )


def _busy(data: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    """Busy cycles by unit, each a list of ints (one per processor)."""
    return {
        unit: tuple(_check(c, f"busy_cycles.{unit}", int) for c in _check(cs, unit, list))
        for unit, cs in data.items()
    }


def _work_map(data: Mapping[str, Any], key: str) -> dict[str, WorkSummary]:
    """``data[key]`` as work by stage or owner (empty in a record written before it)."""
    found = _check(data.get(key, {}), key, dict)
    return {
        name: WorkSummary.from_dict(_check(w, f"{key}.{name}", dict)) for name, w in found.items()
    }


@dataclass(frozen=True, kw_only=True)
class StepSummary:
    """Whole-step numbers of one simulated training step (one ``summary.json``).

    ``array`` is ``"<rows>x<cols> <dataflow>"`` and ``design`` the same set-up
    as numbers; ``settings`` are the run's settings as strings (see the module
    docstring); ``busy_cycles`` maps each unit (but the all-reduce channel) to
    its busy cycles on every processor.  ``array_stall_cycles`` is summed over
    the processors' main arrays and ``stall_fraction`` is its mean share of the
    step over the processors that run array ops, within [0, 1].
    ``accelsim_version`` and ``git_commit`` (of the source checkout, when it is
    one) say what produced the record.  ``stages`` is the step's work by the stage
    it ran in (forward, backward, update, communication), ``owners`` by who caused it
    (``core`` for the step's own work, else the technique): :class:`WorkSummary`;
    ``communication`` what each kind of collective moved: :class:`CommunicationSummary`;
    ``groups`` the processor groups and their spans on the topology
    (:mod:`accelsim.mapping.groups`); ``symmetry`` which processors were simulated
    and which inferred, when not all were (:mod:`accelsim.report.simulated`).
    """

    schema_version: int = SCHEMA_VERSION
    accelsim_version: str
    git_commit: str | None
    run: str
    workload: str
    hardware: str
    batch_size: int
    processors: int
    array: str
    design: DesignKnobs
    settings: Mapping[str, str]
    clock_mhz: float
    total_cycles: int
    seconds: float
    ops: int
    macs: MacCounts
    vector_ops: int
    utilization: float
    array_stall_cycles: int
    stall_fraction: float
    busy_cycles: Mapping[str, tuple[int, ...]]
    dram_bytes: DramBytes
    interconnect_bytes: int
    parameters: int
    stash: StashSummary
    energy_pj: EnergySummary
    stages: Mapping[str, WorkSummary] = field(default_factory=dict)
    owners: Mapping[str, WorkSummary] = field(default_factory=dict)
    communication: Mapping[str, CommunicationSummary] = field(default_factory=dict)
    groups: tuple[ProcessorGroup, ...] = ()
    symmetry: SimulatedProcessors | None = None
    silicon: SiliconSummary | None = None
    mapping: MappingSummary | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``summary.json`` record (without the techniques' ``training`` section)."""
        return {
            "schema_version": self.schema_version,
            VERSION_KEY: self.accelsim_version,
            "git_commit": self.git_commit,
            "run": self.run,
            "workload": self.workload,
            "hardware": self.hardware,
            "batch_size": self.batch_size,
            "processors": self.processors,
            "array": self.array,
            "design": self.design.to_dict(),
            **self.settings,
            "clock_mhz": self.clock_mhz,
            "total_cycles": self.total_cycles,
            "seconds": self.seconds,
            "ops": self.ops,
            "macs": self.macs.to_dict(),
            "vector_ops": self.vector_ops,
            "utilization": self.utilization,
            "array_stall_cycles": self.array_stall_cycles,
            "stall_fraction": self.stall_fraction,
            "busy_cycles": {unit: list(cycles) for unit, cycles in self.busy_cycles.items()},
            "dram_bytes": self.dram_bytes.to_dict(),
            "interconnect_bytes": self.interconnect_bytes,
            "parameters": self.parameters,
            "stash": self.stash.to_dict(),
            "energy_pj": self.energy_pj.to_dict(),
            "stages": {name: work.to_dict() for name, work in self.stages.items()},
            "owners": {name: work.to_dict() for name, work in self.owners.items()},
            "communication": {kind: c.to_dict() for kind, c in self.communication.items()},
            "groups": [group.to_dict() for group in self.groups],
            **({"symmetry": self.symmetry.to_dict()} if self.symmetry is not None else {}),
            **silicon_dict(self.silicon),
            **({"mapping": self.mapping.to_dict()} if self.mapping else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StepSummary:
        """Read a ``summary.json`` record back.

        Top-level keys that are not fields (nor ``training``, the techniques'
        section, ``pipeline``, a pipeline plan's, nor ``accelsim_version``, all
        ignored) are the settings.

        Raises:
            ValueError: for another schema version, a missing key or a value of
                the wrong type.
        """
        version = _get(data, "schema_version", int)
        if version != SCHEMA_VERSION:
            raise ValueError(f"summary: schema_version: expected {SCHEMA_VERSION} (got {version})")
        names = {f.name for f in fields(cls)}
        settings = {
            key: _get(data, key, str)
            for key in data
            if key not in names
            and key not in (TRAINING_KEY, PIPELINE_KEY, VERSION_KEY, PROVENANCE_KEY, *SILICON_KEYS)
        }
        busy = _get(data, "busy_cycles", dict)
        return cls(
            schema_version=version,
            accelsim_version=_get(data, "accelsim_version", str),
            git_commit=None if data.get("git_commit") is None else _get(data, "git_commit", str),
            run=_get(data, "run", str),
            workload=_get(data, "workload", str),
            hardware=_get(data, "hardware", str),
            batch_size=_get(data, "batch_size", int),
            processors=_get(data, "processors", int),
            array=_get(data, "array", str),
            design=DesignKnobs.from_dict(_get(data, "design", dict)),
            settings=settings,
            clock_mhz=_get(data, "clock_mhz", float),
            total_cycles=_get(data, "total_cycles", int),
            seconds=_get(data, "seconds", float),
            ops=_get(data, "ops", int),
            macs=MacCounts.from_dict(_get(data, "macs", dict)),
            vector_ops=_get(data, "vector_ops", int),
            utilization=_get(data, "utilization", float),
            array_stall_cycles=_get(data, "array_stall_cycles", int),
            stall_fraction=_get(data, "stall_fraction", float),
            busy_cycles=_busy(busy),
            dram_bytes=DramBytes.from_dict(_get(data, "dram_bytes", dict)),
            interconnect_bytes=_get(data, "interconnect_bytes", int),
            parameters=_get(data, "parameters", int),
            stash=StashSummary.from_dict(_get(data, "stash", dict)),
            energy_pj=EnergySummary.from_dict(_get(data, "energy_pj", dict)),
            stages=_work_map(data, "stages"),
            owners=_work_map(data, "owners"),
            communication={
                kind: CommunicationSummary.from_dict(_check(c, f"communication.{kind}", dict))
                for kind, c in _check(data.get("communication", {}), "communication", dict).items()
            },
            groups=tuple(
                ProcessorGroup.from_dict(_check(g, "groups[]", dict))
                for g in _check(data.get("groups", []), "groups", list)
            ),
            symmetry=SimulatedProcessors.read(data),
            silicon=SiliconSummary.read(data),
            mapping=MappingSummary.read(data.get("mapping")),
        )
