"""The summary's "not measured here" section: one line per reason, the reason first and the keys
it leaves empty after it, every reason of the records shown once and kept in the records."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.plugin.summary import (
    MAX_KEYS_SHOWN,
    UNMEASURED_HEADING,
    format_table,
    impossible_lines,
    legend,
    unmeasured_lines,
)
from pytest_gpu_pairs.record.store import typed

KEYS = st.sampled_from(["gpu_energy_j", "fg_gpu_energy_j", "bg_gpu_energy_j", "peak_vram_mb", "cpu_energy_j",
                        "cpu_energy_method", "bg_perf", "fg_startup_s", "gpu_power_avg_w"])
REASONS = st.sampled_from(["no GPU here", "not measurable: no RAPL interface", "not measurable on this run: cpu",
                           "no background run finished"])


def test_a_cpu_run_reads_plainly():
    record = {"gpu_energy_j": None, "peak_vram_mb": None, "cpu_energy_j": None, "cpu_energy_method": None,
              "bg_perf": None, "notes": {
                  "gpu_energy_j": "not measurable on this run: --gpu-pairs-device cpu: GPU figures do not apply",
                  "peak_vram_mb": "not measurable on this run: --gpu-pairs-device cpu: GPU figures do not apply",
                  "cpu_energy_j": "not measurable: no RAPL interface", "cpu_energy_method": "not measurable: no RAPL interface",
                  "bg_perf": "no background run finished on its own during the case"}}
    assert unmeasured_lines([typed(record)]) == [
        UNMEASURED_HEADING,
        "  --gpu-pairs-device cpu: GPU figures do not apply  [gpu_energy_j, peak_vram_mb]",
        "  no RAPL interface  [cpu_energy_j, cpu_energy_method]",
        "  no background run finished on its own during the case  [bg_perf]"]


def test_a_measured_key_is_not_listed_though_its_note_qualifies_it():
    record = {"gpu_energy_j": 10.0, "notes": {"gpu_energy_j": "the card's, background included"}}
    assert unmeasured_lines([typed(record)]) == []


@given(st.lists(st.dictionaries(KEYS, REASONS, max_size=6), max_size=4))
def test_each_reason_is_one_line_naming_or_counting_every_key_it_empties(notes_per_record):
    records = [typed({**{key: None for key in notes}, "notes": notes}) for notes in notes_per_record]
    lines = unmeasured_lines(records)
    expected: dict[str, set[str]] = {}
    for notes in notes_per_record:
        for key, reason in notes.items():
            plain = reason.split(": ", 1)[1] if reason.startswith("not measurable") else reason
            expected.setdefault(plain, set()).add(key)
    assert (lines[0] == UNMEASURED_HEADING) if expected else lines == []
    body = lines[1:]
    assert len(body) == len(expected)
    for reason, keys in expected.items():
        line, = [entry for entry in body if entry.startswith(f"  {reason}  [")]
        listed = line[len(reason) + 5:-1]
        if len(keys) > MAX_KEYS_SHOWN:
            assert listed.startswith(f"{len(keys)} keys: ")
        else:
            assert set(listed.split(", ")) == keys
        assert "not measurable" not in line


def test_a_figure_no_sharing_can_give_is_marked_in_the_table_and_named_below_it():
    records = [typed({"case_id": "g01-a+b", "concurrency_efficiency": 3.97, "fg_slowdown": 0.25}),
               typed({"case_id": "g03-c+d", "concurrency_efficiency": 1.4, "fg_slowdown": 1.3})]
    table = format_table(records)
    assert "3.97!" in table[1] and "0.25!" in table[1] and "!" not in table[2]
    lines = impossible_lines(records)
    assert lines[0].startswith("figures no sharing can give (!)")
    assert lines[1:] == ["  g01-a+b: concurrency_efficiency 3.97, fg_slowdown 0.25"]
    assert impossible_lines(records[1:]) == []


def test_a_misspelt_figure_is_an_error_where_it_is_read():
    record = typed({"case_id": "g01-a+b", "concurrency_efficiency": 1.2})
    assert record.concurrency_efficiency == 1.2
    with pytest.raises(AttributeError, match="concurency_efficiency"):
        record.concurency_efficiency  # noqa: B018 - the read is the test


def test_a_mean_under_two_built_from_an_impossible_round_is_marked_and_its_round_named():
    rounds = [{"round": 1, "complete": True, "concurrency_efficiency": 1.2, "fg_slowdown": 1.4},
              {"round": 2, "complete": True, "concurrency_efficiency": 3.95, "fg_slowdown": 0.34}]
    records = [typed({"case_id": "g01-a+b", "concurrency_efficiency": 1.80, "fg_slowdown": 0.87,
                      "bg_progress_ratio": 2.02, "rounds": rounds})]
    table = format_table(records)
    assert "1.80!" in table[1] and "0.87!" in table[1] and "2.02!" in table[1]
    [_, line] = impossible_lines(records)
    assert line == ("  g01-a+b: concurrency_efficiency 1.80 (round 2 3.95), fg_slowdown 0.87 (round 2 0.34), "
                    "bg_progress_ratio 2.02")


def test_the_legend_says_how_the_means_relate():
    assert "so eff is not 1/slow + bg of the means shown" in legend()
