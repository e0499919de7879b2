"""Where the session object lives in pytest's config, shared by the hooks and the fixtures."""
from __future__ import annotations

import pytest

from pytest_gpu_pairs.run.session import GpuPairsSession

SESSION_KEY = pytest.StashKey[GpuPairsSession]()


def gpu_pairs_session(config: pytest.Config) -> GpuPairsSession:
    return config.stash[SESSION_KEY]
