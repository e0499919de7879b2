# First check of a GPU machine: what its NVML offers (probe_nvml.py, as JSON), then the slice's pairs
# (g01 and s01) at full scale in one pytest session; SMOKE_SELECT (a -k expression) picks others.
# Usage, from the repository root on the GPU machine: bash tools/device/smoke.sh
# Out: $OUT/nvml_probe.json, $OUT/slice_full_scale.json (pytest-benchmark JSON), $OUT/pytest.log, $OUT/results.tgz.
source tools/device/setup.sh
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit,clocks.sm,temperature.gpu --format=csv
python3 tools/device/probe_nvml.py | tee $OUT/nvml_probe.json
python3 -m pytest benchmarks --gpu-pairs-device cuda --gpu-pairs-out /tmp/results \
  --gpu-pairs-settings settings/parallel_feasibility_test.json --gpu-pairs-settings settings/slice_pairs.json \
  -k "${SMOKE_SELECT:-g01 or s01}" --benchmark-json $OUT/slice_full_scale.json -rs -p no:cacheprovider 2>&1 | tee $OUT/pytest.log
tar czf $OUT/results.tgz -C /tmp results
