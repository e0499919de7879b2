"""The measurement study's report: collate a GPU run's results, render them, publish them.

  python tools/measurement/report.py collate RESULTS_DIR --out DIR   (on the GPU machine)
      RESULTS_DIR holds what tools/measurement/run_on_gpu.sh produced; writes
      DIR/measurement.json and DIR/measurement.md
  python tools/measurement/report.py publish FETCHED_DIR             (on your machine, after the run)
      copies FETCHED_DIR/measurement.json to reports/reference/measurement/ and renders
      measurement.md there

Every figure comes from a file of the run; a part that did not run is null with the reason.
"""
from __future__ import annotations

import argparse
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Optional

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "reports" / "reference" / "measurement"
CASE_KEYS = ("case_id", "fg_model", "bg_model", "fg_hparams", "bg_hparams", "window_s", "fg_duration_s",
             "fg_solo_duration_s", "fg_slowdown", "bg_progress_ratio", "concurrency_efficiency", "idle_power_w",
             "gpu_energy_j", "gpu_energy_above_idle_j", "fg_gpu_energy_j", "bg_gpu_energy_j", "energy_split_method",
             "cpu_energy_j", "cpu_energy_method", "gpu_power_avg_w", "peak_vram_mb", "fg_peak_vram_mb", "bg_peak_vram_mb",
             "fg_peak_mem_reserved_mb", "bg_peak_mem_reserved_mb", "oom", "failure", "gpu_memory_mb", "ballast_held_mb",
             "gpu_free_mb_emulated", "notes")


def _load(path: Path) -> tuple[Optional[Any], Optional[str]]:
    try:
        return json.loads(path.read_text()), None
    except FileNotFoundError:
        return None, f"{path.name} was not produced (that step did not run or failed; see the logs)"
    except json.JSONDecodeError as exc:
        return None, f"{path}: not valid JSON ({exc})"


def junit_outcomes(path: Path) -> list[dict[str, Any]]:
    """One entry per test case of a JUnit XML file: name, outcome and the message of a failure."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return []
    found = []
    for case in root.iter("testcase"):
        if not case.get("name"):
            continue  # an interrupted session's placeholder, not a test
        outcome, message = "passed", None
        for kind in ("failure", "error", "skipped"):
            child = case.find(kind)
            if child is not None:
                outcome, message = {"failure": "failed", "error": "error", "skipped": "skipped"}[kind], \
                    (child.get("message") or child.text or "")[:600]
                break
        found.append({"name": case.get("name"), "outcome": outcome, "message": message})
    return found


def case_results(out_dir: Path) -> list[dict[str, Any]]:
    records = []
    for path in sorted(out_dir.glob("*/result.json")):
        data, _ = _load(path)
        if data:
            records.append({k: data.get(k) for k in CASE_KEYS})
    return records


def exit_code(path: Path) -> Optional[int]:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def pytest_run(out_dir: Path, junit: Path) -> dict[str, Any]:
    session, _ = _load(out_dir / "session.json")
    return {"exit_code": exit_code(junit.with_name(junit.name.replace(".junit.xml", ".exit"))),
            "tests": junit_outcomes(junit), "cases": case_results(out_dir),
            "idle_power_w": (session or {}).get("idle_power_w"), "idle_method": (session or {}).get("idle_method"),
            "gpu": (session or {}).get("gpu")}


def _oom_seen(run: dict[str, Any]) -> bool:
    texts = [t.get("message") or "" for t in run["tests"]] + [c.get("failure") or "" for c in run["cases"]]
    return any(c.get("oom") for c in run["cases"]) or any("out of memory" in t.lower() or "OOM" in t for t in texts)


def collate(results: Path) -> dict[str, Any]:
    steady, steady_missing = _load(results / "steady" / "steady.json")
    overhead, overhead_missing = _load(results / "overhead" / "overhead.json")
    probe, _ = _load(results / "oom" / "probe.json")
    pair = pytest_run(results / "pair", results / "pair.junit.xml")
    full = pytest_run(results / "oom" / "full", results / "oom" / "full.junit.xml")
    small = pytest_run(results / "oom" / "small", results / "oom" / "small.junit.xml")
    notes = {k: v for k, v in (("steady_load", steady_missing), ("monitoring_overhead", overhead_missing)) if v}
    worst = None
    if steady:
        rel = steady["relative_to_counter"].get("instant_10hz")
        worst = abs(rel) if rel is not None else None
    measured = [c for c in pair["cases"] if c.get("fg_gpu_energy_j") is not None]
    targets = {
        "counter_vs_instant_10hz_within_1pct": worst < 0.01 if worst is not None else None,
        "monitoring_slowdown_under_1pct": _resolved_below(overhead["slowdown_pct"], overhead["slowdown_se_pct"], 1.0)
        if overhead else None,
        "pair_split_sums_to_energy_above_idle": all(
            c["fg_gpu_energy_j"] + c["bg_gpu_energy_j"] == c["gpu_energy_above_idle_j"] for c in measured)
        if measured else None,
        "small_card_pair_fails_with_oom": _oom_seen(small) and any(t["outcome"] == "failed" for t in small["tests"])
        if small["tests"] else None,
        "same_pair_passes_on_full_card": all(t["outcome"] == "passed" for t in full["tests"]) if full["tests"] else None,
    }
    return {"study": "measurement", "device": (steady or {}).get("device") or pair.get("gpu"), "steady_load": steady,
            "monitoring_overhead": overhead, "pair_energy": pair, "small_card": {"probe": probe, "full_card": full,
                                                                                 "emulated_10240_mb": small},
            "targets": targets, "notes": notes}


def _resolved_below(value_pct: float, se_pct: float, limit_pct: float):
    """True only when the whole two-standard-error interval lies under the limit; "unresolved" when
    the point estimate does but the noise is too large to tell; False when it does not."""
    if value_pct + 2 * se_pct < limit_pct:
        return True
    return "unresolved (noise)" if value_pct < limit_pct else False


def _f(value: Any, fmt: str = "{:.1f}") -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return fmt.format(value) if isinstance(value, (int, float)) else str(value)


def _pct(value: Optional[float]) -> str:
    return "–" if value is None else f"{100 * value:+.2f} %"


def render(m: dict[str, Any]) -> str:
    device = m.get("device") or {}
    lines = ["# Measurement reference", "",
             f"Device: {device.get('name', 'unknown')}, driver {device.get('driver', '?')}, "
             f"CUDA {device.get('cuda_driver_version', '?')}, {_f(device.get('memory_total_mb'), '{:.0f}')} MB.", ""]
    s = m.get("steady_load")
    lines += ["## Energy counter vs polled power (steady matmul load)", ""]
    if s:
        lines += [f"Window {s['window_s']:.1f} s after {s['settle_s']:.0f} s settling; idle power "
                  f"{_f(s['idle_power_w'])} W; counter energy {_f(s['counter_energy_j'])} J "
                  f"({_f(s['counter_power_w'])} W mean); the counter advances every "
                  f"{_f(s['counter_update_period_ms'])} ms.", "",
                  "| integrated from | energy J | vs counter |", "| --- | ---: | ---: |"]
        for key, joules in s["integrated_j"].items():
            lines.append(f"| {key.replace('_', ' ')} | {_f(joules)} | {_pct(s['relative_to_counter'][key])} |")
    else:
        lines.append(f"Not measured: {m['notes'].get('steady_load')}")
    o = m.get("monitoring_overhead")
    lines += ["", "## Step-time cost of monitoring at 10 Hz (A/B interleaved)", ""]
    if o:
        off, on = o["steps_per_s_off"], o["steps_per_s_on"]
        lines += [f"{o['model']} training, {off['n']} blocks off and {on['n']} on of {o['block_s']:.0f} s "
                  f"(order {' '.join(o['order'])}); one sample of everything takes {_f(o['sampler_tick_ms'], '{:.2f}')} ms.",
                  "", "| sampler | steps/s mean | std | step ms |", "| --- | ---: | ---: | ---: |",
                  f"| off | {off['mean']:.2f} | {off['std']:.2f} | {o['step_ms_off']:.3f} |",
                  f"| on | {on['mean']:.2f} | {on['std']:.2f} | {o['step_ms_on']:.3f} |", "",
                  f"Slowdown with the sampler: {o['slowdown_pct']:+.2f} % ± {o['slowdown_se_pct']:.2f} % (standard error)."]
    else:
        lines.append(f"Not measured: {m['notes'].get('monitoring_overhead')}")
    lines += ["", "## Per-job energy of one pair", ""]
    for c in m["pair_energy"]["cases"]:
        lines += [f"`{c['case_id']}` (window {_f(c['window_s'])} s, idle {_f(c['idle_power_w'])} W): "
                  f"GPU {_f(c['gpu_energy_j'])} J, above idle {_f(c['gpu_energy_above_idle_j'])} J = "
                  f"fg {_f(c['fg_gpu_energy_j'])} J + bg {_f(c['bg_gpu_energy_j'])} J "
                  f"(split: {c['energy_split_method']}); peak VRAM {_f(c['peak_vram_mb'], '{:.0f}')} MB "
                  f"(fg {_f(c['fg_peak_vram_mb'], '{:.0f}')}, bg {_f(c['bg_peak_vram_mb'], '{:.0f}')}; torch reserved "
                  f"fg {_f(c['fg_peak_mem_reserved_mb'], '{:.0f}')}, bg {_f(c['bg_peak_mem_reserved_mb'], '{:.0f}')}); "
                  f"CPU energy {_f(c['cpu_energy_j'])} ({(c.get('notes') or {}).get('cpu_energy_j', 'RAPL')})."]
    if not m["pair_energy"]["cases"]:
        lines.append("Not measured: the pair produced no result.json (see pair.log in the results archive).")
    small = m["small_card"]
    probe = small.get("probe") or {}
    lines += ["", "## A pair that fits 80 GB but not 10 GB (`--gpu-pairs-gpu-memory-mb 10240`)", "",
              f"resnet20 + resnet20 at batch {probe.get('batch_size', '?')} ({probe.get('how', 'no probe')}).", "",
              "| card | pytest exit | test outcome | oom | peak VRAM MB | ballast held MB | free for jobs MB | failure |",
              "| --- | ---: | --- | --- | ---: | ---: | ---: | --- |"]
    for label, run in (("80 GB (full)", small["full_card"]), ("10240 MB (emulated)", small["emulated_10240_mb"])):
        case = run["cases"][0] if run["cases"] else {}
        test = run["tests"][0] if run["tests"] else {}
        failure = (case.get("failure") or test.get("message") or "").replace("|", "/").replace("\n", " ")[:200]
        lines.append(f"| {label} | {_f(run.get('exit_code'), '{}')} | {test.get('outcome', 'did not run')} | "
                     f"{_f(case.get('oom'))} | "
                     f"{_f(case.get('peak_vram_mb'), '{:.0f}')} | {_f(case.get('ballast_held_mb'), '{:.0f}')} | "
                     f"{_f(case.get('gpu_free_mb_emulated'), '{:.0f}')} | {failure or '–'} |")
    lines += ["", "## Targets", "", "| target | met |", "| --- | --- |"]
    lines += [f"| {k.replace('_', ' ')} | {_f(v)} |" for k, v in m["targets"].items()]
    return "\n".join(lines) + "\n"


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("collate")
    p.add_argument("results", type=Path)
    p.add_argument("--out", type=Path, required=True)
    p = sub.add_parser("publish")
    p.add_argument("fetched", type=Path)
    p.add_argument("--to", type=Path, default=REFERENCE)
    args = parser.parse_args(argv)
    if args.command == "collate":
        measurement = collate(args.results)
        target = args.out
    else:
        measurement, problem = _load(args.fetched / "measurement.json")
        if measurement is None:
            print(f"{args.fetched / 'measurement.json'}: $: expected the measurement JSON of a device run ({problem})",
                  file=sys.stderr)
            return 2
        target = args.to
    target.mkdir(parents=True, exist_ok=True)
    (target / "measurement.json").write_text(json.dumps(measurement, indent=1, sort_keys=True, default=str) + "\n")
    (target / "measurement.md").write_text(render(measurement))
    print(render(measurement))
    return 0


if __name__ == "__main__":
    sys.exit(main())
