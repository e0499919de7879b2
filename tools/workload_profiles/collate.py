"""Turn the GPU run's ``workload_profiles_raw.json`` into the committed reference files.

    python tools/workload_profiles/collate.py RAW_JSON_OR_RESULTS_TGZ [--out-dir reports/reference/workload_profiles]

writes ``workload_profiles.json`` (the raw record, unchanged in substance) and
``workload_profiles.md`` (a table per workload and a closing note comparing the measured peak
VRAM, from NVML and from torch, with the predecessor tool's estimates). Also used on the GPU
machine (tools/workload_profiles/run_on_gpu.sh) to print the summary table.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tarfile
from pathlib import Path


def _load(path: Path) -> dict:
    if path.suffix in (".tgz", ".gz"):
        with tarfile.open(path) as tar:
            member = next(m for m in tar.getmembers() if m.name.endswith("workload_profiles_raw.json"))
            return json.load(tar.extractfile(member))
    return json.loads(path.read_text())


def _f(value, digits: int = 0) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.{digits}f}"


def _metric(metrics: dict | None) -> str:
    if not metrics:
        return "n/a"
    key = next(iter(metrics))
    return f"{key} {metrics[key]:.3g}"


def table(report: dict) -> str:
    head = ("| workload | step ms | samples/s | util % | power W | J/step | J/epoch (extrap.) | epoch s (extrap.) "
            "| peak VRAM NVML MB | torch reserved MB | predecessor's estimate MB | untrained -> trained |")
    rows = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in report["workloads"]:
        if not r.get("ok"):
            rows.append(f"| {r['model']} | failed: {r.get('error', '?')[:80]} |" + " |" * 10)
            continue
        step_ms = r["step_time_s"] * 1000 if r.get("step_time_s") else None
        rows.append(" | ".join([
            f"| {r['model']}" + (" (cpu)" if r.get("device") == "cpu" else ""), _f(step_ms, 1), _f(r.get("samples_per_s")),
            _f(r.get("util_avg_pct")), _f(r.get("power_avg_w")), _f(r.get("energy_per_step_j"), 2),
            _f(r.get("energy_per_epoch_j")), _f(r.get("epoch_time_s")), _f(r.get("peak_vram_nvml_mb")),
            _f(r.get("torch_peak_reserved_mb")), _f(r.get("seed_vram_mb")),
            f"{_metric(r.get('metrics_untrained'))} -> {_metric(r.get('metrics_trained'))} |"]))
    return "\n".join(rows)


def vram_note(report: dict) -> str:
    pairs = [(r["model"], r.get("peak_vram_nvml_mb"), r.get("torch_peak_reserved_mb"), r.get("seed_vram_mb"))
             for r in report["workloads"] if r.get("ok") and r.get("seed_vram_mb")]
    nvml = [(m, n / s) for m, n, _, s in pairs if n]
    torch = [(m, t / s) for m, _, t, s in pairs if t]
    lines = ["## Peak VRAM against the predecessor's estimates", ""]
    if not nvml:
        return "\n".join(lines + ["No NVML per-process memory was measured."])
    lines.append(f"NVML per-process peak / predecessor's estimate: median {statistics.median(v for _, v in nvml):.2f}x, "
                 f"range {min(v for _, v in nvml):.2f}x ({min(nvml, key=lambda x: x[1])[0]}) to "
                 f"{max(v for _, v in nvml):.2f}x ({max(nvml, key=lambda x: x[1])[0]}).")
    if torch:
        lines.append(f"torch max reserved / predecessor's estimate: median {statistics.median(v for _, v in torch):.2f}x.")
    over = [m for m, v in nvml if v > 1.0]
    lines.append(f"Above the predecessor's estimate (NVML): {', '.join(over) if over else 'none'}. The predecessor's figures are "
                 "guesses from its planning script (scripts/analyze_model_pair_sampling.py of the predecessor tool's repository), "
                 "not measurements; bug_localization's 1 800 MB was estimated for a job that never uses the GPU.")
    return "\n".join(lines)


def markdown(report: dict) -> str:
    device = report.get("device", {})
    return "\n\n".join([
        "# Solo workload profiles",
        f"Device: {device.get('name')} ({_f(device.get('memory_total_mb'))} MB, driver {device.get('driver')}); "
        f"idle power {_f(report.get('idle_power_w'), 1)} W; {report.get('seconds')} s timed per workload after "
        f"{report.get('warmup_s')} s warm-up; total {_f(report.get('total_s'))} s.",
        f"Method: {report.get('method')}.",
        table(report), vram_note(report)]) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("raw")
    parser.add_argument("--out-dir", default="reports/reference/workload_profiles")
    parser.add_argument("--print-only", action="store_true")
    args = parser.parse_args(argv)
    report = _load(Path(args.raw))
    if args.print_only:
        print(table(report))
        print(vram_note(report))
        return 0
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "workload_profiles.json").write_text(json.dumps(report, indent=1) + "\n")
    (out / "workload_profiles.md").write_text(markdown(report))
    print(f"wrote {out / 'workload_profiles.json'} and {out / 'workload_profiles.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
