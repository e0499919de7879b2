"""A workload's ``env`` from its settings reaches its job, except where it names a variable the
harness decides: the harness's value (or, where the harness sets none, pytest's own) wins."""
from __future__ import annotations

import os
import sys

from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.experiment.load import parse_experiment
from pytest_gpu_pairs.run.jobs import HARNESS_VARS, build_spec

NAMES = st.sampled_from(sorted(HARNESS_VARS) + ["OWN_A", "OWN_B", "PYTHONUNBUFFERED", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"])
VALUES = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=8)


def command_job(env: dict[str, str]):
    from pytest_gpu_pairs.experiment.cases import job_config
    from pytest_gpu_pairs.experiment.schema import JobRef

    experiment = parse_experiment({"name": "e", "workloads": {"w": {"command": [sys.executable, "-c", "pass"], "env": env}},
                                   "pairs": [{"group": "g01", "foreground": {"model": "w"},
                                              "background": {"model": "w"}}]}, "s.json")
    return job_config(experiment, JobRef(model="w"))


@given(settings=st.dictionaries(NAMES, VALUES, max_size=6), harness=st.dictionaries(NAMES, VALUES, max_size=4),
       device=st.sampled_from(["cpu", "cuda"]))
def test_the_harnesss_variables_win_over_a_workloads_env(settings, harness, device):
    spec = build_spec(command_job(settings), "fg", device, 1.0, 60.0, harness)
    decided = {**harness, **({"CUDA_VISIBLE_DEVICES": ""} if device == "cpu" else {})}
    for name, value in settings.items():
        if name in decided:
            assert spec.env[name] == decided[name]
        elif name in HARNESS_VARS:
            assert spec.env.get(name) == os.environ.get(name)
        else:
            assert spec.env[name] == value
    for name, value in decided.items():
        assert spec.env[name] == value
    assert set(spec.overruled_env) == {n for n in settings
                                       if (n in decided or n in HARNESS_VARS) and spec.env.get(n) != settings[n]}
