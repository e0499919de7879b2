"""The report's heavy libraries stay out of the plugin and the command-line parser (a fresh interpreter)."""
import subprocess
import sys


def test_the_plugin_and_the_command_line_parser_import_no_report_libraries():
    code = ("import sys, pytest_gpu_pairs.plugin\nfrom pytest_gpu_pairs import cli\ncli.build_parser()\n"
            "print(sorted(m for m in ('pandas', 'scipy', 'matplotlib') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "[]", result.stderr
