"""The steps of studies that are not pytest sessions: each a command of its own (``python -m
pytest_gpu_pairs.studies.steps.NAME``) that a declaration names and the runner starts and ends."""
