"""The parts a session coordinates, each on its own: the output folder, the device and the solo
baselines; and the VRAM budget, decided once where cases are built."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.experiment.cases import JobConfig, Overrides, vram_budget
from pytest_gpu_pairs.experiment.schema import DEFAULTS
from pytest_gpu_pairs.record.build import SoloBaseline
from pytest_gpu_pairs.record.model import Record
from pytest_gpu_pairs.run import outdir
from pytest_gpu_pairs.run.device import CardEmulationUnavailable, Device
from pytest_gpu_pairs.run.options import GpuPairsOptions
from pytest_gpu_pairs.run.outdir import OutputFolder, OutputFolderUnavailable, OutsideOutputFolder
from pytest_gpu_pairs.run.session import GpuPairsSession
from pytest_gpu_pairs.run.solos import SoloBaselines

JOB = JobConfig("resnet20", (("epochs", 1),))


def options(tmp_path: Path, **changes) -> GpuPairsOptions:
    values = {"settings": (), "device": "cpu", "scale": 1.0, "vram_budget_mb": None, "min_efficiency": None,
              "sample_hz": 10.0, "out_dir": tmp_path / "out", **changes}
    return GpuPairsOptions(**values)


def test_a_workers_own_files_go_in_its_own_folder_and_its_baselines_carry_its_name(tmp_path):
    alone, worker = OutputFolder(tmp_path), OutputFolder(tmp_path, "gw1")
    assert alone.own_dir == tmp_path and worker.own_dir == tmp_path / "_workers" / "gw1"
    assert alone.solo_dir(JOB, 1.0).parent == tmp_path / "_solo"
    assert worker.solo_dir(JOB, 1.0).name == alone.solo_dir(JOB, 1.0).name + "-gw1"
    assert alone.solo_dir(JOB, 0.5) != alone.solo_dir(JOB, 1.0)


def test_a_case_folder_is_emptied_for_a_rerun_and_never_lies_outside(tmp_path):
    folder = OutputFolder(tmp_path)
    case = SimpleNamespace(id="g01-a+b-default-concurrent")
    (folder.fresh_case_dir(case) / "old.log").write_text("an earlier run")
    assert list(folder.fresh_case_dir(case).iterdir()) == []
    with pytest.raises(OutsideOutputFolder):
        folder.case_dir(SimpleNamespace(id="../escaped"))


def test_a_second_session_on_a_claimed_folder_is_refused_in_one_line_until_the_first_releases_it(tmp_path,
                                                                                               monkeypatch):
    # the claim makes pytest the subreaper of every later orphan: not this test's process
    monkeypatch.setattr(outdir, "become_subreaper", lambda: False)
    first, second = OutputFolder(tmp_path / "out"), OutputFolder(tmp_path / "out")
    first.claim()
    try:
        with pytest.raises(OutputFolderUnavailable) as refused:
            second.claim()
        assert "\n" not in str(refused.value) and "in use by another pytest session" in str(refused.value)
    finally:
        first.release()
    second.claim()
    second.release()


def test_the_device_opens_once_and_says_so_once(tmp_path):
    opened = []
    device = Device(options(tmp_path), OutputFolder(tmp_path / "out"), opened.append)
    assert device.opened is None and opened == []  # nothing is opened for asking
    env = device.environment()
    assert device.environment() is env and device.opened is env and opened == [env]
    assert env.device == "cpu" and "--gpu-pairs-device cpu" in env.gpu_unavailable


@pytest.mark.parametrize("changes, efficiency, vram", [
    ({}, False, False), ({"min_efficiency": 0.9}, True, False), ({"vram_budget_mb": 4000.0}, False, True)])
def test_on_the_cpu_only_a_threshold_given_as_an_option_is_enforced(tmp_path, changes, efficiency, vram):
    device = Device(options(tmp_path, **changes), OutputFolder(tmp_path / "out"), lambda env: None)
    assert (device.enforce_efficiency, device.enforce_vram) == (efficiency, vram)


def test_no_card_is_emulated_without_a_gpu_and_the_reason_names_the_option(tmp_path):
    device = Device(options(tmp_path, gpu_memory_mb=8000.0), OutputFolder(tmp_path / "out"), lambda env: None)
    with pytest.raises(CardEmulationUnavailable, match="--gpu-pairs-gpu-memory-mb 8000 emulates a smaller GPU"):
        device.emulated_card(SimpleNamespace(id="c"))
    assert Device(options(tmp_path), OutputFolder(tmp_path / "out"), lambda env: None).emulated_card(None) is None


def test_the_cool_down_counts_from_when_our_last_job_left_the_device(tmp_path):
    device = Device(options(tmp_path), OutputFolder(tmp_path / "out"), lambda env: None)
    assert device.released_t is None and device.cool_down(30.0) == 0.0  # nothing of ours ran yet
    device.release()
    assert device.released_t is not None and device.cool_down(0.0) == 0.0


def test_a_solo_cases_first_round_is_the_baseline_and_is_never_replaced(tmp_path):
    solos = SoloBaselines(OutputFolder(tmp_path), SimpleNamespace(), SimpleNamespace(), 1.0, 7500.0)
    first, later = SimpleNamespace(out_dir="r1"), SimpleNamespace(out_dir="r2")
    assert not solos.has(JOB) and solos.cached(JOB) is None and solos.record(JOB) is None
    solos.adopt(JOB, first, {"record": 1})
    solos.adopt(JOB, later, {"record": 2})
    assert solos.has(JOB) and solos.cached(JOB) is first and solos.record(JOB) == {"record": 1}
    assert not SoloBaselines(OutputFolder(tmp_path), None, None, 0.5, 7500.0).has(JOB)


def test_a_resumed_solo_record_stands_in_for_its_job_only_with_a_baselines_figures(tmp_path):
    solos = SoloBaselines(OutputFolder(tmp_path), SimpleNamespace(), SimpleNamespace(), 1.0, 7500.0)
    older = Record.model_validate({"fg_duration_s": 12.0, "gpu_energy_j": 3000.0})
    solos.adopt_recorded(JOB, older, tmp_path / "a")
    assert not solos.has(JOB) and solos.record(JOB) is None
    full = older.updated(fg_steps_in_window=600.0, fg_solo_steps_per_s=50.0)
    solos.adopt_recorded(JOB, full, tmp_path / "a")
    solos.adopt_recorded(JOB, full.updated(fg_duration_s=99.0), tmp_path / "b")
    assert solos.has(JOB) and solos.cached(JOB) is None and solos.recorded(JOB) == (full, tmp_path / "a")
    assert solos.record(JOB) == full and SoloBaseline.recorded(full).cost.j_per_step == 5.0
    solos.adopt(JOB, SimpleNamespace(out_dir="measured"), {"record": "this session's"})
    assert solos.recorded(JOB) is None and solos.record(JOB) == {"record": "this session's"}  # a measurement wins
    failed = full.updated(failure="exited with code 1")
    other = SoloBaselines(OutputFolder(tmp_path), SimpleNamespace(), SimpleNamespace(), 1.0, 7500.0)
    other.adopt_recorded(JOB, failed, tmp_path / "c")
    assert not other.has(JOB)


budgets = st.one_of(st.none(), st.floats(1.0, 80_000.0))


@given(option=budgets, pair=budgets, defaults=budgets)
def test_the_vram_budget_is_the_option_else_the_settings_else_the_schemas(option, pair, defaults):
    decided = vram_budget(Overrides(vram_budget_mb=option), pair, defaults)
    assert decided == next(v for v in (option, pair, defaults, DEFAULTS.vram_budget_mb) if v is not None)


def test_a_sessions_baselines_are_checked_against_the_budget_its_cases_would_be(tmp_path):
    assert GpuPairsSession(options(tmp_path)).solos.vram_budget_mb == DEFAULTS.vram_budget_mb
    assert GpuPairsSession(options(tmp_path, vram_budget_mb=3000.0)).solos.vram_budget_mb == 3000.0


def test_a_case_reaches_the_sessions_parts_through_its_context_not_the_session(tmp_path):
    session = GpuPairsSession(options(tmp_path))
    context = session.context
    assert (context.folder, context.device, context.solos, context.sharing, context.fits) == (
        session.folder, session.device, session.solos, session.sharing, session.fits)
    assert context.results is session.results and context.conclude == session.conclude
