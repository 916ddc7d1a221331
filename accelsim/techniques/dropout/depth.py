"""Approximate dropout's stochastic-depth sites: which it acts on, their sample patterns
(a family over the batch, searched for each layer's rate) and their part of the
report."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from accelsim.lowering.shapes import LayerInfo
from accelsim.techniques.dropout.config import ApproximateDropoutConfig, Pattern
from accelsim.techniques.dropout.patterns import PatternFamily, search, site_chances
from accelsim.techniques.dropout.rewrite import Plan
from accelsim.techniques.dropout.samples import SampleSite, find_sample_sites
from accelsim.units import plural


def sample_sites(
    cfg: ApproximateDropoutConfig, infos: Sequence[LayerInfo]
) -> tuple[list[SampleSite], dict[str, str]]:
    """The stochastic-depth layers acted on (row patterns, ``stochastic_depth`` on, a rate
    above 0), and why each other one is not."""
    found, refused = find_sample_sites(infos)
    if cfg.pattern is not Pattern.ROW:
        why = f"{cfg.pattern.value} patterns leave samples whole (row patterns drop them)"
    elif not cfg.stochastic_depth:
        why = "stochastic_depth is off"
    else:
        idle = {s.layer: "its rate is 0: no sample to drop" for s in found if not s.rate}
        return [s for s in found if s.rate > 0], {**idle, **refused}
    return [], {**dict.fromkeys((s.layer for s in found), why), **refused}


def sample_family(max_period: int, batch: int) -> PatternFamily:
    """The patterns over a batch's samples: periods up to ``max_period`` and no longer
    than the batch, and the pattern that keeps every sample, so that every pattern keeps
    a sample and a rate below ``1 / period`` (stochastic depth's are often a few per
    cent) is reached by steps that drop none."""
    family = PatternFamily.up_to(min(max_period, batch))
    return PatternFamily(
        np.append(family.period, 1), np.append(family.offset, 0), np.append(family.keep, True)
    )


def sample_probabilities(
    cfg: ApproximateDropoutConfig, site: SampleSite, index: int, batch: int
) -> tuple[np.ndarray, float, np.ndarray]:
    """A sample site's pattern distribution (the search over the batch's samples, seeded
    by the site's ``index`` among all sites), its worst per-sample deviation from the
    site's rate, and the share of the samples each pattern keeps."""
    drops = sample_family(cfg.max_period, batch).row_drops(batch)
    found = search(drops, site.rate, iterations=cfg.search_iterations, seed=cfg.search_seed + index)
    return site_chances(drops, found.probabilities, site.rate)


def sample_report(plan: Plan) -> dict[str, Any]:
    """The stochastic-depth layers: each one acted on with its branch and its kept
    samples (mean per step, and the shares expected and drawn), and why each other one
    is not acted on."""
    first, rows = plan.first_sample, len(plan.sites)
    return {
        "sites": [
            {
                "layer": site.layer,
                "rate": site.rate,
                "batch": plan.batch,
                "branch": list(site.branch),
                "join": site.join,
                "kept_mean": float(plan.kept[:, first + j].mean()),
                "dropped_mean": float(plan.batch - plan.kept[:, first + j].mean()),
                "kept_share_expected": plan.kept_share[rows + j][0],
                "kept_share_drawn": plan.kept_share[rows + j][1],
                "search_max_error": plan.search_error[rows + j],
            }
            for j, site in enumerate(plan.samples)
        ],
        "not_acted_on": dict(plan.refused_samples),
    }


def sample_columns(plan: Plan) -> dict[str, int]:
    """Each stochastic-depth layer and each layer of its branch, by name: its site's
    column of ``plan.kept``."""
    first = plan.first_sample
    return {
        layer: first + j
        for j, site in enumerate(plan.samples)
        for layer in (site.layer, *site.branch)
    }


def sample_lines(plan: Plan) -> tuple[tuple[str, str], ...]:
    """The line ``accelsim run`` prints of the stochastic-depth branches acted on: how
    many, and the samples their steps keep (the mean over branches, and its range)."""
    if not plan.samples:
        return ()
    kept = plan.kept[:, plan.first_sample :].mean(axis=0)
    count = len(plan.samples)
    return (
        (
            "stochastic depth",
            f"{count} {plural(count, 'branch', 'branches')} run for {kept.mean():.2f} of"
            f" {plan.batch} samples a step on average ({kept.min():.2f} to"
            f" {kept.max():.2f} by branch)",
        ),
    )
