"""The process checks every teardown test leans on: a child the test started is counted, the
process's own multiprocessing resource tracker (which lives as long as the process) is not.

Checked in a Python of its own, so that the tracker it starts never outlives this test in the worker."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from support.helpers import TESTS

CHECK = """
import json, subprocess, sys
from multiprocessing import resource_tracker
from support.helpers import children_of_this_process, descendants_of_this_process
resource_tracker.ensure_running()
tracker = resource_tracker._resource_tracker._pid
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
try:
    print(json.dumps({"tracker": tracker, "child": child.pid, "listed": descendants_of_this_process(),
                      "children": [p.pid for p in children_of_this_process()]}))
finally:
    child.kill()
    child.wait()
"""


def test_a_started_child_is_counted_and_the_resource_tracker_is_not():
    found = json.loads(subprocess.run([sys.executable, "-c", CHECK], cwd=TESTS, capture_output=True, text=True,
                                      check=True, timeout=60, env={**os.environ, "PYTHONPATH": str(TESTS)}).stdout)
    assert found["children"] == [found["child"]]
    assert [line.split()[0] for line in found["listed"]] == [str(found["child"])]
    assert found["tracker"] not in found["children"]
