"""Monitors that run beside the jobs: the GPU through NVML, the CPU package through RAPL."""
