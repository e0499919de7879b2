"""The suite as a newcomer runs it, without a method option: the repository's own first case on the
CPU, measured by interleaved rounds, with pytest-benchmark holding one value per round."""
import json
import os
import subprocess
import sys

from support.helpers import REPO, XDIST_WORKER_VARS, jobs_started_under

CASE = "g01-mnist_ff+resnet20-default-concurrent"


def standalone_env() -> dict[str, str]:
    """A user's own pytest run: without the variables of an outer pytest-xdist worker."""
    return {k: v for k, v in os.environ.items() if k not in XDIST_WORKER_VARS}


def test_the_first_case_of_the_suite_is_interleaved_by_default_with_real_benchmark_rounds(tmp_path):
    out, bench = tmp_path / "out", tmp_path / "bench.json"
    session = subprocess.Popen([sys.executable, "-m", "pytest", "benchmarks", "-k", "g01", "--gpu-pairs-scale", "0.01",
                                "--gpu-pairs-out", str(out), "--benchmark-json", str(bench), "-p", "no:cacheprovider",
                                "--gpu-pairs-max-case-s", "400",  # CI's other test worker shares the two cores
                                "--gpu-pairs-max-rounds", "2",  # the README's first run (.ci/readme) takes all three
                                "-p", "no:xdist", "-q"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, env=standalone_env())
    try:
        stdout, _ = session.communicate(timeout=600)
    finally:
        if session.poll() is None:
            session.terminate()  # SIGTERM: the harness ends its jobs (SIGKILL would orphan them)
            session.communicate()
    assert session.returncode == 0, stdout[-4000:]
    record = json.loads((out / CASE / "result.json").read_text())
    assert record["method"] == "interleaved" and len(record["concurrency_efficiency_ci"]) == 2
    [entry] = json.loads(bench.read_text())["benchmarks"]
    assert entry["stats"]["rounds"] >= 2 and entry["stats"]["stddev"] > 0
    assert entry["extra_info"]["case_id"] == CASE and entry["extra_info"]["case_wall_s"] > 0
    assert "E/serial" in stdout and "fg J/step" in stdout
    assert jobs_started_under(out) == []
