"""Which CPUs each job gets: whole cores, never shared between the jobs, the harness, workers or
sessions named to other GPUs of the host."""
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.devices.cpus import format_cpu_list, parse_cpu_list, physical_cores
from pytest_gpu_pairs.devices.nvml import NvmlUnavailable
from pytest_gpu_pairs.run.cpus import plan_job_cpus, share_of_cores
from pytest_gpu_pairs.run.device import job_cpu_plan, session_cpu_share
from pytest_gpu_pairs.run.options import GpuPairsOptions


def smt_siblings(threads: int, cores: int):
    """Linux numbering of an SMT host: CPU c and c + cores are one core's threads."""
    return lambda cpu: frozenset({cpu % cores + k * cores for k in range(threads)})


hosts = st.tuples(st.integers(1, 2), st.integers(1, 40))


@given(hosts, st.integers(1, 4), st.data())
def test_every_worker_gets_whole_cores_and_no_cpu_is_given_twice(host, workers, data):
    threads, n_cores = host
    cores = physical_cores(range(threads * n_cores), smt_siblings(threads, n_cores))
    assert all(len(core) == threads for core in cores)
    taken: set[int] = set()
    for index in range(workers):
        share = share_of_cores(cores, index, workers)
        per_job = data.draw(st.one_of(st.none(), st.integers(1, 6)))
        plan = plan_job_cpus(share, per_job)
        one_loop = data.draw(st.booleans())
        jobs = {role: plan.for_job(role, one_loop) for role in plan.jobs}
        cpus = [plan.harness, *jobs.values()] if plan.jobs else []
        for group in cpus:
            assert not group & taken
            assert all(set(core) <= group or not set(core) & group for core in cores)  # whole cores only
            taken |= group
        if plan.jobs:
            assert set(jobs) == {"fg", "bg"} and all(jobs.values()) and plan.harness
            if per_job is not None:  # the user's size holds, a GPU loop or not
                assert all(len(c) >= per_job for c in jobs.values())
            elif one_loop:
                assert all(len(c) <= max(2, threads) for c in jobs.values())
        else:
            assert plan.reason


@given(st.integers(1, 64), st.integers(1, 8))
def test_the_shares_of_the_cores_cover_them_once_and_differ_by_one_at_most(n_cores, workers):
    cores = [(c,) for c in range(n_cores)]
    shares = [share_of_cores(cores, i, workers) for i in range(workers)]
    assert [c for share in shares for c in share] == cores
    assert max(map(len, shares)) - min(map(len, shares)) <= 1


def test_an_even_split_leaves_the_first_core_to_the_harness_and_a_gpu_loop_one_core():
    plan = plan_job_cpus([(c, c + 8) for c in range(8)])
    assert plan.harness == {0, 8}
    assert plan.for_job("fg", one_loop=False) == {1, 9, 2, 10, 3, 11}
    assert plan.for_job("bg", one_loop=False) == {4, 12, 5, 13, 6, 14}
    assert plan.described({"fg": True, "bg": False}) == {"fg": "1,9", "bg": "4-6,12-14", "harness": "0,8"}
    no_smt = plan_job_cpus([(c,) for c in range(16)])
    assert no_smt.for_job("fg", one_loop=True) == {1, 2}
    assert no_smt.described({"fg": True}) == {"fg": "1-2", "harness": "0"}


def test_too_few_cores_means_no_pinning_and_says_why():
    plan = plan_job_cpus([(0,), (1,)])
    assert plan.jobs == {} and plan.described({"fg": True}) is None and plan.for_job("fg", True) is None
    assert "2 CPU(s) in 2 core(s)" in plan.reason
    assert "asked for" in plan_job_cpus([(c,) for c in range(5)], per_job=3).reason


def test_the_option_turns_pinning_off_or_sizes_it(monkeypatch):
    monkeypatch.setattr("pytest_gpu_pairs.devices.cpus.thread_siblings", smt_siblings(2, 8))
    usable = frozenset(range(16))
    assert job_cpu_plan("off", (0, 1), usable).reason == "--gpu-pairs-pin-cpus off"
    assert "does not let" in job_cpu_plan("auto", (0, 1), frozenset()).reason
    second_worker = job_cpu_plan("2", (1, 2), usable)
    assert second_worker.harness == {4, 12}
    assert [second_worker.for_job(role, False) for role in ("fg", "bg")] == [{5, 13}, {6, 14}]
    assert job_cpu_plan("4", (0, 1), usable).for_job("fg", one_loop=True) == {1, 9, 2, 10}  # asked for 4: gets 4
    assert job_cpu_plan("auto", (0, 1), usable).for_job("bg", False) == {4, 5, 6, 12, 13, 14}  # core 7 left idle


@given(st.sets(st.integers(0, 300), max_size=60))
def test_the_kernel_list_format_reads_back(cpus):
    assert parse_cpu_list(format_cpu_list(cpus)) == cpus


def test_a_bad_part_of_a_kernel_list_is_left_out():
    assert parse_cpu_list("0-3, x, 7,9-8,,12") == {0, 1, 2, 3, 7, 12}


def test_a_builtin_is_narrowed_to_two_cpus_only_where_it_drives_a_gpu():
    """On the CPU a built-in computes with all its threads: it keeps its role's whole share."""
    from pytest_gpu_pairs.run.environment import Environment

    plan = plan_job_cpus([(c,) for c in range(16)])
    on_gpu = Environment(device="cuda", scale=1.0, sample_hz=10.0, cpus=plan)
    on_cpu = Environment(device="cpu", scale=1.0, sample_hz=10.0, cpus=plan)
    assert on_gpu.job_cpus("fg", builtin=True) == {1, 2}
    assert on_cpu.job_cpus("fg", builtin=True) == set(range(1, 8))
    assert on_gpu.job_cpus("bg", builtin=False) == set(range(8, 15))


def _gpu(index: int):
    return SimpleNamespace(info=SimpleNamespace(index=index))


def _options(**given):
    return GpuPairsOptions(settings=(), device="cuda", scale=1.0, vram_budget_mb=None, min_efficiency=None,
                           sample_hz=10.0, out_dir=Path("out"), **given)


def test_sessions_named_to_different_gpus_of_a_host_pin_their_jobs_to_different_cpus(monkeypatch):
    """Two sessions side by side, each with ``--gpu-pairs-gpus N`` and no workers, once both pinned
    their jobs to CPUs 1-2 and 16-17 of a two-GPU host."""
    monkeypatch.setattr("pytest_gpu_pairs.devices.cpus.thread_siblings", smt_siblings(1, 32))
    usable = frozenset(range(32))
    plans = [job_cpu_plan("auto", session_cpu_share(_options(gpu=str(i)), _gpu(i), lambda: 2), usable)
             for i in (0, 1)]
    taken = [plan.harness | plan.for_job("fg", False) | plan.for_job("bg", False) for plan in plans]
    assert taken[0].isdisjoint(taken[1])
    assert all(len(plan.for_job(role, True)) == 2 for plan in plans for role in ("fg", "bg"))


@pytest.mark.parametrize(("given", "gpu", "share"), [
    ({}, _gpu(1), (0, 1)),  # no GPU named: the session has the host
    ({"gpu": "1", "worker": "gw1", "cpu_share": (1, 2)}, _gpu(1), (1, 2)),  # a worker: its block
    ({"gpu": "1"}, None, (0, 1)),  # no GPU opened
    ({"gpu": "GPU-b9d1"}, _gpu(1), (1, 2)),  # named by UUID: its NVML index
])
def test_a_session_takes_its_gpus_share_only_where_it_is_named_to_one(given, gpu, share):
    assert session_cpu_share(_options(**given), gpu, lambda: 2) == share


def test_a_host_whose_gpus_cannot_be_counted_leaves_the_session_all_of_it():
    def uncountable():
        raise NvmlUnavailable("no NVML")

    assert session_cpu_share(_options(gpu="1"), _gpu(1), uncountable) == (0, 1)
