"""What is on the GPU now, as one JSON line: compute processes, memory used, and any live job
process of the harness (``GPU_PAIRS_JOB`` in its environment). ``--wait-idle MB`` polls up to
``--timeout`` seconds for no compute process and memory used at most MB (the driver frees a dead
process's memory within moments); the line says whether it got there."""
import argparse
import json
import time

import psutil
import pynvml as n


def job_processes() -> list[int]:
    found = []
    for process in psutil.process_iter():
        try:
            if "GPU_PAIRS_JOB" in process.environ() and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process.pid)
        except psutil.Error:
            continue
    return found


def state(handle) -> dict:
    procs = n.nvmlDeviceGetComputeRunningProcesses(handle)
    return {"t": time.time(), "mem_used_mb": round(n.nvmlDeviceGetMemoryInfo(handle).used / 2**20, 1),
            "compute_processes": [[p.pid, (p.usedGpuMemory or 0) / 2**20] for p in procs],
            "job_processes": job_processes()}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--label", required=True)
    p.add_argument("--wait-idle", type=float, default=None, metavar="MB")
    p.add_argument("--timeout", type=float, default=15.0)
    args = p.parse_args()
    n.nvmlInit()
    handle = n.nvmlDeviceGetHandleByIndex(0)
    started = time.time()
    now = state(handle)
    if args.wait_idle is not None:
        while time.time() - started < args.timeout and (now["compute_processes"] or now["job_processes"]
                                                         or now["mem_used_mb"] > args.wait_idle):
            time.sleep(0.25)
            now = state(handle)
        now["idle_reached"] = not (now["compute_processes"] or now["job_processes"]) \
            and now["mem_used_mb"] <= args.wait_idle
        now["waited_s"] = round(time.time() - started, 2)
    print(json.dumps({"label": args.label, **now}))


if __name__ == "__main__":
    main()
