"""What installing the plugin costs an unrelated project's pytest run: the wall time of
``pytest -q`` on a one-test project, median of N runs, with the plugin loaded and with
``-p no:gpu_pairs``, alternating so drift falls on both sides, as wall time and as the child's CPU
time (user + system: what a shared, busy machine disturbs least); the time to import the plugin
module in a fresh interpreter that has imported pytest; and the package modules pytest imported at
plugin load (``-X importtime``).

    python -m tools.import_overhead.measure [--runs 10]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(folder: Path, *extra: str) -> tuple[float, float]:
    """(wall s, CPU s) of one pytest run."""
    start, cpu = time.perf_counter(), _cpu_of_children()
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra], cwd=folder,
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start, _cpu_of_children() - cpu


def _plugin_import_s(folder: Path) -> float:
    code = ("import time, pytest; t = time.perf_counter(); import pytest_gpu_pairs.plugin.hooks; "
            "print(time.perf_counter() - t)")
    return float(subprocess.run([sys.executable, "-c", code], cwd=folder, capture_output=True, text=True,
                                check=True).stdout)


def _package_imports(folder: Path) -> list[str]:
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                            cwd=folder, capture_output=True, text=True, check=True)
    return [line.split("|")[-1].strip() for line in result.stderr.splitlines() if "pytest_gpu_pairs" in line]


def measure(runs: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "test_unrelated.py").write_text("def test_nothing():\n    pass\n")
        _run(folder)  # warm the file cache
        loaded, without = [], []
        for _ in range(runs):
            loaded.append(_run(folder))
            without.append(_run(folder, "-p", "no:gpu_pairs"))
        imports = [_plugin_import_s(folder) for _ in range(runs)]
        modules = _package_imports(folder)

    def median(values: list[tuple[float, float]], which: int) -> float:
        return statistics.median(v[which] for v in values)
    return {"runs": runs, "cpus": os.cpu_count(),
            "wall_median_with_plugin_s": median(loaded, 0), "wall_median_without_plugin_s": median(without, 0),
            "wall_difference_ms": 1000 * (median(loaded, 0) - median(without, 0)),
            "cpu_median_with_plugin_s": median(loaded, 1), "cpu_median_without_plugin_s": median(without, 1),
            "cpu_difference_ms": 1000 * (median(loaded, 1) - median(without, 1)),
            "plugin_module_import_median_ms": 1000 * statistics.median(imports),
            "package_modules_imported": modules}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    print(json.dumps(measure(parser.parse_args().runs), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
