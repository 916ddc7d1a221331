"""The console's block of a processor's memory by class (``summary.json``'s ``memory``)."""

from __future__ import annotations

from accelsim.mapping.memory import MemoryBreakdown, unit_of


def memory_block(memory: MemoryBreakdown) -> str:
    """``memory`` as lines: the total beside the capacity (GiB) and whether it fits,
    the stage it is of under a pipeline, its ZeRO stage, then each class and its
    share, in the unit of the total (GiB, MiB, KiB, bytes)."""
    unit, size = unit_of(memory.total_bytes)
    total = memory.total_bytes or 1
    width = max(map(len, memory.bytes_by_class))
    shared = f" shared by {memory.sharing}" if memory.sharing > 1 else ""
    lines = [
        f"memory          {memory.total_bytes / size:,.3f} {unit} per processor, of"
        f" {memory.capacity_bytes / 2**30:,.3f} GiB{shared}: "
        + ("fits" if memory.fits else "DOES NOT FIT")
    ]
    if memory.zero:
        lines.append(
            f"  ZeRO stage {memory.zero}, sharded over {memory.data} data-parallel processors"
        )
    if memory.stage is not None:
        lines.append(f"  pipeline stage {memory.stage} of {len(memory.stages)}, the most loaded")
    lines += [
        f"  {name.ljust(width)}  {b / size:,.3f} {unit}  ({100 * b / total:.1f} %)"
        for name, b in memory.bytes_by_class.items()
    ]
    return "\n".join(lines)
