# The measurement study on the GPU machine (typically ~4 minutes, every step time-boxed so that the
# whole stays under 8.5 minutes whatever hangs): energy counter vs polled power on a steady load,
# the step-time cost of the 10 Hz sampler, per-job energy of one pair, and a pair that fits 80 GB but
# not an emulated 10 GB card. Usage, from the repository root: bash tools/measurement/run_on_gpu.sh
# Everything lands in $OUT: measurement.json + measurement.md (the summary, printed last) and
# measurement_results.tgz (samples, logs, per-case results).
# Afterwards, on your machine: python tools/measurement/report.py publish FETCHED_DIR
#   (writes reports/reference/measurement/).
source tools/device/setup.sh
R=/tmp/measurement
rm -rf $R && mkdir -p $R/oom
M="python3 tools/measurement/measure.py"
PAIRS="python3 -m pytest benchmarks --gpu-pairs-device cuda -p no:cacheprovider -q -rA"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,power.limit --format=csv | tee $R/nvidia-smi.csv
# 1. counter energy vs integrated polled power on a steady load (~25 s)
timeout 60 $M steady --seconds 12 --out $R/steady > $R/steady.log 2>&1; echo "steady: exit $?"
# 2. step-time cost of the 10 Hz sampler, 6 blocks off / 6 on of 3 s, interleaved (~50 s)
timeout 80 $M overhead --blocks 12 --block-s 3 --margin-s 0.4 --out $R/overhead > $R/overhead.log 2>&1; echo "overhead: exit $?"
# 3. one pair at full scale with per-job energy (~50 s)
timeout 110 $PAIRS --gpu-pairs-settings settings/slice_pairs.json --gpu-pairs-out $R/pair \
  --junitxml $R/pair.junit.xml > $R/pair.log 2>&1; echo $? > $R/pair.exit; echo "pair: exit $(cat $R/pair.exit)"
# 4. a pair that fits 80 GB but not 10 GB: sized by a probe, run on the full card and on an emulated 10 GB one
timeout 45 $M oom-pair --out $R/oom > $R/oom/probe.log 2>&1; echo "oom probe: exit $?"
timeout 80 $PAIRS --gpu-pairs-settings $R/oom/oom_pair.json --gpu-pairs-out $R/oom/full \
  --junitxml $R/oom/full.junit.xml > $R/oom/full.log 2>&1; echo $? > $R/oom/full.exit
echo "80 GB card: exit $(cat $R/oom/full.exit) (0 expected)"
timeout 100 $PAIRS --gpu-pairs-settings $R/oom/oom_pair.json --gpu-pairs-out $R/oom/small --gpu-pairs-gpu-memory-mb 10240 \
  --junitxml $R/oom/small.junit.xml > $R/oom/small.log 2>&1; echo $? > $R/oom/small.exit
echo "10240 MB card: exit $(cat $R/oom/small.exit) (1 expected: OOM)"
nvidia-smi --query-compute-apps=pid,used_memory --format=csv | tee $R/leftover-processes.csv
python3 tools/measurement/report.py collate $R --out $OUT > /dev/null
tar czf $OUT/measurement_results.tgz -C /tmp measurement
cat $OUT/measurement.md
