"""A record key's meaning is written once, in the key table: the readers that explain keys (the
report's columns and glossary, its figures, the terminal summary's legend) draw it from there, so a
meaning changed in one place cannot leave another saying the old thing."""
from __future__ import annotations

import inspect

import pytest

from pytest_gpu_pairs.analysis.report import html, load, plots
from pytest_gpu_pairs.plugin import summary
from pytest_gpu_pairs.record.keys import KEYS, axis_label, label, meaning

READERS = (html, load, plots, summary)


def test_every_record_column_of_the_summary_legend_reads_the_key_table():
    for title, key, _ in summary.COLUMNS:
        if key in KEYS:
            assert title not in summary.OWN_LEGEND
            assert summary.legend_entry(title, key) == f"{title}: {label(key)} ({meaning(key)})"
    assert all(f"{title}: " in summary.legend() for title, _, _ in summary.COLUMNS[1:])


def test_every_record_key_in_the_report_glossary_starts_with_its_meaning():
    shown = dict(html.definitions())
    assert set(html.KEY_DEFINITIONS) <= set(KEYS) and not set(html.OWN_DEFINITIONS) & set(KEYS)
    for name in html.KEY_DEFINITIONS:
        assert shown[name].startswith(meaning(name))


def test_every_record_key_among_the_report_columns_is_explained_by_its_meaning():
    for column, text in load.COLUMNS.items():
        if column in KEYS:
            assert text.startswith(meaning(column)), column


@pytest.mark.parametrize("reader", READERS, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_no_reader_writes_a_declared_meaning_or_label_of_its_own(reader):
    source = inspect.getsource(reader)
    for key in KEYS.values():
        assert key.text not in source, f"{reader.__name__} writes the meaning of {key.name}"
        assert not key.label or f'"{key.label}' not in source, f"{reader.__name__} writes the label of {key.name}"


def test_an_axis_label_carries_the_unit_or_the_one_the_reader_scaled_to():
    assert axis_label("peak_vram_mb") == "peak VRAM (MB)"
    assert axis_label("gpu_energy_j", "kJ") == "GPU energy (kJ)"
    assert axis_label("case_id") == "case_id"
