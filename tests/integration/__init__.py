"""Integration tests: real pytest sessions (pytester), command workloads (support/fake_job.py),
real process groups and signals, the stand-in MPS control program, CLI subprocesses."""
