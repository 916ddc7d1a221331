"""The sends of a graph's ops as arrays for the compiled engine
(:class:`SendTable`), made once per graph object and network.

Each op's steps (:func:`accelsim.timing.sends.lowered`) are numbered by the step
objects they are, in the order they first appear: a step repeated, as a ring's
are, is stored once.  The step numbers of an op are worked out once per distinct
lowering (the ops of one kind, group and size share it) as an array, so Python
visits each distinct step and its sends once, and an op's steps (``2(n - 1)`` of a
ring all-reduce over ``n`` processors) are laid out in NumPy.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from accelsim.graph.memo import per_graph
from accelsim.graph.ops import CommOp, OpGraph, TransferOp
from accelsim.timing.machine import Machine
from accelsim.timing.sends import (
    Item,
    NetStep,
    SendTable,
    alike,
    distinct_steps,
    lowered,
    lowering_key,
    pipelined,
)


def send_table(graph: OpGraph, machine: Machine) -> SendTable:
    """The :class:`SendTable` of ``graph`` on ``machine``, made once per graph object
    and network (a sweep's points that change neither share it)."""
    key = ("send table", lowering_key(machine), machine.represented)
    return per_graph(graph, key, lambda: _table(graph, machine))


def _table(graph: OpGraph, machine: Machine) -> SendTable:
    steps = _Steps()
    counts = np.zeros(len(graph.ops), np.int64)
    parts: list[np.ndarray] = []
    items = _ItemColumns(len(graph.ops))
    at = 0  # the op's first step in the table's steps
    for i, op in enumerate(graph.ops):
        if not isinstance(op, (CommOp, TransferOp)):
            continue
        if isinstance(op, CommOp):
            items.add(i, at, pipelined(machine, op))
        ran = lowered(machine, op)
        parts.append(steps.numbers(ran))
        counts[i] = len(ran)
        at += len(ran)
    op_ptr = np.zeros(len(graph.ops) + 1, np.int64)
    np.cumsum(counts, out=op_ptr[1:])
    kept = steps.kept
    sends = [s for step in kept for s in step]
    step_ptr = np.zeros(len(kept) + 1, np.int64)
    np.cumsum([len(step) for step in kept], out=step_ptr[1:])
    return SendTable(
        op_ptr=op_ptr,
        steps=np.concatenate(parts) if parts else np.zeros(0, np.int64),
        step_ptr=step_ptr,
        link=np.asarray([s.link for s in sends], np.int64),
        bytes=np.asarray([s.bytes for s in sends], np.int64),
        latency=np.asarray([s.latency_cycles for s in sends], np.int64),
        **items.arrays(),
        **_class_columns(kept, [link.read_bytes_per_cycle for link in machine.links]),
    )


class _Steps:
    """The distinct steps of a graph's ops, numbered in the order they first appear
    (``kept``), and each distinct lowering's step numbers."""

    def __init__(self) -> None:
        self.kept: list[NetStep] = []
        self.number: dict[int, int] = {}  # by the id of a step in kept
        # Each lowering numbered, by its id, kept alive while the ids are in use.
        self.made: dict[int, tuple[tuple[NetStep, ...], np.ndarray]] = {}

    def numbers(self, ran: tuple[NetStep, ...]) -> np.ndarray:
        """The numbers of the steps ``ran``, those not seen before numbered next."""
        made = self.made.get(id(ran))
        if made is not None:
            return made[1]
        distinct = distinct_steps(ran)
        for i, step in distinct.items():
            if i not in self.number:
                self.number[i] = len(self.kept)
                self.kept.append(step)
        number = np.fromiter((self.number[i] for i in distinct), np.int64, len(distinct))
        if len(distinct) == 1:  # one step repeated
            out = np.full(len(ran), number[0], np.int64)
        else:
            ids = np.fromiter(map(id, ran), np.int64, len(ran))
            known = np.fromiter(distinct, np.int64, len(distinct))
            order = np.argsort(known)
            out = number[order][np.searchsorted(known[order], ids)]
        self.made[id(ran)] = (ran, out)
        return out


def _class_columns(steps: list[NetStep], bandwidth: list[float]) -> dict[str, np.ndarray]:
    """The :class:`SendTable`'s link class columns of ``steps`` on links of
    ``bandwidth``."""
    classes: dict[frozenset[int], int] = {}
    step_class = []
    for step in steps:
        same = alike(step, bandwidth)
        step_class.append(-1 if same is None else classes.setdefault(same.links, len(classes)))
    of_link: list[list[int]] = [[] for _ in bandwidth]
    for links, c in classes.items():
        for k in sorted(links):
            of_link[k].append(c)
    overlaps: list[set[int]] = [set() for _ in classes]
    for on in of_link:
        for c in on:
            overlaps[c].update(h for h in on if h != c)
    class_ptr, rows = _csr([*of_link, *(sorted(near) for near in overlaps)])
    return {"step_class": np.asarray(step_class, np.int64), "class_ptr": class_ptr, "classes": rows}


def _csr(rows: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Row pointers into the entries of ``rows``, and the entries, row after row."""
    ptr = np.zeros(len(rows) + 1, np.int64)
    np.cumsum([len(row) for row in rows], out=ptr[1:])
    return ptr, np.asarray([j for row in rows for j in row], np.int64)


class _ItemColumns:
    """The :class:`SendTable`'s item columns, an op's items at a time."""

    def __init__(self, n_ops: int) -> None:
        self.count = np.zeros(n_ops, np.int64)
        self.columns: list[tuple[int, int, int, int]] = []  # op, first, count, waits
        self.successors: list[tuple[int, ...]] = []

    def add(self, op: int, at: int, items: tuple[Item, ...]) -> None:
        """Op ``op``'s ``items``, its steps starting at ``at`` in the table."""
        base = len(self.columns)
        self.count[op] = len(items)
        for item in items:
            self.columns.append((op, at + item.first, item.count, item.waits))
            self.successors.append(tuple(base + j for j in item.successors))

    def arrays(self) -> dict[str, np.ndarray]:
        item_ptr = np.zeros(len(self.count) + 1, np.int64)
        np.cumsum(self.count, out=item_ptr[1:])
        op, first, count, waits = np.asarray(self.columns, np.int64).reshape(-1, 4).T
        succ_ptr, succ = _csr(self.successors)
        return {
            "item_ptr": item_ptr,
            "item_op": np.ascontiguousarray(op),
            "item_first": np.ascontiguousarray(first),
            "item_count": np.ascontiguousarray(count),
            "item_waits": np.ascontiguousarray(waits),
            "item_succ_ptr": succ_ptr,
            "item_succ": succ,
        }
