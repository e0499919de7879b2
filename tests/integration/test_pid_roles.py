"""The sampler's process roles on a real job tree: children share the job's process group."""
import os
import subprocess
import time

from pytest_gpu_pairs.monitor.gpu import PidRoles


def test_roles_follow_the_process_group_of_a_real_job_tree():
    job = subprocess.Popen(["sh", "-c", "sleep 30 & sleep 30; wait"], start_new_session=True)
    try:
        roles = PidRoles()
        roles.register(job.pid, "bg")
        deadline = time.time() + 5
        import psutil

        children = []
        while not children and time.time() < deadline:
            children = psutil.Process(job.pid).children()
        assert children and all(roles.role_of(c.pid) == "bg" for c in children)
        assert roles.role_of(os.getpid()) == "other"
        assert roles.role_of(2**22 + 12345) == "other"
    finally:
        os.killpg(job.pid, 9)
        job.wait()
