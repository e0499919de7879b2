"""What a job's log says, read as untrusted input: any size, any bytes, patterns in bounded time."""
from support.helpers import with_peak_allocation

from pytest_gpu_pairs.protocol import Progress
from pytest_gpu_pairs.run.joblog import HARNESS_LINE, detect_oom, has_output, parse_log_metrics


def test_a_huge_log_line_without_a_newline_keeps_memory_flat(tmp_path):
    log = tmp_path / "fg.log"
    with open(log, "wb") as handle:
        handle.write(b"Accuracy: 0.5\n")
        for _ in range(32):
            handle.write(b"a" * (1 << 20))  # 32 MiB, no newline
        handle.write(b"\nAccuracy: 0.75\n")
    metrics, peak = with_peak_allocation(lambda: parse_log_metrics(str(log), {"accuracy": r"Accuracy: ([0-9.]+)"}))
    assert metrics == {"accuracy": 0.75}
    assert peak < 8 * (1 << 20)


def test_a_backtracking_pattern_against_a_hostile_line_is_linear(tmp_path):
    log = tmp_path / "fg.log"
    log.write_text("a" * 40 + "!\n" + "loss 0.25\n")
    assert parse_log_metrics(str(log), {"loss": r"(a+)+$", "value": r"loss ([0-9.]+)"}) == {"value": 0.25}


def test_a_metric_that_is_nan_stays_text(tmp_path):
    log = tmp_path / "fg.log"
    log.write_text("loss nan\n")
    assert parse_log_metrics(str(log), {"loss": r"loss (\S+)"}) == {"loss": "nan"}


def test_output_means_a_line_of_the_job_not_the_harness(tmp_path):
    log = tmp_path / "fg.log"
    log.write_text(f"{HARNESS_LINE} start argv=['true']\n\n{HARNESS_LINE} end exit=0\n")
    assert has_output(str(log)) is False
    log.write_text(f"{HARNESS_LINE} start\nepoch 1\n")
    assert has_output(str(log)) is True


def test_non_utf8_log_bytes_are_read_without_raising(tmp_path):
    log = tmp_path / "fg.log"
    log.write_bytes(b"\xff\xfe CUDA out of memory \xff\n")
    assert "CUDA out of memory" in detect_oom(str(log), Progress())
