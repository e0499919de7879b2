"""How the device runs are prepared and checked: setup, smoke run, NVML probes."""
