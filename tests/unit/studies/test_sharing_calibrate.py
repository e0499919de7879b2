"""The arithmetic of the sharing study's calibration step: epochs that hit each job's target time."""
import json
import math

from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from support.helpers import REPO

from pytest_gpu_pairs.studies.steps import sharing as calibrate

TEMPLATE = json.loads((REPO / "settings" / "sharing_pairs.json").read_text())


@hsettings(max_examples=100, deadline=None)
@given(rates=st.fixed_dictionaries({m: st.floats(2, 3000) for m in ("densenet121", "pcb", "resnet20", "mnist")}),
       w=st.floats(2.5, 12))
def test_every_job_trains_about_its_target_time(rates, w):
    per_epoch = {"densenet121": 539, "pcb": 405, "resnet20": 391, "mnist": 1875}
    measured = {m: {"steps_per_s": r, "steps_per_epoch": per_epoch[m]} for m, r in rates.items()}
    settings, scale, _ = calibrate.plan(TEMPLATE, measured, w)
    for pair in settings["pairs"]:
        for key, seconds in (("foreground", w), ("background", calibrate.BG_FACTOR * w + calibrate.BG_EXTRA_S)):
            job = pair[key]
            steps = math.ceil(job["hyperparameters"]["epochs"] * per_epoch[job["model"]] * scale)
            assert abs(steps / rates[job["model"]] - seconds) <= 0.2 * seconds + 1 / rates[job["model"]]


def test_the_chosen_window_fills_the_budget_and_stays_in_bounds():
    shape = (5, 3, 8.0, 3.0, 3, 2)
    w = calibrate.choose_w(450, *shape)
    assert calibrate.MIN_W < w < calibrate.MAX_W
    assert abs(calibrate.estimate_s(w, *shape) - 450) < 1e-6
    assert calibrate.choose_w(50, *shape) == calibrate.MIN_W and calibrate.choose_w(1e5, *shape) == calibrate.MAX_W
