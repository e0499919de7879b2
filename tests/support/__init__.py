"""Fakes and helpers shared by the unit, integration and end-to-end tests.

- ``helpers``: repository and test-data paths, settings builders, process checks, polling.
- ``fake_nvml``: a scripted NVML with a fake clock (unit tests of the sampler and the GPU figures).
- ``fake_mps_control``: an executable stand-in for ``nvidia-cuda-mps-control`` (run as a script).
- ``fake_job``: a command workload that misbehaves on request (run as a script).
"""
