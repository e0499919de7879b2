"""The converter of the measurement study's device run: collate what the run left, judge the targets, publish."""
import json

from tools.measurement import report

STEADY = {"device": {"name": "NVIDIA H100 80GB HBM3", "driver": "580", "cuda_driver_version": "13.0",
                     "memory_total_mb": 81559.0}, "idle_power_w": 71.2, "window_s": 12.5, "settle_s": 2.0,
          "counter_energy_j": 8000.0, "counter_power_w": 640.0, "counter_update_period_ms": 20.0,
          "integrated_j": {"instant_10hz": 8040.0, "average_10hz": 7900.0},
          "relative_to_counter": {"instant_10hz": 0.005, "average_10hz": -0.0125}}
OVERHEAD = {"model": "resnet20", "block_s": 4.0, "order": ["off", "on"] * 3, "sampler_tick_ms": 0.4,
            "steps_per_s_off": {"mean": 100.0, "std": 0.5, "n": 6}, "steps_per_s_on": {"mean": 99.8, "std": 0.4, "n": 6},
            "step_ms_off": 10.0, "step_ms_on": 10.02, "slowdown_pct": 0.2, "slowdown_se_pct": 0.26}
JUNIT = ('<testsuites><testsuite><testcase classname="b" name="test_pair[{id}]">{body}</testcase>'
         '<testcase time="0.01" /></testsuite></testsuites>')


def case_dir(root, case_id, **record):
    path = root / case_id
    path.mkdir(parents=True)
    (path / "result.json").write_text(json.dumps({"case_id": case_id, **record}))


def fake_run(tmp_path):
    (tmp_path / "steady").mkdir(parents=True)
    (tmp_path / "steady" / "steady.json").write_text(json.dumps(STEADY))
    (tmp_path / "overhead").mkdir()
    (tmp_path / "overhead" / "overhead.json").write_text(json.dumps(OVERHEAD))
    fg, bg = 123.4, 56.7
    case_dir(tmp_path / "pair", "s01-mnist+resnet20-default-concurrent", gpu_energy_j=900.0,
             gpu_energy_above_idle_j=fg + bg, fg_gpu_energy_j=fg, bg_gpu_energy_j=bg, energy_split_method="sm_util")
    (tmp_path / "pair.junit.xml").write_text(JUNIT.format(id="s01", body=""))
    oom = tmp_path / "oom"
    case_dir(oom / "full", "oom-resnet20+resnet20-default-concurrent", oom=False, peak_vram_mb=15000.0)
    case_dir(oom / "small", "oom-resnet20+resnet20-default-concurrent", oom=True, ballast_held_mb=71300.0,
             failure="foreground resnet20 out of memory (CUDA out of memory)")
    (oom / "full.junit.xml").write_text(JUNIT.format(id="oom", body=""))
    (oom / "small.junit.xml").write_text(JUNIT.format(id="oom", body='<failure message="OOM: foreground" />'))
    (oom / "small.exit").write_text("1\n")


def test_collate_judges_each_target_from_the_runs_files(tmp_path):
    fake_run(tmp_path)
    m = report.collate(tmp_path)
    assert m["targets"] == {"counter_vs_instant_10hz_within_1pct": True, "monitoring_slowdown_under_1pct": True,
                            "pair_split_sums_to_energy_above_idle": True, "small_card_pair_fails_with_oom": True,
                            "same_pair_passes_on_full_card": True}
    assert m["small_card"]["emulated_10240_mb"]["exit_code"] == 1
    text = report.render(m)
    assert "| instant 10hz | 8040.0 | +0.50 % |" in text and "+0.20 % ± 0.26 %" in text
    assert "| 10240 MB (emulated) | 1 | failed | yes |" in text


def test_parts_that_did_not_run_are_unmeasured_not_passed(tmp_path):
    m = report.collate(tmp_path)
    assert set(m["targets"].values()) == {None}
    assert "steady.json was not produced" in m["notes"]["steady_load"]
    assert "did not run" in report.render(m)


def test_publish_writes_the_reference_files_or_says_what_is_missing(tmp_path, capsys):
    fake_run(tmp_path / "run")
    fetched = tmp_path / "fetched"
    assert report.main(["collate", str(tmp_path / "run"), "--out", str(fetched)]) == 0
    assert report.main(["publish", str(fetched), "--to", str(tmp_path / "ref")]) == 0
    assert json.loads((tmp_path / "ref" / "measurement.json").read_text())["study"] == "measurement"
    assert (tmp_path / "ref" / "measurement.md").read_text().startswith("# Measurement reference\n")
    assert report.main(["publish", str(tmp_path / "nothing"), "--to", str(tmp_path / "ref2")]) == 2
    assert "measurement.json: $: expected the measurement JSON" in capsys.readouterr().err


def test_a_target_counts_as_met_only_when_the_noise_resolves_it():
    assert report._resolved_below(0.2, 0.3, 1.0) is True
    assert report._resolved_below(0.59, 3.06, 1.0) == "unresolved (noise)"
    assert report._resolved_below(1.5, 0.1, 1.0) is False
