"""The suite: one case per pair and variant of the experiment files (``--gpu-pairs-settings``).

Each case trains a background job in a restart loop, runs the foreground job under it while
NVML samples the device, and fails on OOM, a peak VRAM over budget, or a concurrency efficiency
under the pair's minimum. Results: ``benchmark.extra_info`` and ``<out>/<case-id>/result.json``.
"""


def test_pair(gpu_pair_case, pair_run):
    result = pair_run()
    result.check()
