"""The teardown study's evidence (teardown_evidence.jsonl from tools/teardown/run_on_gpu.sh) as a
table; with ``--markdown OUT.md`` also written as the committed reference report
(reports/reference/teardown/teardown.md).

Usage: python tools/teardown/summary.py EVIDENCE.jsonl [--markdown OUT.md]
"""
import argparse
import json
from pathlib import Path


def load(path):
    entries = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    return {e["label"]: e for e in entries}


def rows(ev):
    idle = ev["idle_before"]["mem_used_mb"]
    table = [("phase", "pytest exit", "compute procs", "mem used MB", "job procs", "verdict")]
    table.append(("idle, before", "-", str(len(ev["idle_before"]["compute_processes"])), f"{idle:.0f}",
                  str(len(ev["idle_before"]["job_processes"])), "baseline"))
    for label, exit_label in (("during_case_t02", None), ("after_fg_oom", "pytest_exit_part1"),
                              ("after_sigterm", "pytest_exit_part2")):
        e = ev.get(label)
        if e is None:
            table.append((label, "-", "-", "-", "-", "MISSING"))
            continue
        verdict = ("held (expected)" if "idle_reached" not in e else
                   f"OK, idle after {e['waited_s']} s" if e["idle_reached"] else "NOT IDLE")
        exit_code = str(ev.get(exit_label, {}).get("exit", "-")) if exit_label else "-"
        table.append((label, exit_code, str(len(e["compute_processes"])), f"{e['mem_used_mb']:.0f}",
                      str(len(e["job_processes"])), verdict))
    return table


def results(ev):
    return [f"{k[len('result_'):]}: " + json.dumps({x: y for x, y in v.items() if x != "label"})
            for k, v in ev.items() if k.startswith("result_")]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("evidence")
    p.add_argument("--markdown", metavar="OUT.md")
    args = p.parse_args()
    ev = load(args.evidence)
    table = rows(ev)
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    for r in table:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))
    for line in results(ev):
        print(line)
    if args.markdown:
        md = ["# Teardown on the GPU (tools/teardown/run_on_gpu.sh)", "",
              "NVML state of the card before, during and after two fault cases: a foreground that runs out of "
              "CUDA memory under a background holding 60 % of the card, and SIGTERM to pytest while a case trains.",
              "", "| " + " | ".join(table[0]) + " |", "|" + "---|" * len(table[0])]
        md += ["| " + " | ".join(r) + " |" for r in table[1:]]
        md += ["", "Case results:", ""] + [f"- `{line}`" for line in results(ev)]
        Path(args.markdown).write_text("\n".join(md) + "\n")


if __name__ == "__main__":
    main()
