"""The device a session's jobs train on: opened once, its idle power, its cool-down, the emulated card.

It is opened when the first case needs it (its idle power measured before any job of ours has
touched it); it remembers when our last job left it, and makes the ballast of the emulated smaller
card of ``--gpu-pairs-gpu-memory-mb``."""
from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Optional

from pytest_gpu_pairs.devices.cpus import physical_cores, usable_cpus
from pytest_gpu_pairs.devices.nvml import Gpu, NvmlUnavailable, gpu_count, open_gpu, visible_gpu
from pytest_gpu_pairs.experiment.cases import Case
from pytest_gpu_pairs.protocol import now
from pytest_gpu_pairs.run.ballast import Ballast
from pytest_gpu_pairs.run.cpus import CpuPlan, plan_job_cpus, share_of_cores, unpinned
from pytest_gpu_pairs.run.environment import Environment
from pytest_gpu_pairs.run.options import GpuPairsOptions
from pytest_gpu_pairs.run.outdir import OutputFolder
from pytest_gpu_pairs.run.proctree import reap_orphans
from pytest_gpu_pairs.run.round import cool_down

IDLE_SECONDS = 3.0
IDLE_METHOD_TEXT = (f"NVML total-energy counter over {IDLE_SECONDS:.0f} s at session start, before any job or "
                    "ballast, both ends of the window on an update of the counter")


class DeviceRequestError(RuntimeError):
    pass


class CardEmulationUnavailable(RuntimeError):
    """``--gpu-pairs-gpu-memory-mb`` on a run without a GPU: the case is skipped with this reason."""


def job_cpu_plan(pin: str, share: tuple[int, int], usable: frozenset[int]) -> CpuPlan:
    """The CPUs of each job of this session: ``pin`` is the option (auto, off, N per job), ``share``
    this worker's block of the host's cores."""
    if pin == "off":
        return unpinned("--gpu-pairs-pin-cpus off")
    if not usable:
        return unpinned("this platform does not let a process choose its CPUs")
    cores = share_of_cores(physical_cores(usable), *share)
    return plan_job_cpus(cores, None if pin == "auto" else int(pin))


def host_cpu_plan(pin: str) -> CpuPlan:
    """The CPUs a session alone on this host would pin its jobs to (``gpu-pairs profile`` runs its jobs so)."""
    return job_cpu_plan(pin, (0, 1), usable_cpus())


def session_cpu_share(options: GpuPairsOptions, gpu: Optional[Gpu],
                      gpus_here: Callable[[], int] = gpu_count) -> tuple[int, int]:
    """The block of the host's cores this session's jobs take: an xdist worker's, or, for a session
    named to one GPU (``--gpu-pairs-gpus N``, no workers), that GPU's block of as many as the host
    has GPUs, so that sessions started side by side, one a GPU, never pin their jobs to the same
    CPUs (two such sessions once did, and slowed each other's host-bound jobs); else all of them."""
    if options.worker is not None or options.gpu is None or gpu is None:
        return options.cpu_share
    try:
        count = gpus_here()
    except NvmlUnavailable:
        return options.cpu_share
    index = gpu.info.index
    return (index, count) if isinstance(index, int) and 0 <= index < count else options.cpu_share


def open_device_gpu(device: str, spec: Optional[str] = None) -> tuple[Optional[Gpu], Optional[str]]:
    """The GPU jobs of ``device`` (auto, cuda, cpu) train on, or None with the reason; ``DeviceRequestError``
    where cuda was asked for and no GPU is usable."""
    if device == "cpu":
        return None, "--gpu-pairs-device cpu: jobs train on the CPU, GPU figures do not apply"
    try:
        if spec is None:
            return _visible_or_first_gpu(), None
        return open_gpu(spec, clock=now), None
    except NvmlUnavailable as exc:
        if device == "cuda":
            raise DeviceRequestError(f"--gpu-pairs-device cuda, but no GPU is usable: {exc}") from None
        return None, f"no NVIDIA GPU ({exc}); jobs trained on the CPU"


def _visible_or_first_gpu() -> Gpu:
    """The GPU the jobs' CUDA device 0 is (the first entry of CUDA_VISIBLE_DEVICES), else NVML's
    GPU 0; an entry NVML cannot open as a GPU (a MIG instance) leaves GPU 0 too."""
    visible = visible_gpu()
    if visible is not None:
        with contextlib.suppress(NvmlUnavailable):
            return open_gpu(visible, clock=now)
    return Gpu(0, clock=now)


def _idle_power(gpu: Gpu) -> tuple[Optional[float], Optional[str]]:
    """Idle power from the energy counter over ``IDLE_SECONDS`` before any job of ours runs."""
    if not gpu.has_energy_counter:
        return None, "the GPU has no NVML total-energy counter"
    busy = [pid for pid, _ in gpu.compute_processes()]
    watts = gpu.idle_power_w(IDLE_SECONDS)
    if watts is None:
        return None, "the energy counter did not advance during the idle measurement"
    note = f"measured with other compute processes present: {busy}" if busy else None
    return watts, note


def _check_card_size(gpu_memory_mb: Optional[float], gpu: Gpu) -> None:
    total = gpu.info.memory_total_mb
    if gpu_memory_mb is not None and gpu_memory_mb >= total:
        raise DeviceRequestError(f"--gpu-pairs-gpu-memory-mb {gpu_memory_mb:.0f} is not smaller than the GPU's "
                                 f"{total:.0f} MB: there is no smaller card to emulate")


class Device:
    """The device of one session. ``on_open`` is told once, when it is opened (the session writes
    its ``session.json`` then, and tells the MPS daemon which GPU it serves)."""

    def __init__(self, options: GpuPairsOptions, folder: OutputFolder, on_open: Callable[[Environment], None]):
        self.options, self.folder, self._on_open = options, folder, on_open
        self._env: Optional[Environment] = None
        self.released_t: Optional[float] = None
        self.orphans_killed: list[int] = []

    @property
    def opened(self) -> Optional[Environment]:
        """The environment if a case has opened it, else None (nothing is opened for asking)."""
        return self._env

    def environment(self) -> Environment:
        if self._env is None:
            options = self.options
            self.orphans_killed = reap_orphans(self.folder.path)
            gpu, reason = open_device_gpu(options.device, options.gpu)
            env = Environment(device="cuda" if gpu is not None else "cpu", scale=options.scale,
                              sample_hz=options.sample_hz, gpu=gpu, gpu_unavailable=reason,
                              cpus=job_cpu_plan(options.pin_cpus, session_cpu_share(options, gpu), usable_cpus()))
            if gpu is not None and options.gpu is not None:
                env.extra_env["CUDA_VISIBLE_DEVICES"] = gpu.info.uuid or str(gpu.info.index)
            if gpu is not None:
                _check_card_size(options.gpu_memory_mb, gpu)
                env.idle_power_w, env.idle_power_note = _idle_power(gpu)
            self._env = env
            self._on_open(env)
        return self._env

    @property
    def card_mb(self) -> Optional[float]:
        """The size of the emulated card (``--gpu-pairs-gpu-memory-mb``), None where the whole GPU is used."""
        return self.options.gpu_memory_mb

    @property
    def enforce_efficiency(self) -> bool:
        """Thresholds in settings describe GPU sharing; on the CPU only an explicit option applies."""
        return self.environment().device == "cuda" or self.options.min_efficiency is not None

    @property
    def enforce_vram(self) -> bool:
        """The same for the VRAM budget: memory is measured on a GPU, or the option asked for it anyway."""
        return self.environment().device == "cuda" or self.options.vram_budget_mb is not None

    def cool_down(self, seconds: float) -> float:
        """The settings' ``cool_down_s`` since our last job left the device; seconds slept."""
        return cool_down(seconds, self.released_t)

    def release(self) -> None:
        """Our last job has left the device: the next cool-down counts from now."""
        self.released_t = now()

    def emulated_card(self, case: Case) -> Optional[Ballast]:
        """The ballast of ``--gpu-pairs-gpu-memory-mb`` for one case (not started), or None without the option.

        Without a GPU there is no card to shrink: ``CardEmulationUnavailable`` says so.
        """
        size = self.card_mb
        if size is None:
            return None
        env = self.environment()
        if env.gpu is None or env.device != "cuda":
            raise CardEmulationUnavailable(f"--gpu-pairs-gpu-memory-mb {size:.0f} emulates a smaller GPU and needs one: "
                                           f"{env.gpu_unavailable}")
        return Ballast(size, env.gpu, self.folder.case_dir(case), env.extra_env)
