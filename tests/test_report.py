"""``gpu-pairs report``: loading every input kind, the analysis rules, the written files, and the HTML
as headless Chromium renders it."""
import csv
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, strategies as st

from conftest import SEED
from pytest_gpu_pairs import cli

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data" / "h100"
BENCH, RUN_DIR = DATA / "slice_full_scale.json", DATA / "run"
SEED_HEADER = ("experiment_id,timestamp,repository,model,training_success,duration_seconds,hyperparam_epochs,"
               "hyperparam_learning_rate,hyperparam_seed,perf_test_accuracy,energy_gpu_total_joules,experiment_source,"
               "mode,error_message,fg_repository,fg_model,fg_duration_seconds,fg_training_success,"
               "fg_hyperparam_epochs,fg_hyperparam_learning_rate,fg_perf_test_accuracy,fg_energy_gpu_total_joules,"
               "bg_repository,bg_model")


def seed_csv(path: Path, rows: list[str]) -> Path:
    path.write_text(SEED_HEADER + "\n" + "\n".join(rows) + "\n")
    return path


@pytest.fixture(scope="module")
def seed_report(tmp_path_factory):
    """The full seed study, built once: the same command that made reports/seed-rtx3080/."""
    seed = SEED / "raw_data.csv"
    if not seed.exists():
        pytest.skip(f"seed data not found at {seed}")
    from pytest_gpu_pairs.analysis.report.build import build_report

    return build_report([seed], tmp_path_factory.mktemp("seed-report"), "seed", "NVIDIA GeForce RTX 3080")


def test_the_seed_csv_loads_with_its_runs_modes_and_duplicates(seed_dir):
    from pytest_gpu_pairs.analysis.report.load import load_runs

    loaded = load_runs([seed_dir / "raw_data.csv"])
    runs = loaded.runs
    assert len(runs) == 1225 and (runs["mode"] == "concurrent").sum() == 658
    assert set(runs["fg_model"]) <= {"mnist", "mnist_ff", "mnist_rnn", "siamese", "resnet20", "densenet121", "hrnet18",
                                     "pcb", "vulberta_mlp", "mrt_oast", "bug_localization"}
    assert loaded.duplicates == 227
    kept = runs.set_index("run_id").loc["mutation_2x_safe__MRT-OAST_default_075_parallel"]
    assert kept["bg_model"] == "mnist_rnn" and kept["campaign"] == "mutation_2x_safe" and kept["hp_epochs"] == 9
    assert kept["hp_learning_rate"] == 0.0001
    assert any("mrt_oast: 21 of 69 accuracy values are off the scale" in n for n in loaded.notes)


def test_slowdowns_match_solo_runs_of_the_same_hyperparameters_and_campaign(tmp_path):
    from pytest_gpu_pairs.analysis.report.analysis import add_solo_baselines, valid_runs
    from pytest_gpu_pairs.analysis.report.load import load_runs

    path = seed_csv(tmp_path / "raw.csv", [
        "a__solo1,,examples,mnist,True,100,10,0.01,1,98,1000,,,,,,,,,,,,,",
        "a__solo2,,examples,mnist,True,120,10,0.01,7,98,1200,,,,,,,,,,,,,",
        "a__solo3,,examples,mnist,True,50,5,0.01,1,97,500,,,,,,,,,,,,,",
        "b__solo1,,examples,mnist,True,10,10,0.01,1,98,100,,,,,,,,,,,,,",
        "a__par1,,,,,,,,,,,,parallel,,examples,mnist,165,True,,,98,3300,examples,siamese",
        "a__par2,,,,,,,,,,,,parallel,,examples,mnist,80,True,4,,97,1600,examples,siamese",
        "b__par1,,,,,,,,,,,,parallel,,examples,mnist,20,True,,,98,300,,",
        "a__par3,,,,,,,,,,,,parallel,,examples,mnist,90,True,,0.02,98,900,,",
    ])
    runs = add_solo_baselines(valid_runs(load_runs([path]).runs)).set_index("run_id")
    assert runs.loc["a__par1", "slowdown_basis"] == "same_hparams"
    assert runs.loc["a__par1", "fg_slowdown"] == pytest.approx(165 / 110)
    assert runs.loc["a__par1", "energy_ratio"] == pytest.approx(3300 / 1100)
    assert runs.loc["a__par2", "slowdown_basis"] == "per_epoch"
    assert runs.loc["a__par2", "fg_slowdown"] == pytest.approx(80 / (4 * (100 / 10 + 120 / 10 + 50 / 5) / 3))
    assert runs.loc["b__par1", "fg_slowdown"] == pytest.approx(2.0)
    assert math.isnan(runs.loc["a__par3", "fg_slowdown"])


def test_benchmark_json_and_run_dir_of_one_run_count_once():
    from pytest_gpu_pairs.analysis.report.load import load_runs

    loaded = load_runs([BENCH, RUN_DIR])
    assert len(loaded.runs) == 4 and loaded.duplicates == 2
    first = loaded.runs.iloc[0]
    assert first["gpu_name"] == "NVIDIA H100 80GB HBM3" and first["driver"] == "580.159.04"
    assert first["pair"] == "mnist_ff+resnet20" and first["perf_name"] == "test_accuracy"


@pytest.mark.parametrize("content, message", [(None, "expected a benchmark JSON file, a run directory"),
                                               ("a,b\n1,2\n", "expected the seed's raw_data.csv columns")])
def test_bad_inputs_are_one_clear_line(tmp_path, capsys, content, message):
    path = tmp_path / "in.csv"
    if content is not None:
        path.write_text(content)
    assert cli.main(["report", str(path), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {path}: ") and message in err and "\n" not in err


@given(points=st.lists(st.tuples(st.floats(0, 100), st.floats(0, 1)), min_size=1, max_size=40),
       higher=st.booleans())
def test_the_pareto_front_is_exactly_the_undominated_points(points, higher):
    from pytest_gpu_pairs.analysis.report.analysis import pareto_mask

    cost, value = np.array([p[0] for p in points]), np.array([p[1] for p in points])
    front = pareto_mask(cost, value, higher)
    sign = 1 if higher else -1

    def beats(j, i):
        return (cost[j] <= cost[i] and sign * value[j] >= sign * value[i]
                and (cost[j] < cost[i] or sign * value[j] > sign * value[i]))
    for i in range(len(points)):
        assert front[i] == (not any(beats(j, i) for j in range(len(points))))
    assert front.any()


def test_the_interaction_test_sees_a_changed_slope_and_not_an_equal_one():
    from pytest_gpu_pairs.analysis.report.analysis import interaction_test

    rng = np.random.default_rng(7)
    x = np.tile(np.linspace(1, 10, 12), 2)
    concurrent = np.repeat([False, True], 12)
    noise = rng.normal(0, 0.5, 24)
    same = 2 * x + 3 * concurrent + noise
    changed = np.where(concurrent, 5 * x, 2 * x) + noise
    f_same, p_same, n = interaction_test(x, same, concurrent)
    f_changed, p_changed, _ = interaction_test(x, changed, concurrent)
    assert n == 24 and p_changed < 1e-6 < 0.05 < p_same
    assert interaction_test(x[:5], same[:5], concurrent[:5]) is None


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
    assert vram.skipped and "the seed's CSV has no memory column" in vram.skipped
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


def test_our_records_draw_efficiency_and_vram_against_the_budget(tmp_path, capsys):
    assert cli.main(["report", str(BENCH), str(RUN_DIR), "-o", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "efficiency" in out and "vram" in out.split("plots:")[1].split("\n")[0]
    page = (tmp_path / "r" / "report.html").read_text()
    assert "NVIDIA H100 80GB HBM3" in page and "580.159.04" in page
    summary = (tmp_path / "r" / "summary.csv").read_text()
    assert "g01-mnist_ff+resnet20-default-concurrent" in summary and "1.4265" in summary


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
    page = REPO / "reports" / "seed-rtx3080" / "report.html" if which.startswith("committed") else h100_report
    expected = {"committed seed report": 8, "H100 records": 4}[which]
    images = _rendered_images(browser, page, tmp_path)
    assert len(images) == expected == page.read_text().count("src='data:image/png;base64,")
    for name, complete, width, height, box_w, box_h, visibility, display in images:
        assert complete and width > 0 and height > 0, name
        assert box_w > 0 and box_h > 0 and visibility == "visible" and display != "none", name


def test_the_plugin_and_the_command_line_parser_import_no_report_libraries():
    code = ("import sys, pytest_gpu_pairs.plugin\nfrom pytest_gpu_pairs import cli\ncli.build_parser()\n"
            "print(sorted(m for m in ('pandas', 'scipy', 'matplotlib') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "[]", result.stderr


def test_the_committed_seed_report_is_what_the_code_makes_today(seed_report):
    """reports/seed-rtx3080/ must be regenerated when the analysis changes (README gives the command)."""
    import pandas as pd

    committed = REPO / "reports" / "seed-rtx3080"
    assert (committed / "stats.csv").read_text() == (seed_report.out_dir / "stats.csv").read_text()
    ours = pd.read_csv(seed_report.out_dir / "summary.csv", low_memory=False).drop(columns="source")
    theirs = pd.read_csv(committed / "summary.csv", low_memory=False).drop(columns="source")
    pd.testing.assert_frame_equal(ours, theirs)
    assert sorted(p.name for p in (committed / "plots").iterdir()) == sorted(
        p.path.name for p in seed_report.plots if p.path is not None)


def test_a_pair_shared_through_mps_is_another_pair_than_time_sliced(tmp_path):
    from pytest_gpu_pairs.analysis.report.load import load_runs

    data = json.loads(BENCH.read_text())
    mps = json.loads(json.dumps(data["benchmarks"][0]))
    mps["extra_info"].update(case_id=mps["extra_info"]["case_id"] + "-mps", sharing="mps", fg_duration_s=18.0)
    data["benchmarks"].append(mps)
    path = tmp_path / "both.json"
    path.write_text(json.dumps(data))
    runs = load_runs([path]).runs
    assert list(runs["pair"]) == ["mnist_ff+resnet20", "mnist+resnet20", "mnist_ff+resnet20 [mps]"]
