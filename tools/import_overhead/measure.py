"""What installing the plugin costs an unrelated project's pytest run: the wall time of
``pytest -q`` on a one-test project, median of N runs, with the plugin loaded and with
``-p no:gpu_pairs``, alternating so drift falls on both sides; and the package modules pytest
imported at plugin load (``-X importtime``).

    python -m tools.import_overhead.measure [--runs 10]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _run(folder: Path, *extra: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra], cwd=folder,
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


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
        modules = _package_imports(folder)
    return {"runs": runs, "median_with_plugin_s": statistics.median(loaded),
            "median_without_plugin_s": statistics.median(without),
            "difference_ms": 1000 * (statistics.median(loaded) - statistics.median(without)),
            "package_modules_imported": modules, "cpus": os.cpu_count()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    print(json.dumps(measure(parser.parse_args().runs), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
