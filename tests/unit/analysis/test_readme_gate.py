"""The sharing gate the README gives passes between sessions of unchanged code on one machine and
fails on a real change, on the project's own recorded sessions: the H100 study's three sessions of
one commit (and its heavier background), and two sessions of the README's first command on the
2-core CPU machine (tests/data/cpu_first_run)."""
from __future__ import annotations

import itertools
import re
import shlex

import pytest
from support.helpers import DATA, REPO

from pytest_gpu_pairs.analysis.compare import compare_runs, parse_thresholds
from pytest_gpu_pairs.record.store import load_run

H100_SESSIONS = REPO / "reports" / "reference" / "default_method" / "g01-sessions-88fe928"
CPU_SESSIONS = DATA / "cpu_first_run"


def readme_gate() -> tuple[list[str], str]:
    """The README's gate command: its words, and the value of --gpu-pairs-compare-fail."""
    [line] = [line for line in (REPO / "README.md").read_text().splitlines()
              if line.startswith("pytest benchmarks") and "--gpu-pairs-compare-fail" in line]
    words = shlex.split(line)
    return words, words[words.index("--gpu-pairs-compare-fail") + 1]


def test_the_readme_gates_with_gpu_pairs_compare_not_with_pytest_benchmarks_means():
    words, fail = readme_gate()
    assert "--gpu-pairs-compare" in words and not any(w.startswith("--benchmark-compare-fail") for w in words)
    assert [t.metric for t in parse_thresholds(fail)] == ["concurrency_efficiency"]
    assert not re.search(r"--benchmark-compare-fail=mean:5%`[^.]*judges the sharing", (REPO / "README.md").read_text())


@pytest.mark.parametrize("folder, sessions", [(H100_SESSIONS, ["session-1.json", "session-2.json", "session-3.json"]),
                                              (CPU_SESSIONS, ["session-1", "session-2"])])
def test_the_readme_gate_passes_between_sessions_of_unchanged_code(folder, sessions):
    thresholds = parse_thresholds(readme_gate()[1])
    for base, new in itertools.permutations(sessions, 2):
        comparison = compare_runs(load_run(folder / base), load_run(folder / new), thresholds)
        assert comparison.rows and not comparison.failed, (base, new, [r.status for r in comparison.rows])


def test_the_readme_gate_fails_on_a_heavier_background():
    comparison = compare_runs(load_run(H100_SESSIONS / "session-1.json"), load_run(H100_SESSIONS / "session-heavy.json"),
                              parse_thresholds(readme_gate()[1]))
    assert comparison.failed and comparison.regressions
