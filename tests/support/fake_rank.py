"""A rank of a data-parallel job that misbehaves as ``FAKE_RANK`` says, without torch: ``peer_fails``
(rank 1 exits with an error at once, the others wait as they would in an all-reduce whose peer is
gone) or ``hang`` (every rank waits). It stands in for ``pytest_gpu_pairs.workloads.data_parallel``
in the tests of how the harness ends a job's ranks."""
import os
import sys
import time

if __name__ == "__main__":
    rank = int(os.environ.get("RANK", "0"))
    if os.environ.get("FAKE_RANK") == "peer_fails" and rank == 1:
        print("rank 1: RuntimeError: something went wrong", flush=True)
        sys.exit(1)
    while True:
        time.sleep(0.1)
