"""A run file and the files it references: ``--set`` routing and the run file's own
``overrides`` (split from :mod:`accelsim.config.loader`, which a command that reads
no run file, ``accelsim layer``, loads alone)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from accelsim.config.files import display_path
from accelsim.config.hardware import HardwareSpec
from accelsim.config.loader import CLI_SOURCE, Override, read_yaml, validate_with_origins
from accelsim.config.overrides import Origins
from accelsim.config.run import RunSpec
from accelsim.config.validate import join_path, suggest
from accelsim.errors import ConfigError, Problem
from accelsim.resources import bundled_path

SECTIONS = ("hardware", "workload", "energy")


@dataclass(frozen=True)
class RunFile:
    """A validated run file: its settings and the files it references.

    ``overrides`` holds, per referenced file (``hardware``, ``energy``,
    ``workload``), the run file's own overrides followed by the command line's;
    ``origins`` says which of the run file's settings an override wrote, so that
    every later problem with them (techniques, the run's own rules) is blamed where
    the user wrote the value.
    """

    path: Path
    run: RunSpec
    hardware_path: Path
    energy_path: Path
    workload_path: Path
    origins: Origins
    overrides: dict[str, list[Override]] = field(default_factory=dict)

    def with_sets(self, routed: Mapping[str, list[Override]]) -> RunFile:
        """This run file with the overrides :func:`route_sets` sent to each referenced
        file after its own (``routed["run"]`` is already applied)."""
        overrides = {s: [*self.overrides[s], *routed[s]] for s in SECTIONS}
        return replace(self, overrides=overrides)

    def blame(self, problems: list[Problem]) -> list[Problem]:
        """``problems`` found after loading (while simulating), each one in this run
        file blamed where its value was written: a key of a referenced file
        (``hardware.dram.capacity_gib``) on the last override that set it or a mapping
        above it (``--set dram.capacity_gib``, ``run.yaml: overrides.hardware...``),
        else on the run file as it was; a key of the run's own through :attr:`origins`."""
        blamed = []
        for problem in problems:
            head, _, rest = problem.path.partition(".")
            if problem.file != self.origins.file or head not in SECTIONS or not rest:
                blamed.extend(self.origins.blame([problem]))
                continue
            found = (o.written_at(rest) for o in reversed(self.overrides[head]))
            where = next((w for w in found if w is not None), None)
            if where is not None:
                problem = Problem(*where, problem.message, problem.value)
            blamed.append(problem)
        return blamed


def route_sets(sets: list[Override]) -> dict[str, list[Override]]:
    """Send each ``--set`` key to the run file or to one of the referenced files.

    A key may name its target explicitly (``hardware.array.rows``,
    ``run.batch_size``); a bare key goes to the run file when its first segment
    is a run-file key, else to the hardware file when it is a hardware key.
    """
    routed: dict[str, list[Override]] = {"run": [], **{s: [] for s in SECTIONS}}
    run_keys, hardware_keys = RunSpec.model_fields, HardwareSpec.model_fields
    for item in sets:
        head, _, rest = item.key.partition(".")
        head = head.split("[")[0]
        if head == "overrides":
            raise ConfigError.single(
                item.source,
                item.source_path,
                f"set the target directly, e.g. --set {rest or 'hardware.array.rows'}=...",
                item.value,
            )
        if head in ("run", *SECTIONS) and rest:
            routed[head].append(Override(rest, item.value, item.source, item.source_path))
        elif head in run_keys:
            routed["run"].append(item)
        elif head in hardware_keys:
            routed["hardware"].append(item)
        else:
            choices = sorted({*run_keys, *hardware_keys, *(f"{s}." for s in ("run", *SECTIONS))})
            raise ConfigError.single(
                item.source, item.source_path, "unknown key; " + suggest(head, choices), item.value
            )
    return routed


def load_run_file(path: Path, sets: list[Override] | None = None) -> RunFile:
    """Load and validate a run file; check that the files it references exist.

    Args:
        path: The run YAML file.
        sets: Command-line overrides (see :func:`route_sets`).

    Raises:
        ConfigError: listing every problem of the run file, including each
            referenced file that does not exist (at its ``hardware``,
            ``energy`` or ``workload`` key).
    """
    routed = route_sets(sets or [])
    path = bundled_path(path)
    return read_run_file(path, read_yaml(path), routed["run"]).with_sets(routed)


def read_run_file(path: Path, data: dict[str, Any], sets: list[Override]) -> RunFile:
    """A run file from its parsed ``data`` and the overrides routed to it, with only its
    own ``overrides`` for the files it references (see :meth:`RunFile.with_sets`).

    Raises:
        ConfigError: as :func:`load_run_file`.
    """
    name = display_path(path)
    run, origins = validate_with_origins(RunSpec, data, name, sets)
    overrides = _run_file_overrides(run, origins)
    paths = {section: _referenced(path, run, origins, section) for section in SECTIONS}
    missing = [
        Problem(name, section, "file not found", getattr(run, section))
        for section, target in paths.items()
        if not target.is_file()
    ]
    if missing:
        raise ConfigError(origins.blame(missing))
    return RunFile(
        path, run, paths["hardware"], paths["energy"], paths["workload"], origins, overrides
    )


def _referenced(path: Path, run: RunSpec, origins: Origins, section: str) -> Path:
    """The file a run's ``hardware``, ``energy`` or ``workload`` names: relative to the
    working directory when the command line set it (``--set workload=FILE``, falling
    back to the bundled ``configs/`` and ``workloads/``), else relative to the file
    that wrote it (the run file, or a sweep file that resolved it already)."""
    value: str = getattr(run, section)
    if origins.locate(section)[0] == CLI_SOURCE:
        return bundled_path(value)
    return path.parent / value


def _run_file_overrides(run: RunSpec, origins: Origins) -> dict[str, list[Override]]:
    """Split the run file's ``overrides`` by the file they target (each blamed where
    it was written: the run file, or a ``--set run.overrides...``)."""
    by_section: dict[str, list[Override]] = {s: [] for s in SECTIONS}
    for key, value in run.overrides.items():
        source, where = origins.locate(join_path("overrides", key))
        head, _, rest = key.partition(".")
        if head not in SECTIONS or not rest:
            raise ConfigError.single(
                source,
                where,
                "override keys start with " + ", ".join(f"'{s}.'" for s in SECTIONS),
                value,
            )
        by_section[head].append(Override(rest, value, source, where))
    return by_section
