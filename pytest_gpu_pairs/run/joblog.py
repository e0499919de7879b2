"""What a job's log says: out-of-memory messages and the metrics of a command workload.

The harness writes its own header and footer lines into every log (start time, argv, exit code);
they quote the argv, which may contain anything, so they are never scanned.
"""
from __future__ import annotations

import math
import os
import re
import signal
from collections.abc import Iterator
from typing import Any, Optional

from pytest_gpu_pairs.inputs import open_regular, printable
from pytest_gpu_pairs.patterns import compile_pattern
from pytest_gpu_pairs.protocol import Progress, bounded_lines

OOM_PATTERN = re.compile(
    r"CUDA out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED"
    r"|cudaErrorMemoryAllocation|CUDA error: out of memory|RESOURCE_EXHAUSTED: Out of memory"
    r"|DefaultCPUAllocator: can't allocate memory|HIP out of memory")
HARNESS_LINE = "# gpu-pairs:"
LOG_TAIL_BYTES = 256 * 1024
LOG_LINE_BYTES = 64 * 1024  # a longer log line is matched on its first 64 KiB
LOG_READ_BYTES = 16 << 20  # of a log read for its metrics (its end) or for any output at all (its start)
SIGKILL_EXIT_CODES = (-signal.SIGKILL, 128 + signal.SIGKILL)


def _log_tail(path: str) -> str:
    try:
        with open_regular(path) as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - LOG_TAIL_BYTES))
            return handle.read(LOG_TAIL_BYTES).decode("utf-8", "replace")
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
    what the kernel's OOM killer (host memory, a cgroup limit) does. The message is the job's text,
    its control characters escaped (``inputs.printable``): it is quoted wherever the failure is shown."""
    found = _oom_message(log_path, progress, returncode, killed_by_harness)
    return None if found is None else printable(found)


def _oom_message(log_path: str, progress: Progress, returncode: Optional[int],
                 killed_by_harness: bool) -> Optional[str]:
    if progress.error and progress.error.get("oom"):
        lines = str(progress.error.get("message") or "").strip().splitlines()
        return (lines[-1] if lines else "out of memory (the job's error event gave no message)")[:300]
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
        value = float(text)
    except ValueError:
        return printable(text)
    return value if math.isfinite(value) else printable(text)


def own_lines(log_path: str, from_end: bool = False) -> Iterator[str]:
    """The job's own lines of its log, streamed and each cut at ``LOG_LINE_BYTES``: its first
    ``LOG_READ_BYTES``, or with ``from_end`` its last (from the first line that starts in them).
    Memory and time stay flat on a log of any size, a 300 MB line without a newline or a sparse
    file of terabytes included. Nothing if unreadable."""
    try:
        with open_regular(log_path) as handle:
            start = max(0, os.fstat(handle.fileno()).st_size - LOG_READ_BYTES) if from_end else 0
            handle.seek(start)
            lines = bounded_lines(handle, LOG_LINE_BYTES, LOG_READ_BYTES)
            if start:
                next(lines, None)  # the end of a line that began before the part read
            for raw, _ in lines:
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                if not line.startswith(HARNESS_LINE):
                    yield line
    except OSError:
        return


def has_output(log_path: str) -> bool:
    """Whether the job printed anything at all (a line that is not blank, in the log's first
    ``LOG_READ_BYTES``)."""
    return any(line.strip() for line in own_lines(log_path))


def parse_log_metrics(log_path: str, patterns: dict[str, str]) -> dict[str, Any]:
    """Metrics of a command workload from its log: each pattern's first group at its last match,
    matched line by line in the log's last ``LOG_READ_BYTES`` (where a run prints its results); a
    number where it parses (a finite one: ``nan`` stays text)."""
    if not patterns:
        return {}
    compiled = {name: compile_pattern(p) for name, p in patterns.items()}
    found: dict[str, Any] = {}
    for line in own_lines(log_path, from_end=True):
        for name, pattern in compiled.items():
            match = pattern.search(line)
            if match:
                found[name] = _number_or_text((match.group(1) or "").strip())
    return found
