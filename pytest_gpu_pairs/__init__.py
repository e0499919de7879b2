"""pytest-gpu-pairs: measure what happens when two training jobs share one GPU."""

__version__ = "0.1.0"
