"""Every key of the result record as a typed field, generated from ``record/keys.py`` by
``python -m tools.codegen.record_fields``: do not edit by hand (a test compares this module with
the table). ``record/model.py`` makes the record from these fields; type checkers and editors read
its attributes here, so a misspelt ``record.<key>`` is an error before anything runs.

Every field is optional: a figure that could not be measured is None (its reason under the same
key in ``notes``), and a key that was never set is left out of the record on disk.
"""
from typing import Annotated, Any, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr

Number = Union[StrictInt, StrictFloat]
Interval = Annotated[list[Optional[Number]], Field(min_length=2, max_length=2)]  # [low, high]: the 95 % interval


class JobFigures(BaseModel):
    """One job of a case (an entry of ``jobs``): its role and workload, its paces alone and shared,
    its share of the energy and its whole-run memory need; the means over the case's rounds, or
    one round's figures under ``rounds``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: StrictStr
    model: Optional[StrictStr] = None
    solo_steps_per_s: Optional[Number] = None
    steps_per_s: Optional[Number] = None
    progress_ratio: Optional[Number] = None
    gpu_energy_j: Optional[Number] = None
    gpu_energy_per_step_j: Optional[Number] = None
    alone_energy_j: Optional[Number] = None
    solo_gpu_busy: Optional[Number] = None
    vram_need_mb: Optional[Number] = None
    vram_need_phase: Optional[StrictStr] = None


class RecordFields(BaseModel):
    """One case's (or one round's) result, every key typed as ``record.keys`` declares it."""

    # built where a record is first checked, not at import: only the record made from these fields is ever
    # checked, and a process that checks none (a collection, a CLI refusing its input) skips the work
    model_config = ConfigDict(defer_build=True)

    case_id: Optional[StrictStr] = None
    """stable id of the case: `<group>-<fg>+<bg>-<variant>-<mode>[-mps]` (a group of more jobs names each: `<fg>+<bg>+<bg2>`)"""
    design: Optional[StrictStr] = None
    """the experiment's design: pairs, hp_study, mutation or scaling"""
    variant: Optional[StrictStr] = None
    """which hyperparameter variant of the pair this case is"""
    mode: Optional[StrictStr] = None
    """concurrent (two jobs share the device), solo (one job alone) or scaling (one job data-parallel on gpus GPUs)"""
    sharing: Optional[StrictStr] = None
    """how the jobs shared the GPU: timeslice (the driver's default) or mps"""
    fg_model: Optional[StrictStr] = None
    """the foreground workload"""
    bg_model: Optional[StrictStr] = None
    """the background workload (None for a solo case)"""
    fg_hparams: Optional[dict[str, Any]] = None
    """the foreground's effective hyperparameters"""
    bg_hparams: Optional[dict[str, Any]] = None
    """the background's effective hyperparameters"""
    fg_runs: Optional[StrictInt] = None
    """a kept-running background alone, its solo reference: the runs it trained back to back in one process (its pace is read over the runs after the first, warm, as it runs beside a foreground); absent for one run"""
    complete: Optional[StrictBool] = None
    """the case ran to its end (passing or failing); false: interrupted"""
    interrupted: Optional[StrictStr] = None
    """why an incomplete case stopped (Ctrl-C, SIGTERM, a harness error)"""
    reused_measurement: Optional[StrictStr] = None
    """a solo case that reports the session's earlier measurement of its job"""
    settings_digest: Optional[dict[str, Any]] = None
    """digests of what the case measured: fg and bg (each job's workload, hyperparameters, and a command workload's argv, cwd, env and patterns) and measurement (method, phases, rounds, timeouts, scale, device, precision target, ...); --gpu-pairs-resume measures a case again where one differs"""
    repeats: Optional[StrictInt] = None
    """how many rounds the figures are the mean of"""
    rounds: Optional[list[dict[str, Any]]] = None
    """with repeats: each round's figures"""
    timeline: Optional[dict[str, Any]] = None
    """wall-clock stamps of every phase of the case (read by dead-time)"""
    notes: Optional[dict[str, StrictStr]] = None
    """key -> why that key is None, or what qualifies it"""
    plugin_keys: Optional[list[Any]] = None
    """keys other plugins added through the pytest_gpu_pairs_record hook, kept as they gave them (any other key outside this table is refused)"""
    fg_duration_s: Optional[Number] = None
    """the foreground's training time (first to last step; process time for a job that reports no progress)"""
    fg_wall_s: Optional[Number] = None
    """the foreground process's whole lifetime, startup included"""
    fg_startup_s: Optional[Number] = None
    """from process start to the job's setup event"""
    fg_solo_duration_s: Optional[Number] = None
    """the foreground's training time alone on the device"""
    fg_steps_in_window: Optional[Number] = None
    """foreground steps inside the window (a solo baseline's energy per step is its window's energy over these, also when a resumed session reads it from the record)"""
    duration_basis: Optional[StrictStr] = None
    """training (first to last step, from fg_progress_source) or process (wall time)"""
    fg_progress_source: Optional[StrictStr] = None
    """where the foreground's steps came from: protocol, log (its progress_pattern), or None (it reported none)"""
    window_s: Optional[Number] = None
    """the measured window: the foreground's training time"""
    case_wall_s: Optional[Number] = None
    """the case's wall time: solo baselines, warm-up and every round (pytest-benchmark's statistics hold the figure named by benchmark_figure)"""
    fg_slowdown: Optional[Number] = None
    """fg_duration_s / fg_solo_duration_s: the foreground's time beside the background over its time alone"""
    bg_progress_ratio: Optional[Number] = None
    """background steps in the window / (window_s x its solo step rate)"""
    bg_speed_ratio: Optional[Number] = None
    """bg_progress_ratio over the time the background was training only"""
    concurrency_efficiency: Optional[Number] = None
    """the sum over the jobs of each one's progress in the shared phase over its solo progress (a pair: 1 / fg_slowdown + bg_progress_ratio): above 1, sharing did more work than one job alone; n_jobs (2.0 for a pair): sharing is free"""
    n_jobs: Optional[StrictInt] = None
    """how many jobs the case ran on the device: 1 for a solo case, 2 for a pair, more for a group (its further backgrounds are bg2, bg3, ...); the bound of concurrency_efficiency"""
    jobs: Optional[list[JobFigures]] = None
    """every job of an interleaved case, the foreground first: role, model, solo_steps_per_s and steps_per_s (shared), progress_ratio (shared over solo), gpu_energy_j (its share of the energy above idle: the shares add up to gpu_energy_above_idle_j), gpu_energy_per_step_j, alone_energy_j, solo_gpu_busy, and its whole-run memory need (vram_need_mb, vram_need_phase); a pair's first two are also its fg_ and bg_ keys"""
    bg_coverage: Optional[Number] = None
    """fraction of the window in which the background was training"""
    min_coverage: Optional[Number] = None
    """the least bg_coverage a round needs to count: 0.95 in the hp_study and mutation designs, whose question is a whole run's outcome, which a background that covered less of it did not share; none in the pairs design unless its defaults.min_coverage says"""
    rounds_refused: Optional[StrictInt] = None
    """rounds left out of the figures because their bg_coverage was below min_coverage; each stays under rounds with the reason in its coverage_refused"""
    coverage_refused: Optional[StrictStr] = None
    """why the case holds no data point: every round's background covered less of the foreground's run than min_coverage (the case fails; analyses leave it out); under rounds, why that round does not count"""
    bg_runs: Optional[Number] = None
    """background runs started during the case"""
    bg_failures: Optional[Number] = None
    """background runs that failed"""
    bg_steps_in_window: Optional[Number] = None
    """background steps inside the window"""
    bg_solo_steps_per_s: Optional[Number] = None
    """the background's step rate alone"""
    bg_alone_steps_per_s: Optional[Number] = None
    """a kept-running background's step rate alone in its own process, in the windows just before and just after the foreground's run: the reference of its progress ratio there"""
    bg_alone_drift: Optional[Number] = None
    """a kept-running background's pace alone after the foreground's run over its pace alone before it, less 1: how far the host's pace moved during the run"""
    bg_progress_source: Optional[StrictStr] = None
    """where the background's steps came from: protocol, log (its progress_pattern), or None (it reported none)"""
    gpu_energy_j: Optional[Number] = None
    """the card's energy over the window (NVML total-energy counter)"""
    gpu_energy_above_idle_j: Optional[Number] = None
    """gpu_energy_j minus idle power x window"""
    fg_gpu_energy_j: Optional[Number] = None
    """the foreground's share of the energy above idle"""
    bg_gpu_energy_j: Optional[Number] = None
    """the background's share of the energy above idle"""
    fg_alone_energy_j: Optional[Number] = None
    """interleaved: what the foreground's steps in the pair phase cost it alone (its solo energy per step above idle, same round): its stand-alone value in the energy split, and what compare judges its share against"""
    bg_alone_energy_j: Optional[Number] = None
    """interleaved: what the background's steps in the pair phase cost it alone, as fg_alone_energy_j"""
    fg_gpu_energy_per_step_j: Optional[Number] = None
    """the foreground's share per step it took beside the background (interleaved: in the pair phase)"""
    bg_gpu_energy_per_step_j: Optional[Number] = None
    """the background's share per step it took beside the foreground (interleaved: in the pair phase)"""
    energy_split_method: Optional[StrictStr] = None
    """how the energy above idle was split: shapley_solo_energy (interleaved), solo, sm_util, progress_x_solo_energy, time_share"""
    serial_energy_j: Optional[Number] = None
    """the window's work done serially: each job's steps at its solo energy per step"""
    energy_saved_vs_serial: Optional[Number] = None
    """1 - gpu_energy_j / serial_energy_j"""
    cpu_energy_j: Optional[Number] = None
    """CPU package energy over the window (RAPL)"""
    cpu_energy_method: Optional[StrictStr] = None
    """rapl, or None when RAPL was not readable (no estimate is offered in its place)"""
    gpu_power_avg_w: Optional[Number] = None
    """mean polled board power in the window"""
    gpu_power_max_w: Optional[Number] = None
    """highest polled board power in the window"""
    gpu_util_avg_pct: Optional[Number] = None
    """mean NVML GPU utilisation in the window"""
    gpu_temp_max_c: Optional[Number] = None
    """highest GPU temperature in the window"""
    idle_power_w: Optional[Number] = None
    """the card's idle power, measured at session start"""
    idle_power_method: Optional[StrictStr] = None
    """how idle power was measured"""
    peak_vram_mb: Optional[Number] = None
    """peak of the jobs' NVML per-process memory together, CUDA contexts included"""
    fg_peak_vram_mb: Optional[Number] = None
    """the foreground's peak NVML per-process memory"""
    bg_peak_vram_mb: Optional[Number] = None
    """the background's peak NVML per-process memory"""
    other_peak_vram_mb: Optional[Number] = None
    """peak memory of GPU processes that are not the case's jobs"""
    fg_peak_mem_reserved_mb: Optional[Number] = None
    """the foreground's peak torch reserved memory (built-ins)"""
    bg_peak_mem_reserved_mb: Optional[Number] = None
    """the background's peak torch reserved memory (built-ins)"""
    mps_server_vram_mb: Optional[Number] = None
    """memory of the MPS server process (mps cases)"""
    vram_budget_mb: Optional[Number] = None
    """the pair's peak VRAM budget (a check)"""
    vram_budget_source: Optional[StrictStr] = None
    """which memory figure the budget is checked against: vram_fit_mb (whole runs) where both jobs' fit profiles were measured, else peak_vram_mb (the case's sampled peak)"""
    vram_fit_mb: Optional[Number] = None
    """the pair's whole-run need: the most each job held at any point of a complete run (start-up with cuDNN's autotuning, training, evaluation, a checkpoint, a second start) alone on the card vram_card_mb, both added, plus vram_together_mb; the budget check uses it"""
    vram_steady_mb: Optional[Number] = None
    """the same while both jobs train steadily (after their first step)"""
    vram_transient_mb: Optional[Number] = None
    """vram_fit_mb - vram_steady_mb: what start-up, evaluation or a checkpoint needs beyond steady training"""
    vram_peak_phase: Optional[StrictStr] = None
    """which job, and which part of its run, set the larger transient"""
    vram_verdict: Optional[StrictStr] = None
    """fits (vram_fit_mb within the budget), over budget (above it, though the card holds the pair's steady need), or no fit (a job ran out of memory alone on the card, or the steady need exceeds the card)"""
    vram_uncertainty_mb: Optional[Number] = None
    """how far vram_fit_mb may be off: the allocator's and NVML's resolution, or how far the fit profiles' starts lay apart where that is more"""
    vram_card_mb: Optional[Number] = None
    """the card the fit profiles were measured on (emulated; the settings' card_mb or --gpu-pairs-gpu-memory-mb); None: the whole GPU"""
    vram_together_mb: Optional[Number] = None
    """memory running together costs beyond both jobs' own: the MPS server's under MPS, 0 under time-slicing (each job's memory is its own process's)"""
    fg_vram_need_mb: Optional[Number] = None
    """the foreground's whole-run need from its fit profile, CUDA context included"""
    bg_vram_need_mb: Optional[Number] = None
    """the background's whole-run need from its fit profile"""
    fg_vram_need_phase: Optional[StrictStr] = None
    """the part of the foreground's run that set its need: setup, start (first step, cuDNN's autotuning), train, eval, checkpoint; for a command workload start, train, gap or end"""
    bg_vram_need_phase: Optional[StrictStr] = None
    """the same for the background"""
    fit_profile_s: Optional[Number] = None
    """device seconds this case spent measuring fit profiles no earlier case of the results folder had measured (0: all were reused)"""
    gpu_memory_mb: Optional[Number] = None
    """the emulated card's size (--gpu-pairs-gpu-memory-mb), None without emulation"""
    ballast_held_mb: Optional[Number] = None
    """memory the ballast held to emulate the smaller card"""
    gpu_free_mb_emulated: Optional[Number] = None
    """free memory the jobs saw on the emulated card"""
    gpu_used_before_ballast_mb: Optional[Number] = None
    """memory in use before the ballast started"""
    oom: Optional[StrictBool] = None
    """a job ran out of memory"""
    failure: Optional[StrictStr] = None
    """why the case failed (None when it did not)"""
    fg_exit_code: Optional[StrictInt] = None
    """the foreground process's exit code"""
    min_efficiency: Optional[Number] = None
    """the pair's minimum concurrency efficiency (a check)"""
    perf: Optional[dict[str, Any]] = None
    """the foreground's model metrics; accuracy-like ones fractions 0-1, losses in nats (docs: settings, built-in workloads)"""
    bg_perf: Optional[dict[str, Any]] = None
    """model metrics of the last background run that finished"""
    bg_cycle_perf: Optional[list[dict[str, Any]]] = None
    """a kept-running background (defaults.keep_background): each of its runs that overlapped the foreground's, in order: its model metrics and the fraction of it shared"""
    perf_metric: Optional[StrictStr] = None
    """the metric the study compares (the workload's first)"""
    fg_epochs: Optional[Number] = None
    """the foreground's configured epochs"""
    mps: Optional[dict[str, Any]] = None
    """mps cases: each job's limits, the daemon's server and client pids"""
    device: Optional[StrictStr] = None
    """the GPU's name, or cpu"""
    gpu_uuid: Optional[StrictStr] = None
    """the GPU's UUID (None on the CPU): which card, where the name says only which model"""
    host: Optional[StrictStr] = None
    """the machine's host name; a resumed session compares its shared runs with an earlier session's solo case only where both ran on this host and GPU"""
    scale: Optional[Number] = None
    """fraction of each epoch's steps every job ran (--gpu-pairs-scale)"""
    sample_hz: Optional[Number] = None
    """the monitors' sampling rate (None without GPU samples)"""
    job_cpus: Optional[dict[str, Any]] = None
    """the CPUs each job was pinned to, and the harness's core, in the kernel's list format (None: not pinned, notes say why)"""
    method: Optional[StrictStr] = None
    """interleaved (rounds of fg alone, bg alone, both: figures that reproduce) or epoch (the default: one foreground epoch under a background restart loop)"""
    n_rounds: Optional[StrictInt] = None
    """interleaved rounds the figures are the mean of"""
    n_rounds_effective: Optional[Number] = None
    """independent rounds the efficiency's interval is worth: bracketed rounds share a solo phase with each neighbour"""
    interval_method: Optional[StrictStr] = None
    """how the 95 % intervals were taken: student_t (independent rounds), student_t_lag1 (bracketed rounds, on their lag-1 long-run variance) or student_t_starts (bracketed rounds over independent starts of the pair: the rounds' own noise and the starts' offsets)"""
    precision_target: Optional[Number] = None
    """the stopping rule's target: relative half width of the efficiency's 95 % interval (None: fixed rounds)"""
    precision_achieved: Optional[Number] = None
    """the relative half width the efficiency's interval reached"""
    precision_reached: Optional[StrictBool] = None
    """whether the target was reached (None without a target)"""
    stop_reason: Optional[StrictStr] = None
    """why the case stopped adding rounds"""
    n_starts: Optional[StrictInt] = None
    """independent starts of the pair the rounds were spread over: both jobs started anew (or taken from standby at their start gates) and warmed up again for each"""
    starts: Optional[list[Any]] = None
    """each start: its segment, start-up and warm-up seconds, whether its jobs waited in standby, whether the warm-up ended steady, its rounds, its mean efficiency and solo paces"""
    between_start_sd: Optional[Number] = None
    """how far starts of the pair land apart (relative sd of a start's offset) as the interval took it: the prior pooled with the case's own starts"""
    between_start_df: Optional[Number] = None
    """the degrees of freedom between_start_sd is worth"""
    between_start_basis: Optional[StrictStr] = None
    """where between_start_sd comes from"""
    between_start_prior: Optional[dict[str, Any]] = None
    """the prior the interval pooled with the case's own starts: sd, df and the study that measured it (None: none, as on the CPU)"""
    rounds_excluded: Optional[StrictInt] = None
    """interleaved rounds left out of every figure: a job was silent through part of a phase (not training there), or the energy split could not be taken"""
    fg_restarts: Optional[StrictInt] = None
    """times the foreground finished its run (exit code 0) during an interleaved case and was started again"""
    bg_restarts: Optional[StrictInt] = None
    """times the background finished its run during an interleaved case and was started again"""
    rounds_discarded: Optional[StrictInt] = None
    """interleaved rounds discarded around restarts: measured after the ended run's last step report"""
    restarts: Optional[list[Any]] = None
    """each restart: role, run, exit and last-step times, the run's training seconds, the rounds discarded, and when the new run started"""
    benchmark_figure: Optional[StrictStr] = None
    """what pytest-benchmark's statistics of the case hold: one value per interleaved round of pair_s_per_solo_s (1 / concurrency_efficiency), or the foreground run's seconds (epoch)"""
    gpu_seconds: Optional[Number] = None
    """device time the case held: start of its jobs to their end, warm-up included"""
    warmup_s: Optional[Number] = None
    """excluded as warm-up: from the jobs' start until the first round"""
    warmup_rule: Optional[StrictStr] = None
    """the rule that decided the warm-up"""
    phase_s: Optional[Number] = None
    """measured seconds of each phase: the settings' phase_s, or a whole multiple of it so that the slower job reports its steps at least 6 times in it"""
    settle_s: Optional[Number] = None
    """seconds left out after every switch of phase: the settings' settle_s, or two steps of the slower job if longer"""
    fg_steps_per_s: Optional[Number] = None
    """the foreground's step rate beside the background"""
    fg_solo_steps_per_s: Optional[Number] = None
    """the foreground's step rate alone"""
    bg_steps_per_s: Optional[Number] = None
    """the background's step rate beside the foreground"""
    fg_solo_gpu_busy: Optional[Number] = None
    """the fraction of time the card ran a kernel while the foreground trained alone (NVML's utilisation in its solo phases): how much of the card it needs at its solo pace"""
    bg_solo_gpu_busy: Optional[Number] = None
    """the same for the background in its solo phases"""
    pair_gpu_busy: Optional[Number] = None
    """the fraction of time the card ran a kernel in the pair phases: near 1, the pair is limited by the card's time"""
    efficiency_bound: Optional[Number] = None
    """the most concurrency_efficiency the card's time allows at the jobs' solo pace: 2 while fg_solo_gpu_busy + bg_solo_gpu_busy <= 1, else 1 + (1 - the smaller) / the larger. A host that runs host-bound jobs faster raises their busy fractions and lowers this bound"""
    sm_clock_mhz: Optional[Number] = None
    """mean SM clock over the measured window (per round under rounds): a job alone may run at lower clocks than beside another"""
    mem_clock_mhz: Optional[Number] = None
    """mean memory clock over the measured window (per round under rounds)"""
    power_limit_w: Optional[Number] = None
    """the enforced power limit (per round under rounds)"""
    clock_event_reasons: Optional[list[Any]] = None
    """why the clocks were held down at some point (NVML clock-event reasons, per round under rounds)"""
    concurrent_overhead: Optional[Number] = None
    """fg_slowdown - 1: the foreground's relative increase of training time"""
    concurrent_energy_overhead: Optional[Number] = None
    """relative increase of the card's energy over the foreground's solo run"""
    interference: Optional[Number] = None
    """relative change of perf_metric, concurrent vs solo"""
    fg_energy_per_epoch_j: Optional[Number] = None
    """fg_gpu_energy_j per configured epoch"""
    fg_energy_per_perf_j: Optional[Number] = None
    """fg_gpu_energy_j per unit of a higher-is-better perf_metric"""
    sharing_energy_saved_j: Optional[Number] = None
    """serial_energy_j - gpu_energy_j"""
    gpus: Optional[StrictInt] = None
    """scaling cases: the job's data-parallel processes, one per GPU (on the CPU, processes)"""
    backend: Optional[StrictStr] = None
    """the torch.distributed backend the ranks used: nccl (GPUs) or gloo (CPU)"""
    per_gpu_batch: Optional[StrictInt] = None
    """samples each rank trains on per step (the job's batch_size)"""
    global_batch: Optional[StrictInt] = None
    """per_gpu_batch x gpus: the samples of one optimiser step"""
    warmup_steps: Optional[StrictInt] = None
    """steps before the measured ones, left out"""
    measured_steps: Optional[StrictInt] = None
    """steps step_time_s is the mean of"""
    step_time_s: Optional[Number] = None
    """mean time of one data-parallel step after the warm-up, each step timed to the device's end of it and taken at its slowest rank"""
    step_time_ci: Optional[list[Any]] = None
    """95 % interval of step_time_s (step_time_method)"""
    step_time_blocks: Optional[StrictInt] = None
    """batch means the interval of step_time_s rests on (degrees of freedom + 1)"""
    step_time_method: Optional[StrictStr] = None
    """how step_time_s and its interval were taken"""
    samples_per_s: Optional[Number] = None
    """global_batch / step_time_s"""
    samples_per_s_ci: Optional[list[Any]] = None
    """95 % interval of samples_per_s"""
    scaling_efficiency: Optional[Number] = None
    """samples_per_s / (gpus x samples_per_s of the one-GPU case of the same workload) = its step time / step_time_s at a fixed per-GPU batch; 1.0 is linear"""
    scaling_efficiency_ci: Optional[list[Any]] = None
    """95 % interval of scaling_efficiency (both step times' intervals)"""
    no_sync_step_time_s: Optional[Number] = None
    """mean step time of the probe steps run under DDP's no_sync(): no gradient all-reduce"""
    comm_share: Optional[Number] = None
    """share of a step spent on the gradient all-reduce that backward did not hide: 1 - no_sync_step_time_s / step_time_s"""
    comm_share_ci: Optional[list[Any]] = None
    """95 % interval of comm_share"""
    comm_method: Optional[StrictStr] = None
    """how comm_share was separated"""
    data_time_s: Optional[Number] = None
    """mean wait for a step's batch at the rank that waited longest (the job's data loading as its trainer's data_time shows it), part of step_time_s"""
    data_share: Optional[Number] = None
    """data_time_s / step_time_s: the step's split between data loading and the rest"""
    val_samples: Optional[StrictInt] = None
    """held-out samples of the case's validation, shared among the ranks"""
    val_time_s: Optional[Number] = None
    """the validation's wall time at its slowest rank (outside the measured steps)"""
    val_s_per_sample: Optional[Number] = None
    """val_time_s x gpus / val_samples: one GPU's time to validate a sample"""
    peak_mem_phase: Optional[StrictStr] = None
    """the stretch whose allocator peak was highest: start (first step, cuDNN's autotuning, warm-up), train, eval (validation) or train after validation"""
    peak_mem_allocated_by_phase_mb: Optional[dict[str, Any]] = None
    """the largest rank's torch peak allocated memory per stretch (start, train, eval, after_eval)"""
    peak_vram_per_gpu_mb: Optional[list[Any]] = None
    """each GPU's peak NVML memory of the job's processes (contexts included), rank order"""
    peak_mem_reserved_per_gpu_mb: Optional[list[Any]] = None
    """each rank's torch peak reserved memory (built-ins)"""
    card_memory_mb: Optional[Number] = None
    """one card's memory as the job saw it: the emulated size, else the GPU's total"""
    peak_memory_fraction: Optional[Number] = None
    """the fullest GPU's peak memory in use / card_memory_mb, as nvidia-smi shows it on such a card (the driver's share included, the emulation's ballast not)"""
    memory_headroom_mb: Optional[Number] = None
    """card_memory_mb minus the fullest GPU's peak memory in use"""
    gpu_util_per_gpu_pct: Optional[list[Any]] = None
    """each GPU's mean NVML utilisation over the measured steps"""
    gpus_energy_j: Optional[Number] = None
    """energy of all the job's GPUs over the measured steps (NVML counters, idle included)"""
    energy_per_sample_j: Optional[Number] = None
    """gpus_energy_j / the samples of the measured steps"""
    schema_version: Optional[StrictInt] = Field(None, alias="schema")
    """version of this record's layout (2: every accuracy-like metric a fraction)"""
    fg_duration_s_std: Optional[Number] = None
    """the standard deviation of fg_duration_s over the rounds"""
    fg_wall_s_std: Optional[Number] = None
    """the standard deviation of fg_wall_s over the rounds"""
    fg_startup_s_std: Optional[Number] = None
    """the standard deviation of fg_startup_s over the rounds"""
    window_s_std: Optional[Number] = None
    """the standard deviation of window_s over the rounds"""
    fg_slowdown_std: Optional[Number] = None
    """the standard deviation of fg_slowdown over the rounds"""
    bg_progress_ratio_std: Optional[Number] = None
    """the standard deviation of bg_progress_ratio over the rounds"""
    bg_speed_ratio_std: Optional[Number] = None
    """the standard deviation of bg_speed_ratio over the rounds"""
    concurrency_efficiency_std: Optional[Number] = None
    """the standard deviation of concurrency_efficiency over the rounds"""
    bg_coverage_std: Optional[Number] = None
    """the standard deviation of bg_coverage over the rounds"""
    bg_runs_std: Optional[Number] = None
    """the standard deviation of bg_runs over the rounds"""
    bg_failures_std: Optional[Number] = None
    """the standard deviation of bg_failures over the rounds"""
    bg_solo_steps_per_s_std: Optional[Number] = None
    """the standard deviation of bg_solo_steps_per_s over the rounds"""
    bg_alone_steps_per_s_std: Optional[Number] = None
    """the standard deviation of bg_alone_steps_per_s over the rounds"""
    bg_alone_drift_std: Optional[Number] = None
    """the standard deviation of bg_alone_drift over the rounds"""
    gpu_energy_j_std: Optional[Number] = None
    """the standard deviation of gpu_energy_j over the rounds"""
    gpu_energy_above_idle_j_std: Optional[Number] = None
    """the standard deviation of gpu_energy_above_idle_j over the rounds"""
    fg_gpu_energy_j_std: Optional[Number] = None
    """the standard deviation of fg_gpu_energy_j over the rounds"""
    bg_gpu_energy_j_std: Optional[Number] = None
    """the standard deviation of bg_gpu_energy_j over the rounds"""
    fg_alone_energy_j_std: Optional[Number] = None
    """the standard deviation of fg_alone_energy_j over the rounds"""
    bg_alone_energy_j_std: Optional[Number] = None
    """the standard deviation of bg_alone_energy_j over the rounds"""
    fg_gpu_energy_per_step_j_std: Optional[Number] = None
    """the standard deviation of fg_gpu_energy_per_step_j over the rounds"""
    bg_gpu_energy_per_step_j_std: Optional[Number] = None
    """the standard deviation of bg_gpu_energy_per_step_j over the rounds"""
    serial_energy_j_std: Optional[Number] = None
    """the standard deviation of serial_energy_j over the rounds"""
    energy_saved_vs_serial_std: Optional[Number] = None
    """the standard deviation of energy_saved_vs_serial over the rounds"""
    cpu_energy_j_std: Optional[Number] = None
    """the standard deviation of cpu_energy_j over the rounds"""
    gpu_power_avg_w_std: Optional[Number] = None
    """the standard deviation of gpu_power_avg_w over the rounds"""
    gpu_power_max_w_std: Optional[Number] = None
    """the standard deviation of gpu_power_max_w over the rounds"""
    gpu_util_avg_pct_std: Optional[Number] = None
    """the standard deviation of gpu_util_avg_pct over the rounds"""
    gpu_temp_max_c_std: Optional[Number] = None
    """the standard deviation of gpu_temp_max_c over the rounds"""
    peak_vram_mb_std: Optional[Number] = None
    """the standard deviation of peak_vram_mb over the rounds"""
    fg_peak_vram_mb_std: Optional[Number] = None
    """the standard deviation of fg_peak_vram_mb over the rounds"""
    bg_peak_vram_mb_std: Optional[Number] = None
    """the standard deviation of bg_peak_vram_mb over the rounds"""
    other_peak_vram_mb_std: Optional[Number] = None
    """the standard deviation of other_peak_vram_mb over the rounds"""
    fg_peak_mem_reserved_mb_std: Optional[Number] = None
    """the standard deviation of fg_peak_mem_reserved_mb over the rounds"""
    bg_peak_mem_reserved_mb_std: Optional[Number] = None
    """the standard deviation of bg_peak_mem_reserved_mb over the rounds"""
    mps_server_vram_mb_std: Optional[Number] = None
    """the standard deviation of mps_server_vram_mb over the rounds"""
    fg_steps_per_s_std: Optional[Number] = None
    """the standard deviation of fg_steps_per_s over the rounds"""
    fg_solo_steps_per_s_std: Optional[Number] = None
    """the standard deviation of fg_solo_steps_per_s over the rounds"""
    bg_steps_per_s_std: Optional[Number] = None
    """the standard deviation of bg_steps_per_s over the rounds"""
    fg_solo_gpu_busy_std: Optional[Number] = None
    """the standard deviation of fg_solo_gpu_busy over the rounds"""
    bg_solo_gpu_busy_std: Optional[Number] = None
    """the standard deviation of bg_solo_gpu_busy over the rounds"""
    pair_gpu_busy_std: Optional[Number] = None
    """the standard deviation of pair_gpu_busy over the rounds"""
    efficiency_bound_std: Optional[Number] = None
    """the standard deviation of efficiency_bound over the rounds"""
    concurrent_overhead_std: Optional[Number] = None
    """the standard deviation of concurrent_overhead over the rounds"""
    concurrent_energy_overhead_std: Optional[Number] = None
    """the standard deviation of concurrent_energy_overhead over the rounds"""
    interference_std: Optional[Number] = None
    """the standard deviation of interference over the rounds"""
    fg_energy_per_epoch_j_std: Optional[Number] = None
    """the standard deviation of fg_energy_per_epoch_j over the rounds"""
    fg_energy_per_perf_j_std: Optional[Number] = None
    """the standard deviation of fg_energy_per_perf_j over the rounds"""
    sharing_energy_saved_j_std: Optional[Number] = None
    """the standard deviation of sharing_energy_saved_j over the rounds"""
    fg_duration_s_ci: Optional[Interval] = None
    """the 95 % interval of fg_duration_s ([low, high])"""
    fg_wall_s_ci: Optional[Interval] = None
    """the 95 % interval of fg_wall_s ([low, high])"""
    fg_startup_s_ci: Optional[Interval] = None
    """the 95 % interval of fg_startup_s ([low, high])"""
    window_s_ci: Optional[Interval] = None
    """the 95 % interval of window_s ([low, high])"""
    fg_slowdown_ci: Optional[Interval] = None
    """the 95 % interval of fg_slowdown ([low, high])"""
    bg_progress_ratio_ci: Optional[Interval] = None
    """the 95 % interval of bg_progress_ratio ([low, high])"""
    bg_speed_ratio_ci: Optional[Interval] = None
    """the 95 % interval of bg_speed_ratio ([low, high])"""
    concurrency_efficiency_ci: Optional[Interval] = None
    """the 95 % interval of concurrency_efficiency ([low, high])"""
    bg_coverage_ci: Optional[Interval] = None
    """the 95 % interval of bg_coverage ([low, high])"""
    bg_runs_ci: Optional[Interval] = None
    """the 95 % interval of bg_runs ([low, high])"""
    bg_failures_ci: Optional[Interval] = None
    """the 95 % interval of bg_failures ([low, high])"""
    bg_solo_steps_per_s_ci: Optional[Interval] = None
    """the 95 % interval of bg_solo_steps_per_s ([low, high])"""
    bg_alone_steps_per_s_ci: Optional[Interval] = None
    """the 95 % interval of bg_alone_steps_per_s ([low, high])"""
    bg_alone_drift_ci: Optional[Interval] = None
    """the 95 % interval of bg_alone_drift ([low, high])"""
    gpu_energy_j_ci: Optional[Interval] = None
    """the 95 % interval of gpu_energy_j ([low, high])"""
    gpu_energy_above_idle_j_ci: Optional[Interval] = None
    """the 95 % interval of gpu_energy_above_idle_j ([low, high])"""
    fg_gpu_energy_j_ci: Optional[Interval] = None
    """the 95 % interval of fg_gpu_energy_j ([low, high])"""
    bg_gpu_energy_j_ci: Optional[Interval] = None
    """the 95 % interval of bg_gpu_energy_j ([low, high])"""
    fg_alone_energy_j_ci: Optional[Interval] = None
    """the 95 % interval of fg_alone_energy_j ([low, high])"""
    bg_alone_energy_j_ci: Optional[Interval] = None
    """the 95 % interval of bg_alone_energy_j ([low, high])"""
    fg_gpu_energy_per_step_j_ci: Optional[Interval] = None
    """the 95 % interval of fg_gpu_energy_per_step_j ([low, high])"""
    bg_gpu_energy_per_step_j_ci: Optional[Interval] = None
    """the 95 % interval of bg_gpu_energy_per_step_j ([low, high])"""
    serial_energy_j_ci: Optional[Interval] = None
    """the 95 % interval of serial_energy_j ([low, high])"""
    energy_saved_vs_serial_ci: Optional[Interval] = None
    """the 95 % interval of energy_saved_vs_serial ([low, high])"""
    cpu_energy_j_ci: Optional[Interval] = None
    """the 95 % interval of cpu_energy_j ([low, high])"""
    gpu_power_avg_w_ci: Optional[Interval] = None
    """the 95 % interval of gpu_power_avg_w ([low, high])"""
    gpu_power_max_w_ci: Optional[Interval] = None
    """the 95 % interval of gpu_power_max_w ([low, high])"""
    gpu_util_avg_pct_ci: Optional[Interval] = None
    """the 95 % interval of gpu_util_avg_pct ([low, high])"""
    gpu_temp_max_c_ci: Optional[Interval] = None
    """the 95 % interval of gpu_temp_max_c ([low, high])"""
    peak_vram_mb_ci: Optional[Interval] = None
    """the 95 % interval of peak_vram_mb ([low, high])"""
    fg_peak_vram_mb_ci: Optional[Interval] = None
    """the 95 % interval of fg_peak_vram_mb ([low, high])"""
    bg_peak_vram_mb_ci: Optional[Interval] = None
    """the 95 % interval of bg_peak_vram_mb ([low, high])"""
    other_peak_vram_mb_ci: Optional[Interval] = None
    """the 95 % interval of other_peak_vram_mb ([low, high])"""
    fg_peak_mem_reserved_mb_ci: Optional[Interval] = None
    """the 95 % interval of fg_peak_mem_reserved_mb ([low, high])"""
    bg_peak_mem_reserved_mb_ci: Optional[Interval] = None
    """the 95 % interval of bg_peak_mem_reserved_mb ([low, high])"""
    mps_server_vram_mb_ci: Optional[Interval] = None
    """the 95 % interval of mps_server_vram_mb ([low, high])"""
    fg_steps_per_s_ci: Optional[Interval] = None
    """the 95 % interval of fg_steps_per_s ([low, high])"""
    fg_solo_steps_per_s_ci: Optional[Interval] = None
    """the 95 % interval of fg_solo_steps_per_s ([low, high])"""
    bg_steps_per_s_ci: Optional[Interval] = None
    """the 95 % interval of bg_steps_per_s ([low, high])"""
    fg_solo_gpu_busy_ci: Optional[Interval] = None
    """the 95 % interval of fg_solo_gpu_busy ([low, high])"""
    bg_solo_gpu_busy_ci: Optional[Interval] = None
    """the 95 % interval of bg_solo_gpu_busy ([low, high])"""
    pair_gpu_busy_ci: Optional[Interval] = None
    """the 95 % interval of pair_gpu_busy ([low, high])"""
    efficiency_bound_ci: Optional[Interval] = None
    """the 95 % interval of efficiency_bound ([low, high])"""
    concurrent_overhead_ci: Optional[Interval] = None
    """the 95 % interval of concurrent_overhead ([low, high])"""
    concurrent_energy_overhead_ci: Optional[Interval] = None
    """the 95 % interval of concurrent_energy_overhead ([low, high])"""
    interference_ci: Optional[Interval] = None
    """the 95 % interval of interference ([low, high])"""
    fg_energy_per_epoch_j_ci: Optional[Interval] = None
    """the 95 % interval of fg_energy_per_epoch_j ([low, high])"""
    fg_energy_per_perf_j_ci: Optional[Interval] = None
    """the 95 % interval of fg_energy_per_perf_j ([low, high])"""
    sharing_energy_saved_j_ci: Optional[Interval] = None
    """the 95 % interval of sharing_energy_saved_j ([low, high])"""
