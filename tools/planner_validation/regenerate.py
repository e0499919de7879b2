"""Everything that reads the H200 reference set, written again after its pairs change: the package's
H200 tables, the reference validation, and every blind study's summary, including the runs kept in
folders of their own (a one-GPU host, an earlier host), whose collate no `study collect` of the
declared reference reaches. Their predictions come from the package's table, so a new reference
session moves them all; regenerating some and not others once left tables several sessions behind.

    python -m tools.planner_validation.regenerate            # from the repository root
    python -m tools.planner_validation.regenerate --dry-run  # the commands, not run

Each step is a command a user could type; the first that fails stops the rest, with its exit status.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VALIDATION = "reports/reference/planner_validation"
CLI = [sys.executable, "-m", "pytest_gpu_pairs.cli"]

# (study, folder): each declared study's reference, then the runs it keeps elsewhere
COLLECTED = (
    ("planner_validation", VALIDATION),
    ("planner_validation_unseen", f"{VALIDATION}/unseen"),
    ("planner_validation_groups", f"{VALIDATION}/groups"),
    ("planner_validation_groups_blind", f"{VALIDATION}/groups/blind"),
    ("planner_validation_groups_four", f"{VALIDATION}/groups/four"),
    ("planner_validation_heavy", f"{VALIDATION}/heavy"),
    ("planner_validation_random", f"{VALIDATION}/random"),
    ("planner_validation_random", f"{VALIDATION}/random/second-host"),
    ("planner_validation_random", f"{VALIDATION}/random/third-host"),
    ("planner_validation_contended", f"{VALIDATION}/contended"),
    ("planner_validation_contended", f"{VALIDATION}/contended/second-lease"),
    ("planner_validation_heavy", f"{VALIDATION}/heavy/one-gpu"),
    ("planner_validation_heavy", f"{VALIDATION}/heavy/one-gpu-timeslice"),
    ("planner_validation_host", f"{VALIDATION}/host"),
    ("planner_validation_host", f"{VALIDATION}/host/one-gpu"),
    ("planner_validation_host", f"{VALIDATION}/host/history/first-host"),
)


def commands() -> list[list[str]]:
    """In order: the tables the predictions read, the validation, then the studies."""
    return [
        [sys.executable, "-m", "tools.codegen.h200_tables"],
        [sys.executable, "-m", "tools.codegen.reference_pairs"],
        [*CLI, "plan-validate", "--card", "h200", "--out", f"{VALIDATION}/reference/validation"],
        *([*CLI, "study", "collect", study, "--out", folder] for study, folder in COLLECTED),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print the commands without running them")
    args = parser.parse_args(argv)
    for command in commands():
        print("$", " ".join(["python", *command[1:]]), flush=True)
        if args.dry_run:
            continue
        done = subprocess.run(command, cwd=ROOT, stdout=subprocess.DEVNULL)
        if done.returncode != 0:
            print(f"regenerate: stopped, exit {done.returncode}", file=sys.stderr)
            return done.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
