"""The process checks every teardown test leans on: a child the test started is counted, this
process's own multiprocessing resource tracker (which lives as long as the worker) is not."""
from __future__ import annotations

import subprocess
import sys
from multiprocessing import resource_tracker

from support.helpers import descendants_of_this_process


def test_a_started_child_is_counted_and_the_resource_tracker_is_not():
    resource_tracker.ensure_running()
    tracker = resource_tracker._resource_tracker._pid
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        listed = descendants_of_this_process()
        assert any(line.startswith(f"{child.pid} ") for line in listed)
        assert not any(line.startswith(f"{tracker} ") for line in listed)
    finally:
        child.kill()
        child.wait()
    assert not any(line.startswith(f"{child.pid} ") for line in descendants_of_this_process())
