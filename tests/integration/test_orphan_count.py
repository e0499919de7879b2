"""The subreaper's orphan count: a job leader the harness starts in another thread while one job is
being cleaned up is never taken for an adopted orphan."""
import subprocess
import sys

from pytest_gpu_pairs.run import proctree


def test_a_job_started_while_children_are_listed_is_spared_not_adopted(monkeypatch):
    monkeypatch.setattr(proctree._SUBREAPER, "is_set", lambda: True)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        started: set[int] = set()

        def spared() -> set[int]:
            started.add(child.pid)  # registered by the starting thread once its Popen returned
            return set(started)

        assert proctree.adopted_orphans(spared, since_t=0.0) == []
        assert [p.pid for p in proctree.adopted_orphans(set, since_t=0.0)] == [child.pid]
    finally:
        child.kill()
        child.wait()


def test_the_children_are_listed_before_the_spared_are_asked(monkeypatch):
    """The order is the guarantee: a job leader that exists when the children are listed was
    registered by then, as its Popen and its registration happen under one lock."""
    monkeypatch.setattr(proctree._SUBREAPER, "is_set", lambda: True)
    calls = []
    listing = proctree.psutil.Process.children
    monkeypatch.setattr(proctree.psutil.Process, "children",
                        lambda self, *a, **k: calls.append("listed") or listing(self, *a, **k))
    proctree.adopted_orphans(lambda: calls.append("asked") or set(), since_t=0.0)
    assert calls == ["listed", "asked"]
