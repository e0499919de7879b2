"""What a job's log says: out-of-memory messages and the metrics of a command workload.

The harness writes its own header and footer lines into every log (start time, argv, exit code);
they quote the argv, which may contain anything, so they are never scanned.
"""
from __future__ import annotations

import os
import re
import signal
from typing import Any, Optional

from pytest_gpu_pairs.patterns import compile_pattern
from pytest_gpu_pairs.protocol import Progress

OOM_PATTERN = re.compile(
    r"CUDA out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED"
    r"|cudaErrorMemoryAllocation|CUDA error: out of memory|RESOURCE_EXHAUSTED: Out of memory"
    r"|DefaultCPUAllocator: can't allocate memory|HIP out of memory")
HARNESS_LINE = "# gpu-pairs:"
LOG_TAIL_BYTES = 256 * 1024
SIGKILL_EXIT_CODES = (-signal.SIGKILL, 128 + signal.SIGKILL)


def _log_tail(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - LOG_TAIL_BYTES))
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _job_lines(text: str) -> str:
    """The job's own output: the harness's header and footer lines quote the argv, which may
    contain anything (a script called oom_test.py, a flag value), so they are never scanned."""
    return "\n".join(line for line in text.splitlines() if not line.startswith(HARNESS_LINE))


def detect_oom(log_path: str, progress: Progress, returncode: Optional[int] = None,
               killed_by_harness: bool = False) -> Optional[str]:
    """The out-of-memory message of a job: its progress error event, the messages PyTorch and
    CUDA print (in the log's last 256 KiB), or a SIGKILL that the harness did not send, which is
    what the kernel's OOM killer (host memory, a cgroup limit) does."""
    if progress.error and progress.error.get("oom"):
        return progress.error.get("message", "out of memory").strip().splitlines()[-1][:300]
    tail = _job_lines(_log_tail(log_path))
    found = OOM_PATTERN.search(tail)
    if found:
        line_start = tail.rfind("\n", 0, found.start()) + 1
        line_end = tail.find("\n", found.end())
        return tail[line_start:line_end if line_end >= 0 else None].strip()[:300]
    if returncode in SIGKILL_EXIT_CODES and not killed_by_harness:
        return ("killed by SIGKILL that the harness did not send: the signature of the kernel's OOM killer "
                "(host or cgroup memory)")
    return None


def _number_or_text(text: str) -> Any:
    try:
        return float(text)
    except ValueError:
        return text


def parse_log_metrics(log_path: str, patterns: dict[str, str]) -> dict[str, Any]:
    """Metrics of a command workload from its log: each pattern's first group at its last match,
    matched line by line (memory stays flat on a log of any size); a number where it parses."""
    if not patterns:
        return {}
    compiled = {name: compile_pattern(p) for name, p in patterns.items()}
    found: dict[str, Any] = {}
    try:
        with open(log_path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith(HARNESS_LINE):
                    continue
                for name, pattern in compiled.items():
                    match = pattern.search(line)
                    if match:
                        found[name] = _number_or_text(match.group(1).strip())
    except OSError:
        return {}
    return found
