"""The configs and workloads shipped inside the package, and the CLI's fallback to them.

``accelsim/data/`` holds ``configs/`` (hardware, energy, run, suite and validation
files) and ``workloads/`` (the layer tables); a checkout's top-level ``configs`` and
``workloads`` are symlinks to them.  Run and suite files name the files they use by
paths relative to themselves (``../../workloads/mlp.yaml``), which resolve the same
way in a checkout and in an installed package.
"""

from __future__ import annotations

import os
import shutil
from importlib.resources import files
from pathlib import Path

BUNDLED_TOPS = ("configs", "workloads")


def data_dir() -> Path:
    """The bundled data directory, ``accelsim/data`` of the imported package.

    A regular or editable install puts it on disk; an import from a zip archive
    does not, and is refused rather than returning a path that cannot be opened.
    """
    root = files("accelsim") / "data"
    if not isinstance(root, Path):
        raise RuntimeError(f"accelsim's bundled data is not on disk ({root!r})")
    return root


def bundled_path(text: str | Path) -> Path:
    """``text`` as a path, or the bundled file it names when it does not exist here.

    A relative path that does not exist from the working directory and starts
    with ``configs/`` or ``workloads/`` is looked up in :func:`data_dir`, so
    ``accelsim run configs/runs/default.yaml`` works from any directory after a
    wheel install.  Anything else, and a bundled path that is not there either,
    comes back unchanged, so errors name the path as given.  Usable as an
    argparse ``type``.
    """
    path = Path(text)
    if path.is_absolute() or not path.parts or path.parts[0] not in BUNDLED_TOPS:
        return path
    if path.exists():
        return path
    candidate = data_dir() / path
    return candidate if candidate.exists() else path


def copy_bundled(directory: Path) -> None:
    """Copy the bundled ``configs/`` and ``workloads/`` into the existing ``directory``,
    side by side as in the package, so the run, sweep and suite files' relative
    references (``../../workloads/mlp.yaml``) name the copies.

    ``accelsim init`` copies into a staging directory it then moves into place
    (:func:`accelsim.report.staging.staged_entries`).  The copies are writable
    files, whatever the installed ones are.

    Raises:
        OSError: the first copy that fails (a full disk), naming its path.
    """
    root = data_dir()
    for top in BUNDLED_TOPS:
        for folder, subfolders, names in os.walk(root / top):
            subfolders[:] = sorted(name for name in subfolders if name != "__pycache__")
            copy = directory / Path(folder).relative_to(root)
            copy.mkdir()
            for name in sorted(names):
                shutil.copyfile(Path(folder, name), copy / name)
