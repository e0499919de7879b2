"""Shared helpers of the plugin's own tests."""
from __future__ import annotations

import psutil

DESIGN_KEYS = ("case_id design variant mode fg_model bg_model fg_hparams bg_hparams fg_duration_s fg_solo_duration_s "
               "fg_slowdown bg_progress_ratio concurrency_efficiency gpu_energy_j gpu_energy_above_idle_j "
               "fg_gpu_energy_j bg_gpu_energy_j energy_split_method cpu_energy_j cpu_energy_method gpu_power_avg_w "
               "gpu_power_max_w gpu_util_avg_pct gpu_temp_max_c peak_vram_mb fg_peak_vram_mb bg_peak_vram_mb oom "
               "fg_exit_code bg_runs bg_failures bg_coverage perf device sharing sample_hz notes").split()

SUITE = "def test_pair(gpu_pair_case, pair_run):\n    pair_run().check()\n"


def jobs_started_under(directory) -> list[psutil.Process]:
    """Live job processes whose progress file lies under ``directory`` (leaked ones included)."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get("GPU_PAIRS_PROGRESS", "").startswith(str(directory)):
                found.append(process)
        except psutil.Error:
            continue
    return found


def mps_processes(pipe_dir) -> list[psutil.Process]:
    """Live (non-zombie) processes bound to the MPS pipe directory ``pipe_dir``: daemon and servers."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.status() != psutil.STATUS_ZOMBIE and \
                    process.environ().get("CUDA_MPS_PIPE_DIRECTORY") == str(pipe_dir):
                found.append(process)
        except psutil.Error:
            continue
    return found
