"""Every key of the result record, declared once: its type, unit, which direction is better, what
it means, and a short label where a reader has no room for the meaning. The typed record model,
the aggregation over rounds, the comparison gate's directions, the documentation's key reference,
the report's glossary, columns and axes, and the terminal summary's legend are all read from this
table, so none of them can drift from the others.

A figure that could not be measured is ``None``; the reason is under the same key in ``notes``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Optional

SCHEMA_VERSION = 2  # 2: every accuracy-like metric a fraction (compat/record_v1.py reads layout 1)


@dataclass(frozen=True)
class Key:
    name: str
    type: str  # float, int, str, bool, dict, list
    unit: str = ""
    better: Optional[str] = None  # "lower", "higher", or None: not a figure to improve
    per_round: bool = False  # a figure of each round: a case with repeats holds the mean and <name>_std
    text: str = ""
    group: str = ""
    label: str = ""  # a few words for a column header, an axis or a legend; empty: the name itself


def _figures(group: str, rows: list[tuple]) -> list[Key]:
    return [Key(name, kind, unit, better, per_round, text, group) for name, kind, unit, better, per_round, text in rows]


IDENTITY = _figures("identity", [
    ("schema", "int", "", None, False, "version of this record's layout (2: every accuracy-like metric a fraction)"),
    ("case_id", "str", "", None, False, "stable id of the case: `<group>-<fg>+<bg>-<variant>-<mode>[-mps]` (a group of more jobs names each: `<fg>+<bg>+<bg2>`)"),
    ("design", "str", "", None, False, "the experiment's design: pairs, hp_study, mutation or scaling"),
    ("variant", "str", "", None, False, "which hyperparameter variant of the pair this case is"),
    ("mode", "str", "", None, False, "concurrent (two jobs share the device), solo (one job alone) or scaling (one job data-parallel on gpus GPUs)"),
    ("sharing", "str", "", None, False, "how the jobs shared the GPU: timeslice (the driver's default) or mps"),
    ("fg_model", "str", "", None, False, "the foreground workload"),
    ("bg_model", "str", "", None, False, "the background workload (None for a solo case)"),
    ("fg_hparams", "dict", "", None, False, "the foreground's effective hyperparameters"),
    ("bg_hparams", "dict", "", None, False, "the background's effective hyperparameters"),
    ("fg_runs", "int", "", None, False, "a kept-running background alone, its solo reference: the runs it trained back "
     "to back in one process (its pace is read over the runs after the first, warm, as it runs beside a foreground); "
     "absent for one run"),
    ("complete", "bool", "", None, False, "the case ran to its end (passing or failing); false: interrupted"),
    ("interrupted", "str", "", None, False, "why an incomplete case stopped (Ctrl-C, SIGTERM, a harness error)"),
    ("reused_measurement", "str", "", None, False, "a solo case that reports the session's earlier measurement of its job"),
    ("settings_digest", "dict", "", None, False, "digests of what the case measured: fg and bg (each job's workload, "
     "hyperparameters, and a command workload's argv, cwd, env and patterns) and measurement (method, phases, "
     "rounds, timeouts, scale, device, precision target, ...); --gpu-pairs-resume measures a case again where one "
     "differs"),
    ("repeats", "int", "rounds", None, False, "how many rounds the figures are the mean of"),
    ("rounds", "list", "", None, False, "with repeats: each round's figures"),
    ("timeline", "dict", "", None, False, "wall-clock stamps of every phase of the case (read by dead-time)"),
    ("notes", "dict", "", None, False, "key -> why that key is None, or what qualifies it"),
    ("plugin_keys", "list", "", None, False, "keys other plugins added through the pytest_gpu_pairs_record hook, "
     "kept as they gave them (any other key outside this table is refused)"),
])

TIME = _figures("time", [
    ("fg_duration_s", "float", "s", "lower", True, "the foreground's training time (first to last step; process time for a job that reports no progress)"),
    ("fg_wall_s", "float", "s", "lower", True, "the foreground process's whole lifetime, startup included"),
    ("fg_startup_s", "float", "s", "lower", True, "from process start to the job's setup event"),
    ("fg_solo_duration_s", "float", "s", "lower", False, "the foreground's training time alone on the device"),
    ("fg_steps_in_window", "float", "steps", None, False, "foreground steps inside the window (a solo baseline's "
     "energy per step is its window's energy over these, also when a resumed session reads it from the record)"),
    ("duration_basis", "str", "", None, False, "training (first to last step, from fg_progress_source) or process (wall time)"),
    ("fg_progress_source", "str", "", None, False, "where the foreground's steps came from: protocol, log (its progress_pattern), or None (it reported none)"),
    ("window_s", "float", "s", "lower", True, "the measured window: the foreground's training time"),
    ("case_wall_s", "float", "s", "lower", False, "the case's wall time: solo baselines, warm-up and every round "
     "(pytest-benchmark's statistics hold the figure named by benchmark_figure)"),
])

SHARING = _figures("sharing", [
    ("fg_slowdown", "float", "ratio", "lower", True, "fg_duration_s / fg_solo_duration_s: the foreground's time beside the background over its time alone"),
    ("bg_progress_ratio", "float", "ratio", "higher", True, "background steps in the window / (window_s x its solo step rate)"),
    ("bg_speed_ratio", "float", "ratio", "higher", True, "bg_progress_ratio over the time the background was training only"),
    ("concurrency_efficiency", "float", "ratio", "higher", True, "the sum over the jobs of each one's progress in the "
     "shared phase over its solo progress (a pair: 1 / fg_slowdown + bg_progress_ratio): above 1, sharing did more work "
     "than one job alone; n_jobs (2.0 for a pair): sharing is free"),
    ("n_jobs", "int", "jobs", None, False, "how many jobs the case ran on the device: 1 for a solo case, 2 for a pair, "
     "more for a group (its further backgrounds are bg2, bg3, ...); the bound of concurrency_efficiency"),
    ("jobs", "list", "", None, False, "every job of an interleaved case, the foreground first: role, model, "
     "solo_steps_per_s and steps_per_s (shared), progress_ratio (shared over solo), gpu_energy_j (its share of the "
     "energy above idle: the shares add up to gpu_energy_above_idle_j), gpu_energy_per_step_j, alone_energy_j, "
     "solo_gpu_busy, and its whole-run memory need (vram_need_mb, vram_need_phase); a pair's first two are also its "
     "fg_ and bg_ keys"),
    ("bg_coverage", "float", "fraction", "higher", True, "fraction of the window in which the background was training"),
    ("min_coverage", "float", "fraction", None, False, "the least bg_coverage a round needs to count: 0.95 in the "
     "hp_study and mutation designs, whose question is a whole run's outcome, which a background that covered less "
     "of it did not share; none in the pairs design unless its defaults.min_coverage says"),
    ("rounds_refused", "int", "rounds", None, False, "rounds left out of the figures because their bg_coverage was "
     "below min_coverage; each stays under rounds with the reason in its coverage_refused"),
    ("coverage_refused", "str", "", None, False, "why the case holds no data point: every round's background covered "
     "less of the foreground's run than min_coverage (the case fails; analyses leave it out); under rounds, why that "
     "round does not count"),
    ("bg_runs", "float", "count", None, True, "background runs started during the case"),
    ("bg_failures", "float", "count", "lower", True, "background runs that failed"),
    ("bg_steps_in_window", "float", "steps", None, False, "background steps inside the window"),
    ("bg_solo_steps_per_s", "float", "steps/s", None, True, "the background's step rate alone"),
    ("bg_alone_steps_per_s", "float", "steps/s", None, True, "a kept-running background's step rate alone in its "
     "own process, in the windows just before and just after the foreground's run: the reference of its "
     "progress ratio there"),
    ("bg_alone_drift", "float", "ratio", None, True, "a kept-running background's pace alone after the "
     "foreground's run over its pace alone before it, less 1: how far the host's pace moved during the run"),
    ("bg_progress_source", "str", "", None, False, "where the background's steps came from: protocol, log (its progress_pattern), or None (it reported none)"),
])

ENERGY = _figures("energy", [
    ("gpu_energy_j", "float", "J", "lower", True, "the card's energy over the window (NVML total-energy counter)"),
    ("gpu_energy_above_idle_j", "float", "J", "lower", True, "gpu_energy_j minus idle power x window"),
    ("fg_gpu_energy_j", "float", "J", "lower", True, "the foreground's share of the energy above idle"),
    ("bg_gpu_energy_j", "float", "J", "lower", True, "the background's share of the energy above idle"),
    ("fg_alone_energy_j", "float", "J", None, True,
     "interleaved: what the foreground's steps in the pair phase cost it alone (its solo energy per step above "
     "idle, same round): its stand-alone value in the energy split, and what compare judges its share against"),
    ("bg_alone_energy_j", "float", "J", None, True,
     "interleaved: what the background's steps in the pair phase cost it alone, as fg_alone_energy_j"),
    ("fg_gpu_energy_per_step_j", "float", "J/step", "lower", True,
     "the foreground's share per step it took beside the background (interleaved: in the pair phase)"),
    ("bg_gpu_energy_per_step_j", "float", "J/step", "lower", True,
     "the background's share per step it took beside the foreground (interleaved: in the pair phase)"),
    ("energy_split_method", "str", "", None, False, "how the energy above idle was split: shapley_solo_energy (interleaved), solo, sm_util, progress_x_solo_energy, time_share"),
    ("serial_energy_j", "float", "J", "lower", True, "the window's work done serially: each job's steps at its solo energy per step"),
    ("energy_saved_vs_serial", "float", "fraction", "higher", True, "1 - gpu_energy_j / serial_energy_j"),
    ("cpu_energy_j", "float", "J", "lower", True, "CPU package energy over the window (RAPL)"),
    ("cpu_energy_method", "str", "", None, False, "rapl, or None when RAPL was not readable (no estimate is offered in its place)"),
    ("gpu_power_avg_w", "float", "W", "lower", True, "mean polled board power in the window"),
    ("gpu_power_max_w", "float", "W", "lower", True, "highest polled board power in the window"),
    ("gpu_util_avg_pct", "float", "%", "higher", True, "mean NVML GPU utilisation in the window"),
    ("gpu_temp_max_c", "float", "°C", "lower", True, "highest GPU temperature in the window"),
    ("idle_power_w", "float", "W", None, False, "the card's idle power, measured at session start"),
    ("idle_power_method", "str", "", None, False, "how idle power was measured"),
])

MEMORY = _figures("memory", [
    ("peak_vram_mb", "float", "MB", "lower", True, "peak of the jobs' NVML per-process memory together, CUDA contexts included"),
    ("fg_peak_vram_mb", "float", "MB", "lower", True, "the foreground's peak NVML per-process memory"),
    ("bg_peak_vram_mb", "float", "MB", "lower", True, "the background's peak NVML per-process memory"),
    ("other_peak_vram_mb", "float", "MB", "lower", True, "peak memory of GPU processes that are not the case's jobs"),
    ("fg_peak_mem_reserved_mb", "float", "MB", "lower", True, "the foreground's peak torch reserved memory (built-ins)"),
    ("bg_peak_mem_reserved_mb", "float", "MB", "lower", True, "the background's peak torch reserved memory (built-ins)"),
    ("mps_server_vram_mb", "float", "MB", "lower", True, "memory of the MPS server process (mps cases)"),
    ("vram_budget_mb", "float", "MB", None, False, "the pair's peak VRAM budget (a check)"),
    ("vram_budget_source", "str", "", None, False, "which memory figure the budget is checked against: vram_fit_mb "
     "(whole runs) where both jobs' fit profiles were measured, else peak_vram_mb (the case's sampled peak)"),
    ("vram_fit_mb", "float", "MB", "lower", False, "the pair's whole-run need: the most each job held at any point of "
     "a complete run (start-up with cuDNN's autotuning, training, evaluation, a checkpoint, a second start) alone on "
     "the card vram_card_mb, both added, plus vram_together_mb; the budget check uses it"),
    ("vram_steady_mb", "float", "MB", "lower", False, "the same while both jobs train steadily (after their first step)"),
    ("vram_transient_mb", "float", "MB", "lower", False, "vram_fit_mb - vram_steady_mb: what start-up, evaluation or "
     "a checkpoint needs beyond steady training"),
    ("vram_peak_phase", "str", "", None, False, "which job, and which part of its run, set the larger transient"),
    ("vram_verdict", "str", "", None, False, "fits (vram_fit_mb within the budget), over budget (above it, though "
     "the card holds the pair's steady need), or no fit (a job ran out of memory alone on the card, or the steady "
     "need exceeds the card)"),
    ("vram_uncertainty_mb", "float", "MB", None, False, "how far vram_fit_mb may be off: the allocator's and NVML's "
     "resolution, or how far the fit profiles' starts lay apart where that is more"),
    ("vram_card_mb", "float", "MB", None, False, "the card the fit profiles were measured on (emulated; the settings' "
     "card_mb or --gpu-pairs-gpu-memory-mb); None: the whole GPU"),
    ("vram_together_mb", "float", "MB", None, False, "memory running together costs beyond both jobs' own: the MPS "
     "server's under MPS, 0 under time-slicing (each job's memory is its own process's)"),
    ("fg_vram_need_mb", "float", "MB", "lower", False, "the foreground's whole-run need from its fit profile, CUDA "
     "context included"),
    ("bg_vram_need_mb", "float", "MB", "lower", False, "the background's whole-run need from its fit profile"),
    ("fg_vram_need_phase", "str", "", None, False, "the part of the foreground's run that set its need: setup, start "
     "(first step, cuDNN's autotuning), train, eval, checkpoint; for a command workload start, train, gap or end"),
    ("bg_vram_need_phase", "str", "", None, False, "the same for the background"),
    ("fit_profile_s", "float", "s", None, False, "device seconds this case spent measuring fit profiles no earlier "
     "case of the results folder had measured (0: all were reused)"),
    ("gpu_memory_mb", "float", "MB", None, False, "the emulated card's size (--gpu-pairs-gpu-memory-mb), None without emulation"),
    ("ballast_held_mb", "float", "MB", None, False, "memory the ballast held to emulate the smaller card"),
    ("gpu_free_mb_emulated", "float", "MB", None, False, "free memory the jobs saw on the emulated card"),
    ("gpu_used_before_ballast_mb", "float", "MB", None, False, "memory in use before the ballast started"),
])

OUTCOME = _figures("outcome", [
    ("oom", "bool", "", None, False, "a job ran out of memory"),
    ("failure", "str", "", None, False, "why the case failed (None when it did not)"),
    ("fg_exit_code", "int", "", None, False, "the foreground process's exit code"),
    ("min_efficiency", "float", "ratio", None, False, "the pair's minimum concurrency efficiency (a check)"),
    ("perf", "dict", "", None, False, "the foreground's model metrics; accuracy-like ones fractions 0-1, losses in nats (docs: settings, built-in workloads)"),
    ("bg_perf", "dict", "", None, False, "model metrics of the last background run that finished"),
    ("bg_cycle_perf", "list", "", None, False, "a kept-running background (defaults.keep_background): each of its "
     "runs that overlapped the foreground's, in order: its model metrics and the fraction of it shared"),
    ("perf_metric", "str", "", None, False, "the metric the study compares (the workload's first)"),
    ("fg_epochs", "float", "epochs", None, False, "the foreground's configured epochs"),
    ("mps", "dict", "", None, False, "mps cases: each job's limits, the daemon's server and client pids"),
])

DEVICE = _figures("device", [
    ("device", "str", "", None, False, "the GPU's name, or cpu"),
    ("gpu_uuid", "str", "", None, False, "the GPU's UUID (None on the CPU): which card, where the name says only which model"),
    ("host", "str", "", None, False, "the machine's host name; a resumed session compares its shared runs with an "
     "earlier session's solo case only where both ran on this host and GPU"),
    ("scale", "float", "", None, False, "fraction of each epoch's steps every job ran (--gpu-pairs-scale)"),
    ("sample_hz", "float", "Hz", None, False, "the monitors' sampling rate (None without GPU samples)"),
    ("job_cpus", "dict", "", None, False, "the CPUs each job was pinned to, and the harness's core, in the kernel's list format (None: not pinned, notes say why)"),
])

METHOD = _figures("method", [
    ("method", "str", "", None, False, "interleaved (rounds of fg alone, bg alone, both: figures that reproduce) or epoch (the default: one foreground epoch under a background restart loop)"),
    ("n_rounds", "int", "rounds", None, False, "interleaved rounds the figures are the mean of"),
    ("n_rounds_effective", "float", "rounds", None, False, "independent rounds the efficiency's interval is worth: bracketed rounds share a solo phase with each neighbour"),
    ("interval_method", "str", "", None, False, "how the 95 % intervals were taken: student_t (independent rounds), student_t_lag1 (bracketed rounds, on their lag-1 long-run variance) or student_t_starts (bracketed rounds over independent starts of the pair: the rounds' own noise and the starts' offsets)"),
    ("precision_target", "float", "fraction", None, False, "the stopping rule's target: relative half width of the efficiency's 95 % interval (None: fixed rounds)"),
    ("precision_achieved", "float", "fraction", "lower", False, "the relative half width the efficiency's interval reached"),
    ("precision_reached", "bool", "", None, False, "whether the target was reached (None without a target)"),
    ("stop_reason", "str", "", None, False, "why the case stopped adding rounds"),
    ("n_starts", "int", "starts", None, False, "independent starts of the pair the rounds were spread over: both "
     "jobs started anew (or taken from standby at their start gates) and warmed up again for each"),
    ("starts", "list", "", None, False, "each start: its segment, start-up and warm-up seconds, whether its jobs "
     "waited in standby, whether the warm-up ended steady, its rounds, its mean efficiency and solo paces"),
    ("between_start_sd", "float", "fraction", None, False, "how far starts of the pair land apart (relative sd of "
     "a start's offset) as the interval took it: the prior pooled with the case's own starts"),
    ("between_start_df", "float", "", None, False, "the degrees of freedom between_start_sd is worth"),
    ("between_start_basis", "str", "", None, False, "where between_start_sd comes from"),
    ("between_start_prior", "dict", "", None, False, "the prior the interval pooled with the case's own starts: "
     "sd, df and the study that measured it (None: none, as on the CPU)"),
    ("rounds_excluded", "int", "rounds", "lower", False, "interleaved rounds left out of every figure: a job was "
     "silent through part of a phase (not training there), or the energy split could not be taken"),
    ("fg_restarts", "int", "count", None, False, "times the foreground finished its run (exit code 0) during an "
     "interleaved case and was started again"),
    ("bg_restarts", "int", "count", None, False, "times the background finished its run during an interleaved "
     "case and was started again"),
    ("rounds_discarded", "int", "rounds", None, False, "interleaved rounds discarded around restarts: measured "
     "after the ended run's last step report"),
    ("restarts", "list", "", None, False, "each restart: role, run, exit and last-step times, the run's training "
     "seconds, the rounds discarded, and when the new run started"),
    ("benchmark_figure", "str", "", None, False, "what pytest-benchmark's statistics of the case hold: one value "
     "per interleaved round of pair_s_per_solo_s (1 / concurrency_efficiency), or the foreground run's seconds "
     "(epoch)"),
    ("gpu_seconds", "float", "s", "lower", False, "device time the case held: start of its jobs to their end, warm-up included"),
    ("warmup_s", "float", "s", None, False, "excluded as warm-up: from the jobs' start until the first round"),
    ("warmup_rule", "str", "", None, False, "the rule that decided the warm-up"),
    ("phase_s", "float", "s", None, False, "measured seconds of each phase: the settings' phase_s, or "
     "a whole multiple of it so that the slower job reports its steps at least 6 times in it"),
    ("settle_s", "float", "s", None, False, "seconds left out after every switch of phase: the settings' "
     "settle_s, or two steps of the slower job if longer"),
    ("fg_steps_per_s", "float", "steps/s", "higher", True, "the foreground's step rate beside the background"),
    ("fg_solo_steps_per_s", "float", "steps/s", None, True, "the foreground's step rate alone"),
    ("bg_steps_per_s", "float", "steps/s", "higher", True, "the background's step rate beside the foreground"),
    ("fg_solo_gpu_busy", "float", "fraction", None, True, "the fraction of time the card ran a kernel while the "
     "foreground trained alone (NVML's utilisation in its solo phases): how much of the card it needs at its solo pace"),
    ("bg_solo_gpu_busy", "float", "fraction", None, True, "the same for the background in its solo phases"),
    ("pair_gpu_busy", "float", "fraction", None, True, "the fraction of time the card ran a kernel in the pair "
     "phases: near 1, the pair is limited by the card's time"),
    ("efficiency_bound", "float", "ratio", None, True, "the most concurrency_efficiency the card's time allows at the "
     "jobs' solo pace: 2 while fg_solo_gpu_busy + bg_solo_gpu_busy <= 1, else 1 + (1 - the smaller) / the larger. A "
     "host that runs host-bound jobs faster raises their busy fractions and lowers this bound"),
    ("sm_clock_mhz", "float", "MHz", None, False, "mean SM clock over the measured window (per round under rounds): a job alone may run at lower clocks than beside another"),
    ("mem_clock_mhz", "float", "MHz", None, False, "mean memory clock over the measured window (per round under rounds)"),
    ("power_limit_w", "float", "W", None, False, "the enforced power limit (per round under rounds)"),
    ("clock_event_reasons", "list", "", None, False, "why the clocks were held down at some point (NVML clock-event reasons, per round under rounds)"),
])

DERIVED = _figures("study", [
    ("concurrent_overhead", "float", "fraction", "lower", True, "fg_slowdown - 1: the foreground's relative increase of training time"),
    ("concurrent_energy_overhead", "float", "fraction", "lower", True, "relative increase of the card's energy over the foreground's solo run"),
    ("interference", "float", "fraction", None, True, "relative change of perf_metric, concurrent vs solo"),
    ("fg_energy_per_epoch_j", "float", "J/epoch", "lower", True, "fg_gpu_energy_j per configured epoch"),
    ("fg_energy_per_perf_j", "float", "J", "lower", True, "fg_gpu_energy_j per unit of a higher-is-better perf_metric"),
    ("sharing_energy_saved_j", "float", "J", "higher", True, "serial_energy_j - gpu_energy_j"),
])

SCALING = _figures("scaling", [
    ("gpus", "int", "GPUs", None, False, "scaling cases: the job's data-parallel processes, one per GPU (on the CPU, processes)"),
    ("backend", "str", "", None, False, "the torch.distributed backend the ranks used: nccl (GPUs) or gloo (CPU)"),
    ("per_gpu_batch", "int", "samples", None, False, "samples each rank trains on per step (the job's batch_size)"),
    ("global_batch", "int", "samples", None, False, "per_gpu_batch x gpus: the samples of one optimiser step"),
    ("warmup_steps", "int", "steps", None, False, "steps before the measured ones, left out"),
    ("measured_steps", "int", "steps", None, False, "steps step_time_s is the mean of"),
    ("step_time_s", "float", "s", "lower", False, "mean time of one data-parallel step after the warm-up, each step "
     "timed to the device's end of it and taken at its slowest rank"),
    ("step_time_ci", "list", "s", None, False, "95 % interval of step_time_s (step_time_method)"),
    ("step_time_blocks", "int", "blocks", None, False, "batch means the interval of step_time_s rests on (degrees of freedom + 1)"),
    ("step_time_method", "str", "", None, False, "how step_time_s and its interval were taken"),
    ("samples_per_s", "float", "samples/s", "higher", False, "global_batch / step_time_s"),
    ("samples_per_s_ci", "list", "samples/s", None, False, "95 % interval of samples_per_s"),
    ("scaling_efficiency", "float", "ratio", "higher", False, "samples_per_s / (gpus x samples_per_s of the "
     "one-GPU case of the same workload) = its step time / step_time_s at a fixed per-GPU batch; 1.0 is linear"),
    ("scaling_efficiency_ci", "list", "ratio", None, False, "95 % interval of scaling_efficiency (both step times' intervals)"),
    ("no_sync_step_time_s", "float", "s", None, False, "mean step time of the probe steps run under DDP's no_sync(): no gradient all-reduce"),
    ("comm_share", "float", "fraction", "lower", False, "share of a step spent on the gradient all-reduce that "
     "backward did not hide: 1 - no_sync_step_time_s / step_time_s"),
    ("comm_share_ci", "list", "fraction", None, False, "95 % interval of comm_share"),
    ("comm_method", "str", "", None, False, "how comm_share was separated"),
    ("data_time_s", "float", "s", "lower", False, "mean wait for a step's batch at the rank that waited longest "
     "(the job's data loading as its trainer's data_time shows it), part of step_time_s"),
    ("data_share", "float", "fraction", None, False, "data_time_s / step_time_s: the step's split between data loading and the rest"),
    ("val_samples", "int", "samples", None, False, "held-out samples of the case's validation, shared among the ranks"),
    ("val_time_s", "float", "s", "lower", False, "the validation's wall time at its slowest rank (outside the measured steps)"),
    ("val_s_per_sample", "float", "s/sample", "lower", False, "val_time_s x gpus / val_samples: one GPU's time to validate a sample"),
    ("peak_mem_phase", "str", "", None, False, "the stretch whose allocator peak was highest: start (first step, "
     "cuDNN's autotuning, warm-up), train, eval (validation) or train after validation"),
    ("peak_mem_allocated_by_phase_mb", "dict", "MB", None, False, "the largest rank's torch peak allocated memory per "
     "stretch (start, train, eval, after_eval)"),
    ("peak_vram_per_gpu_mb", "list", "MB", None, False, "each GPU's peak NVML memory of the job's processes (contexts included), rank order"),
    ("peak_mem_reserved_per_gpu_mb", "list", "MB", None, False, "each rank's torch peak reserved memory (built-ins)"),
    ("card_memory_mb", "float", "MB", None, False, "one card's memory as the job saw it: the emulated size, else the GPU's total"),
    ("peak_memory_fraction", "float", "fraction", "lower", False, "the fullest GPU's peak memory in use / card_memory_mb, "
     "as nvidia-smi shows it on such a card (the driver's share included, the emulation's ballast not)"),
    ("memory_headroom_mb", "float", "MB", "higher", False, "card_memory_mb minus the fullest GPU's peak memory in use"),
    ("gpu_util_per_gpu_pct", "list", "%", None, False, "each GPU's mean NVML utilisation over the measured steps"),
    ("gpus_energy_j", "float", "J", "lower", False, "energy of all the job's GPUs over the measured steps (NVML counters, idle included)"),
    ("energy_per_sample_j", "float", "J/sample", "lower", False, "gpus_energy_j / the samples of the measured steps"),
])

LABELS: dict[str, str] = {
    "fg_slowdown": "foreground slowdown",
    "bg_progress_ratio": "background progress",
    "concurrency_efficiency": "concurrency efficiency",
    "bg_coverage": "background coverage",
    "gpu_energy_j": "GPU energy",
    "fg_gpu_energy_j": "foreground's GPU energy",
    "fg_gpu_energy_per_step_j": "foreground energy per step",
    "bg_gpu_energy_per_step_j": "background energy per step",
    "peak_vram_mb": "peak VRAM",
    "fg_peak_vram_mb": "foreground peak",
    "bg_peak_vram_mb": "background peak",
    "vram_budget_mb": "VRAM budget",
    "min_efficiency": "minimum efficiency",
    "oom": "out of memory",
}


def _labelled(keys: list[Key]) -> dict[str, Key]:
    """The table by name, each key with its short label (kept apart above so the rows stay readable)."""
    return {k.name: replace(k, label=LABELS.get(k.name, "")) for k in keys}


KEYS: dict[str, Key] = _labelled(IDENTITY + TIME + SHARING + ENERGY + MEMORY + OUTCOME + DEVICE + METHOD
                                 + DERIVED + SCALING)
PER_ROUND: tuple[str, ...] = tuple(k.name for k in KEYS.values() if k.per_round)
COMPARISONS: tuple[str, ...] = ("concurrent_overhead", "concurrent_energy_overhead", "interference", "sharing_energy_saved_j")
DERIVED_KEYS: tuple[str, ...] = tuple(k.name for k in DERIVED)
HEADLINE: tuple[str, ...] = ("concurrency_efficiency", "fg_slowdown", "gpu_energy_j", "fg_gpu_energy_j", "peak_vram_mb")

_LOWER_IS_BETTER_PERF = re.compile(r"loss|error|perplexity", re.IGNORECASE)


def perf_higher_is_better(metric: str) -> bool:
    """A model metric's direction: losses, errors and perplexities are better lower, the rest
    (accuracy, mAP, rank-1, ...) higher."""
    return not _LOWER_IS_BETTER_PERF.search(metric)


def direction(name: str) -> Optional[str]:
    """'lower' or 'higher' (is better) for a record key or ``perf.<metric>``; None otherwise."""
    if name.startswith("perf.") and len(name) > 5:
        return "higher" if perf_higher_is_better(name[5:]) else "lower"
    key = KEYS.get(name)
    return key.better if key is not None else None


def meaning(name: str) -> str:
    """What a record key means, for every reader that explains one (a KeyError for an undeclared key)."""
    return KEYS[name].text


def label(name: str) -> str:
    """A record key's short label, or its name where it has none."""
    return KEYS[name].label or name


def axis_label(name: str, unit: str = "") -> str:
    """``label (unit)`` for an axis; ``unit`` replaces the declared one where a reader scales the value."""
    shown = unit or KEYS[name].unit
    return f"{label(name)} ({shown})" if shown else label(name)


def comparable() -> list[str]:
    """The keys a comparison can judge: every figure with a direction."""
    return sorted(name for name, key in KEYS.items() if key.better is not None)


def markdown_table() -> str:
    """The key reference of the documentation, one table per group."""
    lines = ["# Result keys", "",
             "Every key of `result.json` (and of `extra_info` in the benchmark JSON), generated from "
             "`pytest_gpu_pairs/record/keys.py`. A figure that could not be measured is `null`; "
             "`notes.<key>` says why. Keys marked *per round* hold the mean over a case's rounds, "
             "with `<key>_std` beside them, `<key>_ci` (the 95 % interval, interleaved cases) and each "
             "round's value under `rounds`.", ""]
    groups: dict[str, list[Key]] = {}
    for key in KEYS.values():
        groups.setdefault(key.group, []).append(key)
    for group, keys in groups.items():
        lines += [f"## {group.capitalize()}", "", "| key | type | unit | better | per round | meaning |",
                  "|---|---|---|---|---|---|"]
        for k in keys:
            lines.append(f"| `{k.name}` | {k.type} | {k.unit} | {k.better or ''} | {'yes' if k.per_round else ''} "
                         f"| {k.text.replace('|', '/')} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown_table())
