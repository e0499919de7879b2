"""The session resampler: replayed sessions stop as the runner would and land at their start's offset."""
import json
import random
from pathlib import Path

from tools.default_method import resample_sessions

STUDY = Path(__file__).resolve().parents[3] / "reports" / "reference" / "default_method" / "sessions-88e4113"


def test_a_replayed_session_stops_within_the_cap_at_its_rule():
    pools = resample_sessions.measured_sessions([STUDY])
    assert set(pools) == set(resample_sessions.GROUPS) and all(len(p) == 3 for p in pools.values())
    session = pools["g01"][0]
    loose = resample_sessions.replay(session, (0.5, None), 0.0, random.Random(1))
    assert abs(loose - resample_sessions.TRUE_EFFICIENCY) < 0.1  # 20 rounds, the floor, reach ±50 %


def test_offsets_far_beyond_the_limit_leave_no_three_sessions_agreeing(tmp_path):
    out = tmp_path / "resampled.json"
    assert resample_sessions.main([str(STUDY), "--between-run-sd", "1.0", "--draws", "3", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    for rule in result["rules"].values():
        assert rule["p_all_cases_within_limit"] == 0.0
        assert all(p <= 1.0 / 3.0 + 1e-9 for p in rule["p_within_limit"].values())
