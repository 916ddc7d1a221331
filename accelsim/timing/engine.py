"""SimPy event engine: runs an op DAG on N processors and their DRAM.

Each processor has a systolic array, a vector unit and any extra array units
a technique adds; each unit runs one op at a time, always the ready op of the
smallest rank (:mod:`accelsim.timing.ready`: the graph's own priority, then the
longest path still ahead), and the first ops and an op's successors are started in
rank order, so the op ids never change the events.  DRAM is
each processor's memory of the machine, fresh for each simulation
(:meth:`~accelsim.timing.machine.Machine.memories`: one shared by every processor
with ``dram.sharing: shared``, one per processor with ``per_processor``; a
:class:`~accelsim.timing.memory.MemoryState` running its model's kernel), which
books each transfer when it is requested and says
when it arrives (:mod:`accelsim.timing.channel`); an op's traffic goes to its
own processor's memory, and a collective reads and writes each participant's
buffers on that participant's memory (its kind's bytes:
:func:`~accelsim.timing.sends.dram_of`).  The network's directed links
(:attr:`~accelsim.timing.machine.Machine.links`) are first-come-first-served channels
booked the same way, by the sends each collective and point-to-point
transfer is lowered to (:mod:`accelsim.timing.sends`: its algorithm's schedule, step
by step, each transfer on every link of its route).  A step is one event for all its
transfers: each link of each transfer's route is reserved for its bytes (after
whatever that link already carries, so contention between collectives and with
transfers is kept), and the step ends when the last transfer arrives, the route's
latencies after its last link is done; so are a collective's DRAM read and write
phases, around its steps (a pipelined collective's chunks run as items, each step
an event and a join, the write phase after the last item).  Events therefore grow
with the steps, not the links; and a step whose sends are all alike is booked once
for all its links while they are all free by the same cycle
(:mod:`accelsim.timing.links`), so neither does its work.

An op first spends its fixed cost (``timing.op_overhead_cycles``: launch,
synchronisation) and is then simulated as ``chunks`` tile groups of the rest of its
compute: the first tile of each input (the prologue) must arrive before compute
starts; while group ``j`` computes, group ``j+1`` is fetched (double buffering)
and group ``j``'s outputs drain to DRAM behind it; the last output tile (the
epilogue) drains after compute.
The array stalls when a fetch is late.  Events happen per tile group and per
transfer, never per cycle, and contention between processors and units comes
out of the channels they share.

This engine is the readable reference; :mod:`accelsim.timing.compiled` runs
the same events in the same order, compiled with Numba.
"""

from __future__ import annotations

from collections.abc import Generator

import numpy as np
import simpy

from accelsim.errors import MAX_COUNT, LimitError, SimulationError
from accelsim.graph.ops import CommOp, OpGraph, TransferOp
from accelsim.timing.channel import reserve_all, transfer
from accelsim.timing.costs import UNIT_COMM, OpCosts
from accelsim.timing.links import Links
from accelsim.timing.machine import Machine
from accelsim.timing.memory import Stream
from accelsim.timing.ready import ready_rank
from accelsim.timing.sends import Item, NetStep, dram_of, lowered, pipelined
from accelsim.timing.streams import STREAMS, WRITE_STREAMS, Streams, op_streams
from accelsim.timing.trace import LIMIT_MESSAGE, Trace, build_trace

Process = Generator[simpy.Event, object, None]


class _Engine:
    def __init__(
        self,
        graph: OpGraph,
        costs: OpCosts,
        machine: Machine,
        streams: Streams | None,
        rank: np.ndarray | None,
    ) -> None:
        self.graph = graph
        self.machine = machine
        self.env = simpy.Environment()
        # Each processor's DRAM memory (the same object for all when shared); the links.
        self.dram = machine.memories()
        self.links = Links([link.read_bytes_per_cycle for link in machine.links])
        self.costs = costs
        # Plain lists: indexing them per event is cheaper than indexing arrays.
        self.unit = costs.unit.tolist()
        self.chunks = costs.chunks.tolist()
        self.compute = costs.compute_cycles.tolist()
        self.overhead = costs.overhead_cycles.tolist()
        self.reads = costs.dram_read_bytes.tolist()
        self.writes = costs.dram_ofmap_write_bytes.tolist()
        self.prologue = costs.prologue_bytes.tolist()
        self.epilogue = costs.epilogue_bytes.tolist()
        ranks = rank if rank is not None else ready_rank(graph, costs, machine)
        self.priority = ranks.tolist()
        self.by_rank = np.argsort(ranks).tolist()
        # The stream of each op's DRAM reads and writes.
        read_classes, write_classes = streams if streams is not None else op_streams(graph, costs)
        self.read_stream: list[Stream] = [STREAMS[c] for c in read_classes.tolist()]
        self.write_stream: list[Stream] = [WRITE_STREAMS[c] for c in write_classes.tolist()]
        n_ops = len(graph.ops)
        self.start = [-1] * n_ops
        self.end = [-1] * n_ops
        self.waiting = [len(op.deps) for op in graph.ops]
        self.successors: list[list[int]] = [[] for _ in range(n_ops)]
        for i in self.by_rank:
            for d in graph.ops[i].deps:
                self.successors[d].append(i)
        units = [u for u in range(len(costs.unit_names)) if u != UNIT_COMM]
        self.queues = {
            (p, u): simpy.PriorityStore(self.env) for p in range(machine.processors) for u in units
        }

    def run(self) -> Trace:
        for (_p, _u), queue in self.queues.items():
            self.env.process(self._unit_proc(queue))
        for i in self.by_rank:
            if not self.graph.ops[i].deps:
                self._dispatch(i)
        events = 0
        step = self.env.step
        try:
            while True:
                step()
                events += 1
        except simpy.core.EmptySchedule:
            pass
        start = np.array(self.start, np.int64)
        end = np.array(self.end, np.int64)
        if (end < 0).any():
            stuck = [self.graph.ops[i].name for i in np.flatnonzero(end < 0)[:3]]
            raise SimulationError(f"ops never ran (dependency cycle?): {', '.join(stuck)}")
        return build_trace(
            self.graph, self.costs, self.machine.processors, start, end, events, "simpy"
        )

    def _dispatch(self, i: int) -> None:
        op = self.graph.ops[i]
        if isinstance(op, TransferOp):
            self.env.process(self._transfer_proc(op))
        elif isinstance(op, CommOp):
            self.env.process(self._comm_proc(op))
        else:
            key = (self.graph.processor[i], self.unit[i])
            self.queues[key].put(simpy.PriorityItem((self.priority[i], i), i))

    def _finish(self, i: int) -> None:
        if self.env.now > MAX_COUNT:
            raise LimitError(LIMIT_MESSAGE)
        self.end[i] = int(self.env.now)
        for s in self.successors[i]:
            self.waiting[s] -= 1
            if self.waiting[s] == 0:
                self._dispatch(s)

    def _unit_proc(self, queue: simpy.PriorityStore) -> Process:
        while True:
            item = yield queue.get()
            assert isinstance(item, simpy.PriorityItem)
            yield from self._op_proc(item.item)

    def _op_proc(self, i: int) -> Process:
        env, dram = self.env, self.dram[self.graph.processor[i]]
        reads_stream, writes_stream = self.read_stream[i], self.write_stream[i]
        self.start[i] = int(env.now)
        overhead = self.overhead[i]
        chunks, compute = self.chunks[i], self.compute[i] - overhead
        reads, writes = self.reads[i], self.writes[i]
        prologue = reads if chunks == 1 else min(reads, self.prologue[i])
        epilogue = min(writes, self.epilogue[i])
        rest, behind = reads - prologue, writes - epilogue
        if overhead:
            yield env.timeout(overhead)
        if prologue:
            yield transfer(env, dram, prologue, reads_stream)
        # Near-equal integer parts: group j gets q, plus 1 while j < r, of (q, r) = divmod.
        compute_q, compute_r = divmod(compute, chunks)
        fetch_q, fetch_r = divmod(rest, chunks - 1) if chunks > 1 else (0, 0)
        drain_q, drain_r = divmod(behind, chunks)
        drains = []
        book, timeout = transfer, env.timeout  # looked up once, not per tile group
        for j in range(chunks):
            fetch_bytes = fetch_q + (j < fetch_r) if j + 1 < chunks else 0
            fetch = book(env, dram, fetch_bytes, reads_stream) if fetch_bytes else None
            yield timeout(compute_q + (j < compute_r))
            drain_bytes = drain_q + (j < drain_r)
            if drain_bytes:
                drains.append(book(env, dram, drain_bytes, writes_stream))
            if fetch is not None:
                yield fetch
        if epilogue:
            drains.append(transfer(env, dram, epilogue, writes_stream))
        if drains:
            yield env.all_of(drains)
        self._finish(i)

    def _send(self, step: NetStep) -> int:
        """Book the sends of ``step`` on their links now, each after what its link
        already carries; the last arrival (now if it sends nothing)."""
        return self.links.book(step, int(self.env.now))

    def _transfer_proc(self, op: TransferOp) -> Process:
        self.start[op.op_id] = int(self.env.now)
        (step,) = lowered(self.machine, op)
        yield self.env.timeout(self._send(step) - int(self.env.now))
        self._finish(op.op_id)

    def _join(self, arrival: int) -> Process:
        """Wait until ``arrival``, the last arrival of a phase's transfers, then join.

        The join is a zero-delay event at that cycle, as SimPy's ``all_of`` over
        one event per participant would schedule, so the order of what follows
        is that of the per-participant formulation.
        """
        yield self.env.timeout(arrival - int(self.env.now))
        yield self.env.timeout(0)

    def _comm_proc(self, op: CommOp) -> Process:
        i = op.op_id
        self.start[i] = int(self.env.now)
        drams = [self.dram[p] for p in op.participants]
        reads, writes = zip(*dram_of(op), strict=True)
        yield from self._join(reserve_all(int(self.env.now), drams, reads, self.read_stream[i]))
        steps, items = lowered(self.machine, op), pipelined(self.machine, op)
        if items:
            done = self.env.event()
            _Pipeline(self, steps, items, done).start()
            yield done
        else:
            for step in steps:
                yield from self._join(self._send(step))
        yield from self._join(reserve_all(int(self.env.now), drams, writes, self.write_stream[i]))
        self._finish(i)


class _Pipeline:
    """A pipelined collective's items (:func:`~accelsim.timing.sends.pipelined`) run
    by callbacks, each step an event at its last arrival and a join at that cycle
    (as a step of any collective); ``done`` succeeds when the last item is done."""

    def __init__(
        self,
        engine: _Engine,
        steps: tuple[NetStep, ...],
        items: tuple[Item, ...],
        done: simpy.Event,
    ) -> None:
        self.engine, self.steps, self.items, self.done = engine, steps, items, done
        self.waits = [item.waits for item in items]
        self.left = len(items)

    def start(self) -> None:
        for k, item in enumerate(self.items):
            if not item.waits:
                self._send(k, 0)

    def _send(self, k: int, step: int) -> None:
        env = self.engine.env
        arrival = self.engine._send(self.steps[self.items[k].first + step])
        arrived = env.timeout(arrival - int(env.now))
        arrived.callbacks.append(lambda _: self._arrived(k, step))

    def _arrived(self, k: int, step: int) -> None:
        self.engine.env.timeout(0).callbacks.append(lambda _: self._joined(k, step))

    def _joined(self, k: int, step: int) -> None:
        item = self.items[k]
        if step + 1 < item.count:
            self._send(k, step + 1)
            return
        self.left -= 1
        for j in item.successors:
            self.waits[j] -= 1
            if not self.waits[j]:
                self._send(j, 0)
        if not self.left:
            self.done.succeed()


def simulate(
    graph: OpGraph,
    costs: OpCosts,
    machine: Machine,
    streams: Streams | None = None,
    rank: np.ndarray | None = None,
) -> Trace:
    """Run ``graph`` with ``costs`` on ``machine`` and return the :class:`Trace`; its ops'
    transfers are of ``streams`` (by default :func:`~accelsim.timing.streams.op_streams`';
    a collective's, its read and write stream classes), ready ops taken by ``rank``
    (by default :func:`~accelsim.timing.ready.ready_rank`).

    Raises:
        SimulationError: if some op can never run.
        LimitError: if the step takes more than :data:`~accelsim.errors.MAX_COUNT` cycles.
    """
    return _Engine(graph, costs, machine, streams, rank).run()
