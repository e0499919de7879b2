"""``gpu-pairs workloads``: the built-in workloads with their size, input, defaults and epoch length.

Everything comes from the torch-free catalog; ``--measure`` builds each model in a process of its
own (``python -m pytest_gpu_pairs.workloads.params``, which imports torch; this module never does)
and prints the counted parameters beside the catalog's. ``--workloads-file`` adds the command
workloads of a workloads file (the predecessor's models_config.json or a native one).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from typing import Any, Optional

from pytest_gpu_pairs.catalog import BUILTINS, BuiltinWorkload


def _millions(count: Optional[int]) -> str:
    return "-" if count is None else f"{count / 1e6:.2f}M" if count >= 1e5 else f"{count:,}"


def builtin_row(info: BuiltinWorkload, measured: Optional[int] = None) -> dict[str, Any]:
    row = {"name": info.name, "family": info.family, "seed": f"{info.seed_repo}/{info.seed_model}",
           "params": info.param_count, "input_shape": list(info.input_shape), "dataset": info.dataset,
           "steps_per_epoch": info.steps_per_epoch(), "defaults": info.defaults(),
           "metrics": list(info.metrics), "cpu_only": info.cpu_only, "seed_vram_mb": info.seed_vram_mb}
    if measured is not None:
        row["measured_params"] = measured
    return row


COUNTER = "pytest_gpu_pairs.workloads.params"


def measure_params(names: list[str]) -> dict[str, Optional[int]]:
    """Each model built and counted in a job process (torch stays out of this one);
    ``RuntimeError`` with the counter's last line when it fails."""
    done = subprocess.run([sys.executable, "-m", COUNTER, *names], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"counting parameters failed (exit code {done.returncode}): {last}")
    counts = json.loads(done.stdout)
    return {name: counts.get(name) for name in names}


def table(rows: list[dict[str, Any]]) -> str:
    header = ["workload", "family", "params", "input", "steps/epoch", "defaults"]
    if any("measured_params" in r for r in rows):
        header.insert(3, "measured")
    lines = []
    for r in rows:
        cells = [r["name"] + (" (cpu)" if r["cpu_only"] else ""), r["family"], _millions(r["params"])]
        if "measured" in header:
            cells.append(_millions(r.get("measured_params")))
        cells += ["x".join(map(str, r["input_shape"])), str(r["steps_per_epoch"]),
                  " ".join(f"{k}={v}" for k, v in r["defaults"].items() if k != "seed")]
        lines.append(cells)
    widths = [max(len(str(c)) for c in col) for col in zip(header, *lines)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([fmt.format(*header)] + [fmt.format(*c) for c in lines])


def command_rows(path: str) -> list[dict[str, Any]]:
    from pytest_gpu_pairs.experiment.load import load_workloads_file

    return [{"name": name, "command": w.command, "cwd": w.cwd, "defaults": w.defaults(),
             "metrics": sorted(w.log_patterns)} for name, w in load_workloads_file(path).items()]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--measure", action="store_true",
                        help="build every model (imports torch) and show its counted parameters")
    parser.add_argument("--workloads-file", metavar="PATH", help="also list the command workloads of this file")


def run(args: argparse.Namespace) -> int:
    try:
        measured = measure_params(list(BUILTINS)) if args.measure else {}
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    rows = [builtin_row(info, measured.get(name)) for name, info in BUILTINS.items()]
    commands = []
    if args.workloads_file:
        from pytest_gpu_pairs.inputs import SettingsError
        try:
            commands = command_rows(args.workloads_file)
        except SettingsError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    if args.json:
        print(json.dumps({"builtin": rows, "command": commands}, indent=2))
        return 0
    print(table(rows))
    for c in commands:
        print(f"{c['name']}: {' '.join(c['command'])} (cwd {c['cwd']}); defaults {c['defaults']}; metrics {c['metrics']}")
    return 0
