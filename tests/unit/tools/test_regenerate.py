"""The planner validation's regeneration reaches every folder that holds a blind study's summary,
names declared studies only, and runs the tables before what reads them."""
from pathlib import Path

from pytest_gpu_pairs.studies.declaration import all_studies
from tools.planner_validation import regenerate

ROOT = Path(__file__).resolve().parents[3]


def _folders_with_a_study_summary() -> set[str]:
    validation = ROOT / regenerate.VALIDATION
    found = {p.parent for p in validation.rglob("summary.json")}
    found.discard(validation / "reference" / "validation")  # plan-validate's, not a study's
    return {str(folder.relative_to(ROOT)) for folder in found}


def test_every_folder_holding_a_study_summary_is_collected_again():
    collected = {folder for _, folder in regenerate.COLLECTED}
    assert collected == _folders_with_a_study_summary()


def test_every_collected_study_is_declared_and_its_reference_is_collected():
    declared = all_studies()
    collected = dict.fromkeys(folder for _, folder in regenerate.COLLECTED)
    for study, _ in regenerate.COLLECTED:
        assert study in declared
        assert declared[study].reference in collected


def test_the_tables_come_before_the_validation_and_the_studies():
    steps = [" ".join(command[1:]) for command in regenerate.commands()]
    tables = steps.index("-m tools.codegen.h200_tables")
    validation = next(i for i, step in enumerate(steps) if "plan-validate" in step)
    first_collect = next(i for i, step in enumerate(steps) if "study collect" in step)
    assert tables < steps.index("-m tools.codegen.reference_pairs") < validation < first_collect


def test_a_dry_run_prints_each_command_and_writes_nothing(capsys, monkeypatch):
    monkeypatch.setattr(regenerate.subprocess, "run", lambda *a, **k: (_ for _ in ()).throw(AssertionError("ran")))
    assert regenerate.main(["--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(regenerate.commands())
    assert lines[0] == "$ python -m tools.codegen.h200_tables"


def test_a_failing_step_stops_the_rest_with_its_exit_status(monkeypatch, capsys):
    ran = []

    class Done:
        def __init__(self, code):
            self.returncode = code

    def run(command, **kwargs):
        ran.append(command)
        return Done(3 if len(ran) == 2 else 0)

    monkeypatch.setattr(regenerate.subprocess, "run", run)
    assert regenerate.main([]) == 3
    assert len(ran) == 2
    assert "stopped, exit 3" in capsys.readouterr().err
