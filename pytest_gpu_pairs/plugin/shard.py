"""``--gpu-pairs-shard K/N``: this machine runs shard K of the selected cases.

Every machine of a Slurm array or CI matrix collects the same cases and must pick the same split
without talking to the others, so the split rests only on what every machine has alike: the
selected case ids and their estimates from the settings and the committed profiles (earlier results
and profiles measured in a machine's own results folder are left out: they differ between machines). The device of the
estimate is the option's (``auto`` is counted as ``cuda``), not what this machine finds. Tests that
are not gpu-pairs cases run in shard 1 only, so the shards together run the selection once.
"""
from __future__ import annotations

import pytest

from pytest_gpu_pairs.plugin.stash import gpu_pairs_session


def shard_device(device: str) -> str:
    return "cpu" if device == "cpu" else "cuda"


def shard_items(config: pytest.Config, items: list[pytest.Item], case_fixture: str) -> None:
    shard = config.getoption("gpu_pairs_shard")
    if shard is None:
        return
    from pytest_gpu_pairs.planning.estimate import Earlier, case_costs
    from pytest_gpu_pairs.planning.own_profiles import OwnProfiles
    from pytest_gpu_pairs.planning.schedule import shard_ids

    index, count = shard
    options = gpu_pairs_session(config).options
    by_item = {id(item): item.callspec.params[case_fixture] for item in items
               if hasattr(item, "callspec") and case_fixture in item.callspec.params}
    cases = list({case.id: case for case in by_item.values()}.values())
    costs = case_costs(cases, options, shard_device(options.device), Earlier(), OwnProfiles())
    mine = set(shard_ids(costs, index, count))
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        case = by_item.get(id(item))
        (keep if (case.id in mine if case is not None else index == 1) else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
