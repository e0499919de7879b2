"""The report's heavy libraries stay out of the plugin and the command-line parser (a fresh interpreter)."""
import subprocess
import sys


def test_the_plugin_and_the_command_line_parser_import_no_report_libraries():
    code = ("import sys, pytest_gpu_pairs.plugin\nfrom pytest_gpu_pairs import cli\ncli.build_parser()\n"
            "print(sorted(m for m in ('pandas', 'scipy', 'matplotlib') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "[]", result.stderr


def test_without_the_report_extra_the_report_command_says_what_to_install_in_one_line(tmp_path):
    """pandas, matplotlib or scipy missing (the README's main install line leaves them out): one
    line naming the extra and the command, exit status 2, no traceback and no report folder."""
    for library in ("pandas", "matplotlib", "scipy"):
        code = (f"import sys\nsys.modules[{library!r}] = None\nfrom pytest_gpu_pairs.cli import main\n"
                f"sys.exit(main(['report', {str(tmp_path)!r}, '-o', {str(tmp_path / 'report')!r}]))\n")
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert result.returncode == 2, result.stderr
        assert result.stderr.splitlines() == [
            f"error: gpu-pairs report needs the report extra (pandas, matplotlib, scipy), and {library} is not "
            "installed: pip install 'pytest-gpu-pairs[report]' (in a checkout of the project: pip install -e "
            "'.[report]')"], result.stderr
        assert not (tmp_path / "report").exists()
