"""The words settings and options share (sharing mechanisms, measuring methods), in a module that
imports nothing, so the pytest options can name them without loading the settings schema."""
from __future__ import annotations

SHARING_MODES = ("timeslice", "mps")
METHODS = ("interleaved", "epoch")
