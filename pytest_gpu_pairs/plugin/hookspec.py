"""Hooks other plugins implement to add to what gpu-pairs records, as pytest-benchmark's
``pytest_benchmark_update_machine_info`` lets them add to its machine info."""
from __future__ import annotations

from typing import Any

import pytest


@pytest.hookspec
def pytest_gpu_pairs_record(case: Any, record: dict[str, Any]) -> dict[str, Any] | None:
    """Keys to add to a case's record before it is saved (``result.json`` and the benchmark's
    ``extra_info``). Return a dict of new keys, or None. A key the record already has is kept as
    gpu-pairs measured it: plugins add, they do not overwrite. The record names the added keys in
    ``plugin_keys``, so that reading it back accepts them while refusing a misspelt key of its own."""


@pytest.hookspec
def pytest_gpu_pairs_machine_info(config: pytest.Config, machine_info: dict[str, Any]) -> None:
    """Update ``machine_info["gpu_pairs"]`` of the benchmark JSON in place (e.g. a cluster node's
    name, a firmware version): comparisons refuse baselines whose machine differs."""
