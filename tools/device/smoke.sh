# Issue 2's GPU proof: the slice's groups and mnist+resnet20 at full scale on the device.
source scripts/device/setup.sh
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit,clocks.sm,temperature.gpu --format=csv
python3 scripts/device/probe_nvml.py | tee $OUT/nvml_probe.json
python3 -m pytest benchmarks --gpu-pairs-device cuda --gpu-pairs-out /tmp/results \
  --gpu-pairs-settings settings/parallel_feasibility_test.json --gpu-pairs-settings settings/slice_pairs.json \
  --benchmark-json $OUT/slice_full_scale.json -rs -p no:cacheprovider 2>&1 | tee $OUT/pytest.log
tar czf $OUT/results.tgz -C /tmp results
