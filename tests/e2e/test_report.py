"""``gpu-pairs report`` end to end: the full report built from the predecessor's real seed data
(tests/data/predecessor/raw_data.csv) against the committed reports/reference/predecessor/, and the HTML as
headless Chromium renders it."""
import csv
import json
import os
import pickle
import shutil
import subprocess
from pathlib import Path

import pytest
from support.helpers import H100_DATA, REPO, differs_beyond_last_digits

BENCH, RUN_DIR = H100_DATA / "slice_full_scale.json", H100_DATA / "run"


@pytest.fixture(scope="module")
def seed_report(tmp_path_factory):
    """The full seed study, built by the predecessor study's collate, which made
    reports/reference/predecessor/: once a test run, the longest fixture of the suite, shared by the
    pytest-xdist workers that run this module's tests (their base folders are one run's)."""
    from filelock import FileLock

    from pytest_gpu_pairs.studies.collates import predecessor

    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "seed-report"
    pickled = shared / "report.pickle"
    with FileLock(f"{shared}.lock"):
        if not pickled.exists():
            pickled.parent.mkdir(exist_ok=True)
            pickled.write_bytes(pickle.dumps(predecessor.build(REPO, shared / "out")))
    return pickle.loads(pickled.read_bytes())


def test_every_test_states_its_name_and_n(seed_report):
    tests = seed_report.analysis.tests
    assert len(tests) > 20 and tests["n"].min() >= 2
    assert set(tests["analysis"]) == {"overhead", "sensitivity", "interference"}
    assert tests["test"].str.contains("t-test|ANOVA|F-test").all()
    assert ((tests["q (BH)"] >= tests["p"] - 1e-12) & (tests["q (BH)"] <= 1)).all()


def test_the_seed_report_writes_summary_stats_plots_and_html(seed_report):
    out = seed_report.out_dir
    drawn = {p.name for p in seed_report.plots if p.path is not None}
    assert drawn == {"efficiency", "slowdown_heatmap", "energy_solo_vs_concurrent", "pareto",
                     "sensitivity_learning_rate_energy", "sensitivity_learning_rate_perf",
                     "sensitivity_epochs_energy", "sensitivity_epochs_perf"}
    vram = next(p for p in seed_report.plots if p.name == "vram")
    assert vram.skipped and "the predecessor's CSV has no memory column" in vram.skipped
    for name in drawn:
        assert (out / "plots" / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with open(out / "summary.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    header = list(rows[0])
    assert len(rows) == 1225
    assert header[:5] == ["experiment_id", "timestamp", "repository", "model", "mode"]
    assert header.index("energy_gpu_total_joules") < header.index("fg_slowdown") < header.index("in_analysis")
    parallel = next(r for r in rows if r["experiment_id"] == "default__VulBERTa_mlp_013_parallel")
    assert (parallel["mode"], parallel["repository"], parallel["model"]) == ("parallel", "VulBERTa", "mlp")
    assert (parallel["bg_repository"], parallel["bg_model"]) == ("examples", "mnist")
    assert parallel["pair"] == "vulberta_mlp+mnist" and parallel["slowdown_basis"] == "same_hparams"
    assert float(parallel["duration_seconds"]) == pytest.approx(3765.577875)
    page = (out / "report.html").read_text()
    assert page.count("src='data:image/png;base64,") == len(drawn)
    assert "http://" not in page and "https://" not in page and "<script" not in page
    assert "Not drawn: no input records a peak VRAM" in page


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


IMAGE_CHECK = ("<script>window.addEventListener('load',function(){document.body.setAttribute('data-image-check',"
               "JSON.stringify([].map.call(document.images,function(i){var b=i.getBoundingClientRect(),"
               "s=getComputedStyle(i);return [i.getAttribute('data-plot'),i.complete,i.naturalWidth,i.naturalHeight,"
               "b.width,b.height,s.visibility,s.display];})));});</script></body>")


@pytest.fixture(scope="module")
def h100_report(tmp_path_factory) -> Path:
    from pytest_gpu_pairs.analysis.report.build import build_report

    return build_report([BENCH, RUN_DIR], tmp_path_factory.mktemp("h100-report")).out_dir / "report.html"


def _rendered_images(browser: str, page: Path, tmp_path: Path) -> list:
    """Every <img> of ``page`` as Chromium sees it after loading: name, loaded, natural and shown size, style."""
    probe = tmp_path / "probe.html"
    probe.write_text(page.read_text().replace("</body>", IMAGE_CHECK))
    result = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
         "--virtual-time-budget=10000", "--dump-dom", probe.as_uri()],
        capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(tmp_path)})
    assert result.returncode == 0, result.stderr[-2000:]
    marker = 'data-image-check="'
    assert marker in result.stdout, result.stdout[:500]
    return json.loads(result.stdout.split(marker, 1)[1].split('"', 1)[0].replace("&quot;", '"'))


@pytest.mark.parametrize("which", ["committed seed report", "H100 records"])
def test_headless_chromium_shows_every_plot(which, h100_report, tmp_path):
    """The committed seed report draws every seed-measurable figure; the H100 records add the VRAM one."""
    browser = _chromium()
    if browser is None:
        pytest.skip("no Chromium installed (apt-get install chromium): the HTML rendering check needs a browser")
    page = REPO / "reports" / "reference" / "predecessor" / "report.html" if which.startswith("committed") else h100_report
    expected = {"committed seed report": 8, "H100 records": 4}[which]
    images = _rendered_images(browser, page, tmp_path)
    assert len(images) == expected == page.read_text().count("src='data:image/png;base64,")
    for name, complete, width, height, box_w, box_h, visibility, display in images:
        assert complete and width > 0 and height > 0, name
        assert box_w > 0 and box_h > 0 and visibility == "visible" and display != "none", name


def test_collect_rebuilds_the_committed_predecessor_report(seed_report):
    """`gpu-pairs study collect predecessor` makes these files; the study's other tests are in tests/unit/studies."""
    from pytest_gpu_pairs.studies.declaration import find_study

    committed = REPO / "reports" / "reference" / "predecessor"
    for file in find_study("predecessor").summary_files:
        difference = differs_beyond_last_digits(seed_report.out_dir / file, committed / file)
        assert difference is None, \
            f"reports/reference/predecessor/{file} is not what `gpu-pairs study collect predecessor` makes: {difference}"


def test_the_committed_seed_report_is_what_the_code_makes_today(seed_report):
    """reports/reference/predecessor/ must be regenerated when the analysis changes (docs/reports.md gives the command)."""
    import pandas as pd

    committed = REPO / "reports" / "reference" / "predecessor"
    stats = [pd.read_csv(folder / "stats.csv") for folder in (committed, seed_report.out_dir)]
    pd.testing.assert_frame_equal(*stats, rtol=1e-9)  # the same tests and figures, to the last digits a BLAS keeps
    ours = pd.read_csv(seed_report.out_dir / "summary.csv", low_memory=False).drop(columns="source")
    theirs = pd.read_csv(committed / "summary.csv", low_memory=False).drop(columns="source")
    pd.testing.assert_frame_equal(ours, theirs)
    assert sorted(p.name for p in (committed / "plots").iterdir()) == sorted(
        p.path.name for p in seed_report.plots if p.path is not None)
