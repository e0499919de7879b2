# First check of a GPU machine: what its NVML offers (probe_nvml.py, as JSON), then g01 and s01 at
# full scale in one session of a declared study (reproducibility's first pinned session: the default
# method, the product's 180 s cap), run by `gpu-pairs study run`; SMOKE_SELECT (a -k expression)
# picks other cases of that study's settings.
# Usage, from the repository root on the GPU machine: bash tools/device/smoke.sh
# Out: $OUT/nvml_probe.json, $OUT/smoke.log (the runner's lines), $OUT/smoke.tgz (the study folder:
# runs.json, the session's log, its results folder and benchmark JSON).
source tools/device/setup.sh
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit,clocks.sm,temperature.gpu --format=csv
python3 tools/device/probe_nvml.py | tee $OUT/nvml_probe.json
rm -rf /tmp/smoke
python3 -m pytest_gpu_pairs.cli study run reproducibility --out /tmp/smoke --variant pinned --sessions 1 \
  -k "${SMOKE_SELECT:-g01 or s01}" 2>&1 | tee $OUT/smoke.log
tar czf $OUT/smoke.tgz --exclude='*samples.csv' -C /tmp smoke
