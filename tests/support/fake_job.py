"""A command workload for the supervision tests: trains nothing, misbehaves on request.

It behaves like a user's train script as far as the harness can tell: it prints, speaks the
progress protocol (or only prints a ready line), takes "device memory" from a shared pool (a
folder of claim files, so that two jobs together can run out of memory where each alone fits),
starts helper processes like data-loader workers, and can crash, hang, run out of memory or
ignore SIGTERM from a given invocation on. Hostile on request: it trains in a session of its own
under a launcher, floods its log with progress lines, writes numbers no float holds, puts a FIFO
or a link to /dev/zero where its progress file should be, or makes its progress file or log a
sparse file of terabytes, or steps its wall clock. It never imports torch: the tests stay fast.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

OOM_TEXT = ("Traceback (most recent call last):\n  File \"train.py\", line 42, in <module>\n"
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {mb} MiB. GPU 0 has a total capacity "
            "of {cap} MiB of which {free} MiB is free.")


def parse(argv):
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--step-s", type=float, default=0.05)
    p.add_argument("--protocol", action="store_true", help="speak the progress protocol")
    p.add_argument("--fault", default="none", choices=["none", "crash", "hang", "oom"])
    p.add_argument("--fault-runs", default="1-", help="invocations that misbehave: N, N- or N-M (1-based)")
    p.add_argument("--ignore-term", action="store_true", help="the job and its helpers ignore SIGTERM")
    p.add_argument("--state", default="", help="folder counting invocations (needed by --fault-runs)")
    p.add_argument("--pool", default="", help="folder of the shared fake device memory")
    p.add_argument("--mem-mb", type=int, default=0)
    p.add_argument("--capacity-mb", type=int, default=1000)
    p.add_argument("--children", type=int, default=0, help="helper processes, like data-loader workers")
    p.add_argument("--setsid-grandchild", action="store_true",
                   help="a grandchild that leaves the session while its parent exits (an orphan daemon)")
    p.add_argument("--scrubbed-daemon", action="store_true",
                   help="like --setsid-grandchild, and the daemon's environment is empty (no job tag)")
    p.add_argument("--say", default="", help="a line printed before anything else (e.g. to feed a pattern)")
    p.add_argument("--bad-progress", action="store_true",
                   help="malformed lines in the progress file between the good ones")
    p.add_argument("--pids", default="", help="folder where every process of the job writes its pid")
    p.add_argument("--trainer-session", action="store_true",
                   help="train in a child in a session of its own, as torch's elastic launcher starts its workers")
    p.add_argument("--print-steps", action="store_true", help="print 'step N' for every step (for a progress_pattern)")
    p.add_argument("--huge-numbers", action="store_true",
                   help="progress events and printed steps with numbers of hundreds and thousands of digits")
    p.add_argument("--progress-file", default="", choices=["", "fifo", "device"],
                   help="put a FIFO, or a link to /dev/zero, where the harness reads the job's progress")
    p.add_argument("--flood-s", type=float, default=0.0,
                   help="print progress lines as fast as it can for this many seconds first (forever: -1)")
    p.add_argument("--slow-after-s", type=float, default=-1.0,
                   help="seconds after its first step from which every step takes --slow-step-s (a host that "
                        "gets busy after the warm-up)")
    p.add_argument("--slow-step-s", type=float, default=0.0)
    p.add_argument("--sparse", default="", choices=["", "progress", "log"],
                   help="after its first step, make its progress file or its log 8 TiB long without writing them "
                        "(truncate: a sparse file), then go on writing at their new end")
    p.add_argument("--clock-step-s", type=float, default=0.0,
                   help="after its first step, its wall clock (time.time) jumps by this many seconds, as NTP or a "
                        "person setting the clock does")
    p.add_argument("--accuracy", type=float, default=0.5)
    p.add_argument("--note", default="", help="any text; printed back verbatim")
    p.add_argument("--startup-s", type=float, default=0.0, help="seconds before the first step, like a model's set-up")
    p.add_argument("--print-env", action="append", default=[], metavar="NAME",
                   help="print 'env NAME=value' (or 'env NAME unset') for this variable of its environment")
    return p.parse_args(argv)


def invocation(state: str) -> int:
    if not state:
        return 1
    Path(state).mkdir(parents=True, exist_ok=True)
    fd = os.open(Path(state) / "invocations", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.write(fd, b".")
    os.close(fd)
    return (Path(state) / "invocations").stat().st_size


def in_runs(spec: str, n: int) -> bool:
    low, dash, high = spec.partition("-")
    if not dash:
        return n == int(low)
    return n >= int(low) and (not high or n <= int(high))


def write_pid(folder: str, role: str) -> None:
    """Written whole or not at all: a test waiting for the file reads it as soon as it appears."""
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        final = Path(folder) / f"{os.getpid()}.{role}"
        partial = final.with_name(f".{final.name}.partial")
        partial.write_text(str(os.getpid()))
        os.replace(partial, final)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def claim_memory(pool: str, mb: int, capacity: int) -> bool:
    """Claim ``mb`` of the pool; False (after printing PyTorch's message) when it does not fit."""
    if not pool or mb <= 0:
        return True
    folder = Path(pool)
    folder.mkdir(parents=True, exist_ok=True)
    used = 0
    for claim in folder.glob("*.mb"):
        pid = int(claim.stem)
        if pid != os.getpid() and _alive(pid):
            used += int(claim.read_text() or 0)
    if used + mb > capacity:
        print(OOM_TEXT.format(mb=mb, cap=capacity, free=capacity - used), flush=True)
        return False
    (folder / f"{os.getpid()}.mb").write_text(str(mb))
    return True


def sleeper_code(pids: str, ignore_term: bool) -> str:
    lines = ["import os, signal, time"]
    if ignore_term:
        lines.append("signal.signal(signal.SIGTERM, signal.SIG_IGN)")
    if pids:
        lines.append(f"open(os.path.join({pids!r}, f'{{os.getpid()}}.helper'), 'w').write(str(os.getpid()))")
    lines.append("while True: time.sleep(1)")
    return "\n".join(lines)


def start_helpers(args, ignore_term: bool) -> None:
    code = sleeper_code(args.pids, ignore_term)
    for _ in range(args.children):
        subprocess.Popen([sys.executable, "-c", code])
    if args.setsid_grandchild or args.scrubbed_daemon:
        env = "{}" if args.scrubbed_daemon else "None"
        orphan_maker = ("import subprocess, sys\n"
                        f"subprocess.Popen([sys.executable, '-c', {code!r}], start_new_session=True, env={env})\n")
        subprocess.run([sys.executable, "-c", orphan_maker], check=True)


BAD_PROGRESS = [b'[1, 2]\n', b'{"event": "step", "step": "x", "t": 1.0}\n', b'{"event": "step", "t": 1.0}\n',
                b'{"event": "error", "oom": false, "message": "", "t": 1.0}\n', b'{"event": "step", "step": 2, "t": "later"}\n',
                b'{"event": "step", "step": 2, "t": 1.0, "note": "\xff\xfe"}\n']


def write_bad_progress() -> None:
    with open(os.environ["GPU_PAIRS_PROGRESS"], "ab") as handle:
        handle.writelines(BAD_PROGRESS)


HUGE = "9" * 400
HUGE_PROGRESS = [f'{{"event": "step", "step": {HUGE}, "t": 1.0}}\n', f'{{"event": "step", "step": {"1" * 5000}, "t": 1.0}}\n',
                 '{"event": "step", "step": 2, "t": 1e400}\n', f'{{"event": "step", "step": 2, "t": 1.0, "epoch": {HUGE}}}\n']


def write_huge_numbers(protocol: bool) -> None:
    """What a job can write that no float holds: the harness must neither crash on it nor write it.
    Into the progress file only for a job that speaks the protocol (else it reads the log)."""
    if protocol:
        with open(os.environ["GPU_PAIRS_PROGRESS"], "a", encoding="utf-8") as handle:
            handle.writelines(HUGE_PROGRESS)
    print(f"step {HUGE}\nstep {'1' * 5000}\nAccuracy: {HUGE}", flush=True)


def plant_progress_file(kind: str) -> None:
    path = os.environ.get("GPU_PAIRS_PROGRESS", "")
    if not (kind and path):
        return
    Path(path).unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    else:
        os.symlink("/dev/zero", path)


SPARSE_BYTES = 8 << 40


def make_sparse(kind: str) -> None:
    """The file 8 TiB longer, no byte written: what ``truncate -s 8T`` does to a file being read."""
    path = os.environ["GPU_PAIRS_PROGRESS"] if kind == "progress" else os.readlink(f"/proc/{os.getpid()}/fd/1")
    os.truncate(path, os.path.getsize(path) + SPARSE_BYTES)


def step_wall_clock(seconds: float) -> None:
    real = time.time
    time.time = lambda: real() + seconds


def launch_trainer(args, argv) -> int:
    """The launcher waits for its trainer, which runs in a session of its own (``setsid``)."""
    write_pid(args.pids, "launcher")
    trainer_argv = [a for a in argv if a != "--trainer-session"]
    trainer = subprocess.Popen([sys.executable, __file__, *trainer_argv], start_new_session=True)
    return trainer.wait()


def flood(seconds: float) -> None:
    """Progress lines as fast as the log takes them (hundreds of thousands a second), for
    ``seconds`` or, below 0, until killed."""
    end = time.monotonic() + seconds
    step = 0
    while seconds < 0 or time.monotonic() < end:
        sys.stdout.write("".join(f"step {i}\n" for i in range(step + 1, step + 1001)))
        sys.stdout.flush()
        step += 1000


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    if args.trainer_session:
        return launch_trainer(args, argv)
    if args.flood_s:
        flood(args.flood_s)
    n = invocation(args.state)
    fault = args.fault if in_runs(args.fault_runs, n) else "none"
    write_pid(args.pids, "main")
    if args.say:
        print(args.say, flush=True)
    print(f"fake job: invocation {n}, fault {fault}, argv {sys.argv[1:]}", flush=True)
    if args.note:
        print(f"note: {args.note}", flush=True)
    for name in args.print_env:
        print(f"env {name}={os.environ[name]}" if name in os.environ else f"env {name} unset", flush=True)
    if os.environ.get("GPU_PAIRS_STEADY_STATE"):
        print("steady state only: per-epoch evaluation left out", flush=True)
    if args.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if fault == "crash":
        print("Traceback (most recent call last):\nRuntimeError: boom", file=sys.stderr, flush=True)
        return 1
    if fault == "oom" or not claim_memory(args.pool, args.mem_mb, args.capacity_mb):
        if fault == "oom":
            print(OOM_TEXT.format(mb=args.mem_mb, cap=args.capacity_mb, free=0), flush=True)
        return 1
    start_helpers(args, ignore_term=args.ignore_term)
    time.sleep(args.startup_s)
    plant_progress_file(args.progress_file)
    writer = None
    if args.protocol:
        from pytest_gpu_pairs.protocol import ProgressWriter

        writer = ProgressWriter.from_env()
    first_t = None
    for step in range(1, args.steps + 1):
        slow = first_t is not None and 0 <= args.slow_after_s <= time.monotonic() - first_t
        time.sleep(args.slow_step_s if slow else args.step_s)
        if step == 1:
            first_t = time.monotonic()
            print("Epoch 1 started", flush=True)
            if writer:
                writer.ready()
            if writer and args.bad_progress:
                write_bad_progress()
            if args.huge_numbers:
                write_huge_numbers(args.protocol)
            if args.sparse:
                make_sparse(args.sparse)
            if args.clock_step_s:
                step_wall_clock(args.clock_step_s)
        if writer:
            writer.step(step, step / args.steps)
        if args.print_steps:
            print(f"step {step}", flush=True)
        if fault == "hang" and step == 1:
            while True:
                time.sleep(1)
    if writer:
        writer.step(args.steps, 1.0, force=True)
        writer.result({"accuracy": args.accuracy}, args.steps, None)
    print(f"Accuracy: {args.accuracy}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
