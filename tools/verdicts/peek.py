"""One line per case and per fit profile of a results folder: what a verdicts run measured, to read
in a device call's output before its files come back. Usage: python -m tools.verdicts.peek OUT_DIR"""
from __future__ import annotations

import sys
from pathlib import Path

from pytest_gpu_pairs.record.store import case_records, fit_profiles


def _f(value, spec=".3f") -> str:
    return "-" if value is None else format(value, spec)


def main(argv: list[str]) -> int:
    out = Path(argv[0])
    for profile in fit_profiles(out):
        starts = "; ".join(",".join(f"{k}={v:.0f}" for k, v in s.phases.items()) + f" ctx={_f(s.context_mb, '.0f')}"
                           f" nvml={_f(s.nvml_peak_mb, '.0f')} {s.seconds:.1f}s" + (f" FAIL {s.failure}" if s.failure else "")
                           for s in profile.starts)
        print(f"fit {profile.workload} card={profile.card_mb} need={_f(profile.need_mb, '.0f')} "
              f"steady={_f(profile.steady_mb, '.0f')} phase={profile.peak_phase} | {starts}")
    records, problems = case_records(out)
    for _, r in records:
        ci = r.concurrency_efficiency_ci or [None, None]
        starts = " ".join(f"[{s.get('start')}:{s.get('rounds')}r {_f(s.get('concurrency_efficiency'))} "
                          f"up{_f(s.get('startup_s'), '.1f')} w{_f(s.get('warmup_s'), '.1f')}"
                          f"{' sb' if s.get('from_standby') else ''}{'' if s.get('steady') else ' cap'}]"
                          for s in (r.starts or []))
        print(f"case {r.case_id} eff={_f(r.concurrency_efficiency)} [{_f(ci[0])}, {_f(ci[1])}] "
              f"n={r.n_rounds} starts={r.n_starts} bsd={_f(r.between_start_sd, '.4f')} gpu_s={_f(r.gpu_seconds, '.0f')} "
              f"wall={_f(r.case_wall_s, '.0f')} fit_s={_f(r.fit_profile_s, '.0f')} vram_fit={_f(r.vram_fit_mb, '.0f')} "
              f"steady={_f(r.vram_steady_mb, '.0f')} verdict={r.vram_verdict} phase={r.vram_peak_phase} "
              f"peak_sampled={_f(r.peak_vram_mb, '.0f')} stop={r.stop_reason} failure={r.failure} {starts}")
    for problem in problems:
        print("problem", problem)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
