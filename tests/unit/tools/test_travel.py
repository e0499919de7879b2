"""tools/device/travel.sh: for a device lease the committed results leave the index and are ignored,
so that what the call sends fits its limit, and come back whole after it, the files never touched."""
import shutil
import subprocess

import pytest
from support.helpers import REPO

SCRIPT = REPO / "tools" / "device" / "travel.sh"


def git(repo, *args) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def travel(repo, action) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(repo / "tools" / "device" / "travel.sh"), action],
                          capture_output=True, text=True, timeout=60)


def sent(repo) -> set[str]:
    """What the device tool sends: tracked files and untracked ones git does not ignore."""
    return set(git(repo, "ls-files").split()) | set(git(repo, "ls-files", "--others", "--exclude-standard").split())


@pytest.fixture
def repo(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    root = tmp_path / "repo"
    (root / "tools" / "device").mkdir(parents=True)
    shutil.copy(SCRIPT, root / "tools" / "device" / "travel.sh")
    (root / "reports" / "reference").mkdir(parents=True)
    (root / "reports" / "reference" / "record.json").write_text("{}\n")
    (root / "package.py").write_text("VALUE = 1\n")
    git(root, "init", "-q")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
    return root


def test_light_leaves_the_results_out_of_what_is_sent_and_restore_brings_them_back(repo):
    exclude_before = (repo / ".git" / "info" / "exclude").read_text()
    assert "reports/reference/record.json" in sent(repo)

    assert travel(repo, "light").returncode == 0
    assert sent(repo) == {"package.py", "tools/device/travel.sh"}
    assert (repo / "reports" / "reference" / "record.json").read_text() == "{}\n"

    assert travel(repo, "restore").returncode == 0
    assert git(repo, "status", "--porcelain") == ""
    assert "reports/reference/record.json" in sent(repo)
    assert (repo / ".git" / "info" / "exclude").read_text() == exclude_before


def test_light_refuses_an_index_with_staged_changes_and_changes_nothing(repo):
    (repo / "package.py").write_text("VALUE = 2\n")
    git(repo, "add", "package.py")
    staged = git(repo, "diff", "--cached", "--name-only")

    done = travel(repo, "light")

    assert done.returncode == 1 and "staged" in done.stderr
    assert git(repo, "diff", "--cached", "--name-only") == staged
    assert "reports/reference/record.json" in sent(repo)


def test_an_unknown_action_is_refused_with_the_usage(repo):
    done = travel(repo, "heavy")

    assert done.returncode == 2 and "usage" in done.stderr


def test_light_twice_changes_nothing_more_and_one_restore_brings_everything_back(repo):
    assert travel(repo, "light").returncode == 0
    again = travel(repo, "light")

    assert again.returncode == 0 and "already light" in again.stdout
    assert travel(repo, "restore").returncode == 0
    assert git(repo, "status", "--porcelain") == ""
