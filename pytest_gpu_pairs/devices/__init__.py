"""Device access (NVML, RAPL): readings with errors translated, and no policy."""
