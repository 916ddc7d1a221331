"""Command line of the plan search: ``accelsim plan`` (part of :mod:`accelsim.cli`).

Enumerates the parallel plans of a workload on ``--chips`` processors, refuses those
the run's checks or their memory refuse (:mod:`accelsim.planner.search`), simulates
the rest as the points of a resumable sweep store, and prints the fastest with its
breakdown (``--json``: as one object), beside a Pareto figure of step time against
memory per chip.  ``--plan`` evaluates one plan instead.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelsim import cli_sweep
from accelsim.config.files import display_path
from accelsim.errors import ClusterError
from accelsim.resources import bundled_path

if TYPE_CHECKING:
    from collections.abc import Sequence

    from accelsim.planner.bound import Bound
    from accelsim.planner.pruned import Pruned
    from accelsim.planner.result import Evaluated, Scale
    from accelsim.planner.search import Filtered, Request
    from accelsim.sweep.plan import SweepPlan

    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]

EXIT_OK, EXIT_FAILED = 0, 3


def add_command(sub: Subparsers) -> None:
    """Add ``plan`` to the subcommands."""
    plan = sub.add_parser(
        "plan", help="search the parallel plans of a model on N chips and print the fastest"
    )
    plan.add_argument("workload", type=bundled_path, help="workload YAML (a layer table)")
    plan.add_argument("--hardware", type=bundled_path, required=True, help="hardware YAML")
    plan.add_argument("--chips", type=cli_sweep.positive, required=True, help="processors")
    plan.add_argument(
        "--global-batch", type=cli_sweep.positive, required=True, help="samples per step"
    )
    plan.add_argument(
        "--seq",
        type=cli_sweep.positive,
        default=None,
        help="tokens per sample (default: the workload's)",
    )
    plan.add_argument("--json", action="store_true", help="print the chosen plan as JSON")
    plan.add_argument(
        "--plan",
        default=None,
        metavar="PLAN",
        help="evaluate this plan instead of searching, e.g. tp=8,dp=2,recompute=selective",
    )
    plan.add_argument(
        "--exhaustive",
        action="store_true",
        help="simulate every plan that fits (default: skip those a simulated plan is"
        " proven to beat by their step's lower bound)",
    )
    plan.add_argument(
        "--max-plans",
        type=cli_sweep.positive,
        default=None,
        metavar="K",
        help="refuse a search of more than K fitting plans (default: 10,000)",
    )
    plan.add_argument(
        "--store",
        type=Path,
        default=None,
        help="the search's directory (default: results/plan-<workload>-<chips>-<batch>)",
    )
    cli_sweep.add_executor_options(plan)


def _request(args: argparse.Namespace) -> Request:
    from accelsim.planner.search import Request

    name = f"plan-{args.workload.stem}-{args.chips}-{args.global_batch}"
    if args.seq is not None:
        name += f"-{args.seq}"
    store = args.store if args.store is not None else Path("results") / name
    return Request(args.workload, args.hardware, args.chips, args.global_batch, args.seq, store)


def cmd_plan(args: argparse.Namespace) -> int:
    """``accelsim plan``: the search (or one ``--plan``), simulated through a sweep store."""
    from accelsim.config.parallel import ParallelSpec
    from accelsim.planner import pruned, search
    from accelsim.planner.given import parse_plan
    from accelsim.planner.session import PlanSearch
    from accelsim.sweep.plan import MAX_POINTS

    request = _request(args)
    started = time.perf_counter()
    session = PlanSearch.open(request)
    inputs = session.inputs
    if args.plan is not None:
        given = parse_plan(args.plan, ParallelSpec.model_fields, request.chips)
        filtered = search.given_plan(session.cache, session.base, session.sets, given, args.plan)
    else:
        filtered = session.filtered(session.candidates(), args.jobs)
    counts = filtered.counts(time.perf_counter() - started)
    if not filtered.fitting:
        refused = {"search": counts, "refusals": filtered.refusals}
        with cli_sweep.printing():
            print(json.dumps(refused, indent=2) if args.json else _refused_text(refused))
        return EXIT_FAILED
    plan = session.sweep(filtered.fitting, args.max_plans or MAX_POINTS)
    bounds = session.bounds(filtered.fitting)
    try:
        with cli_sweep.executor_of(args, search.pending(request, plan)) as executor:
            if args.exhaustive:
                report = search.simulate(request, plan, executor, filtered.fitting)
                done = pruned.Pruned(report.skipped, report.ran, report.failed, ())
            else:
                done = session.simulate(plan, executor, filtered.fitting, bounds)
    except ClusterError as exc:
        where = display_path(request.store)
        print(f"accelsim: {exc}; rerun the same command to resume ({where}/)", file=sys.stderr)
        return EXIT_FAILED
    scale = search.scale_of(inputs, request)
    return _finish(args, request, scale, filtered, counts, plan, (bounds, done), started)


def _finish(
    args: argparse.Namespace,
    request: Request,
    scale: Scale,
    filtered: Filtered,
    counts: dict[str, Any],
    plan: SweepPlan,
    searched: tuple[Sequence[Bound], Pruned],
    started: float,
) -> int:
    """Read the simulated plans back, draw the figure and print the fastest with its
    bound (the search ``started`` at that ``time.perf_counter``; ``searched``: every
    fitting plan's bound, and what the search simulated and pruned)."""
    from accelsim.planner.figure import FIGURE_NAME, plot_plans
    from accelsim.planner.result import evaluated, fastest

    bounds, done = searched
    plans = evaluated(request.store, plan, filtered.fitting)
    counts = {
        **counts,
        "simulated": len(plans),
        "already_stored": done.already_stored,
        "pruned_by_bound": len(done.pruned),
        "search_seconds": round(time.perf_counter() - started, 3),
    }
    if done.failed:
        where = display_path(request.store / "store.sqlite")
        print(f"accelsim: {done.failed} plans failed (their errors: {where})", file=sys.stderr)
    if not plans:
        return EXIT_FAILED
    chosen = fastest(plans)
    seconds_per_cycle = 1e-6 / float(chosen.summary["clock_mhz"])  # as its step_seconds
    bound = bounds[[f.candidate for f in filtered.fitting].index(chosen.candidate)]
    counts["chosen_bound_seconds"] = bound.cycles * seconds_per_cycle
    skipped = [
        (filtered.fitting[i].memory, bounds[i].cycles * seconds_per_cycle) for i in done.pruned
    ]
    plot_plans(plans, chosen, request.store / FIGURE_NAME, skipped)
    breakdown = chosen.breakdown(scale)
    with cli_sweep.printing(request.store):
        if args.json:
            print(json.dumps({**breakdown, "search": counts}, indent=2))
        else:
            print(_counts_text(counts))
            print(_chosen_text(chosen, breakdown, scale, bound.describe(seconds_per_cycle)))
            print(f"wrote {display_path(request.store)}/: store.sqlite, points/, {FIGURE_NAME}")
    return EXIT_FAILED if done.failed else EXIT_OK


def _counts_text(counts: dict[str, Any]) -> str:
    def by(kind: str) -> str:
        table = counts[f"refused_by_{kind}"]
        parts = ", ".join(f"{key} {n}" for key, n in table.items())
        return f"{sum(table.values())} by {kind}" + (f" ({parts})" if parts else "")

    lines = [
        f"plans           {counts['enumerated']} enumerated, refused {by('checks')},"
        f" {by('memory')} in {counts['filter_seconds']:.1f} s",
    ]
    if "simulated" in counts:
        lines.append(
            f"simulated       {counts['simulated']} ({counts['already_stored']} already stored),"
            f" {counts['pruned_by_bound']} pruned by their bound;"
            f" the search took {counts['search_seconds']:.1f} s"
        )
    return "\n".join(lines)


def _refused_text(refused: dict[str, Any]) -> str:
    lines = [_counts_text(refused["search"]), "no plan fits:"]
    lines += [f"  {label}: {why}" for label, why in refused["refusals"].items()]
    return "\n".join(lines)


def _chosen_text(chosen: Evaluated, breakdown: dict[str, Any], scale: Scale, bound: str) -> str:
    from accelsim.report.memory import memory_block

    lines = [
        f"fastest         {breakdown['plan']}",
        f"step            {breakdown['step_seconds']:.4f} s, "
        f"{breakdown['tokens_per_second_per_chip']:,.1f} tokens/s per chip,"
        f" MFU {100 * breakdown['mfu']:.1f} % (6 x {scale.parameters:,} parameters"
        f" x {scale.tokens_per_step:,} tokens)",
        f"  bound         {bound}",
    ]
    if "bubble_seconds" in breakdown:
        lines += [
            f"  compute       {breakdown['compute_seconds']:.4f} s (the busiest stage's passes)",
            f"  bubble        {breakdown['bubble_seconds']:.4f} s (the idlest stage's)",
        ]
    else:
        compute = breakdown["compute_seconds"]
        aside = ", recomputation aside" if breakdown["recompute"] != "none" else ""
        lines.append(f"  compute       {compute:.4f} s (the busiest chip's arrays{aside})")
    lines += [
        f"  exposed {kind}  {seconds:.4f} s"
        for kind, seconds in breakdown["exposed_communication_seconds"].items()
    ]
    lines.append(f"  recomputation {breakdown['recomputation_seconds']:.4f} s")
    lines.append(memory_block(chosen.memory))
    return "\n".join(lines)
