"""Every reference study is declared, and ``collect`` rebuilds each committed summary from the
committed results: the same text, numbers to the last digits a float64 keeps, plots to their
anti-aliasing; a study whose summary cannot be rebuilt says why, and collect refuses it with that
reason instead of writing something else."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.helpers import differs_beyond_last_digits

from pytest_gpu_pairs.cli import main
from pytest_gpu_pairs.studies.declaration import all_studies

ROOT = Path(__file__).resolve().parents[3]
STUDIES = all_studies()
REBUILT_END_TO_END = {"predecessor": "tests/e2e/test_report.py"}  # its report takes seconds: built once there
COLLATED = sorted(name for name, study in STUDIES.items() if study.collate and name not in REBUILT_END_TO_END)
NOT_REBUILT = sorted(name for name, study in STUDIES.items() if not study.collate)


def test_every_reference_folder_is_a_declared_study_and_back():
    """A top-level folder is its study's; a sub-study (``default_method_run_spread``) lives in a
    sub-folder of the study its name starts with."""
    folders = {p.name for p in (ROOT / "reports" / "reference").iterdir() if p.is_dir() and not p.is_symlink()}
    top = {name: s for name, s in STUDIES.items() if s.reference.count("/") == 2}
    assert {Path(s.reference).name for s in top.values()} == folders
    assert all(s.reference == f"reports/reference/{name}" for name, s in top.items())
    for name, study in STUDIES.items():
        if name not in top:
            parent = study.reference.split("/")[2]
            assert parent in top and name.startswith(f"{parent}_") and (ROOT / study.reference).is_dir(), name


def test_every_other_name_for_a_reference_folder_is_a_link_to_a_declared_studys():
    """An issue or a paper may name a study's folder otherwise (``planner`` for the planner's
    validation): a link in the same folder keeps one copy of the records, which ``rglob`` and
    ``os.walk`` do not follow, so nothing reads them twice."""
    reference = ROOT / "reports" / "reference"
    assert (reference / "planner").resolve() == (reference / "planner_validation").resolve()
    for link in (p for p in reference.iterdir() if p.is_symlink()):
        target = Path(link.readlink())
        assert target.parent == Path("."), f"{link.name} -> {target}: expected a sibling study folder"
        assert any(s.reference == f"reports/reference/{target}" for s in STUDIES.values()), link.name


def test_list_names_every_study(capsys):
    assert main(["study", "list"]) == 0
    listed = {line.split()[0] for line in capsys.readouterr().out.splitlines() if not line.startswith(" ")}
    assert listed == set(STUDIES)


@pytest.mark.parametrize("name", COLLATED)
def test_collect_rebuilds_the_committed_summary(name, tmp_path, capsys):
    """Whatever sessions are committed (verdicts receives new ones), the summary is what they make."""
    study = STUDIES[name]
    reference = ROOT / study.reference
    copy = tmp_path / name
    shutil.copytree(reference, copy, ignore=shutil.ignore_patterns(*(Path(f).name for f in study.summary_files)))
    assert main(["study", "collect", name, "--out", str(copy), "--root", str(ROOT)]) == 0
    for file in study.summary_files:
        difference = differs_beyond_last_digits(copy / file, reference / file)
        assert difference is None, \
            f"{study.reference}/{file} is not what `gpu-pairs study collect {name}` makes of the committed results: {difference}"


@pytest.mark.parametrize(("made", "same"), [
    ('{"p": 0.00046666666666660627, "n": 78}', True),  # the last digits a library release moved
    ('{"p": 0.0004667, "n": 78}', False),
    ('{"p": 0.00046666666666668627, "n": 79}', False),
    ('{"q": 0.00046666666666668627, "n": 78}', False),
    ('{"p": 0.00046666666666668627, "n": 78, "m": 1}', False),
])
def test_a_rebuilt_summary_matches_only_to_the_last_digits_of_its_numbers(made, same, tmp_path):
    committed = tmp_path / "summary.json"
    committed.write_text('{"p": 0.00046666666666668627, "n": 78}')
    (tmp_path / "made.json").write_text(made)
    assert (differs_beyond_last_digits(tmp_path / "made.json", committed) is None) == same


@pytest.mark.parametrize(("moved", "by", "same"), [(5, 0.04, True), (5, 0.5, False), (2000, 0.04, False)])
def test_a_rebuilt_plot_matches_only_to_its_anti_aliasing(moved, by, same, tmp_path):
    import matplotlib.image
    import numpy

    pixels = numpy.full((100, 100, 3), 0.5)
    matplotlib.image.imsave(tmp_path / "plot.png", pixels)
    pixels.reshape(-1, 3)[:moved] += by
    matplotlib.image.imsave(tmp_path / "made.png", pixels)
    assert (differs_beyond_last_digits(tmp_path / "made.png", tmp_path / "plot.png") is None) == same


@pytest.mark.parametrize("name", NOT_REBUILT)
def test_a_summary_collect_cannot_rebuild_is_refused_with_the_reason(name, tmp_path, capsys):
    study = STUDIES[name]
    assert len(study.not_rebuilt) > 40, "say why, and how the summary is made instead"
    assert main(["study", "collect", name, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert study.not_rebuilt in err and len(err.splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("folder", ["drifting-host", "half-second-10-rounds", "two-second", "unbracketed"])
def test_each_earlier_reproducibility_study_is_rebuilt_too(folder, tmp_path):
    """The reproducibility study's earlier questions keep their own session files and summaries."""
    reference = ROOT / "reports" / "reference" / "reproducibility" / folder
    copy = tmp_path / folder
    shutil.copytree(reference, copy, ignore=shutil.ignore_patterns("summary.json", "summary.md"))
    assert main(["study", "collect", "reproducibility", "--out", str(copy)]) == 0
    for file in ("summary.json", "summary.md"):
        assert differs_beyond_last_digits(copy / file, reference / file) is None


def test_the_studies_collected_end_to_end_have_a_collate():
    assert all(STUDIES[name].collate for name in REBUILT_END_TO_END)


def test_the_estimates_of_a_profiled_script_are_rebuilt_too(tmp_path):
    reference = ROOT / "reports" / "reference" / "estimates" / "profiled-script"
    copy = tmp_path / "profiled-script"
    shutil.copytree(reference, copy, ignore=shutil.ignore_patterns("estimates.md"))
    assert main(["study", "collect", "estimates", "--out", str(copy)]) == 0
    assert differs_beyond_last_digits(copy / "estimates.md", reference / "estimates.md") is None


@pytest.mark.parametrize("folder", ["run-d6252c3", "earlier-441e555"])
def test_each_earlier_run_of_the_verdicts_study_is_rebuilt_too(folder, tmp_path):
    """The verdicts study's earlier runs keep their sessions; their fit profiles are the study's."""
    reference = ROOT / "reports" / "reference" / "verdicts" / folder
    copy = tmp_path / "verdicts" / folder
    shutil.copytree(reference, copy, ignore=shutil.ignore_patterns("summary.json", "table.md"))
    shutil.copytree(reference.parent / "fit-profiles", copy.parent / "fit-profiles")
    assert main(["study", "collect", "verdicts", "--out", str(copy), "--root", str(ROOT)]) == 0
    for file in ("summary.json", "table.md"):
        assert differs_beyond_last_digits(copy / file, reference / file) is None


@pytest.mark.parametrize("written", ['{"a": 1}', "[1, 2]", "not json"])
def test_what_a_verdicts_run_leaves_out_must_be_sentences_or_collect_refuses_in_one_line(written, tmp_path, capsys):
    reference = ROOT / "reports" / "reference" / "verdicts" / "earlier-441e555"
    copy = tmp_path / "verdicts" / "earlier-441e555"
    shutil.copytree(reference, copy, ignore=shutil.ignore_patterns("summary.json", "table.md"))
    shutil.copytree(reference.parent / "fit-profiles", copy.parent / "fit-profiles")
    (copy / "not_covered.json").write_text(written)
    assert main(["study", "collect", "verdicts", "--out", str(copy), "--root", str(ROOT)]) == 2
    err = capsys.readouterr().err
    assert f"{copy / 'not_covered.json'}: $: expected a list of sentences" in err and len(err.splitlines()) == 1
    assert not (copy / "summary.json").exists() and not (copy / "table.md").exists()


ARCHIVE = ROOT / "reports" / "archive"


@pytest.mark.parametrize("folder", sorted(p.name for p in ARCHIVE.iterdir() if p.is_dir()))
def test_an_archived_study_is_not_declared_and_its_readme_opens_with_why(folder):
    """An archived study keeps its figures as history: its README's first paragraph says so, why
    collect cannot rebuild it (its raw results were never committed, or the collate now makes the
    study that supersedes it), and which study supersedes it; no declaration points at it any more."""
    assert folder not in STUDIES and all(not s.reference.startswith("reports/archive") for s in STUDIES.values())
    first = " ".join((ARCHIVE / folder / "README.md").read_text(encoding="utf-8").split("\n\n")[1].split())
    assert first.startswith("**Archived, kept as history, not as reference.**")
    assert ("never committed" in first or "no longer rebuilds" in first) and "gpu-pairs study collect" in first
    assert "supersede" in first
