"""Unit tests: pure functions and classes, no subprocesses, no training, no pytester.

Laid out like the package (unit/record/ tests pytest_gpu_pairs/record/, and so on); unit/tools/
tests the study scripts. ``python -m pytest tests/unit -q`` is the fast loop.
"""
