"""Standard output and stop signals, the way a shell uses them: a reader that leaves early (`| head -1`) changes no
exit code and writes no traceback; `--json -` is the JSON alone on standard output; a stop signal is exit 130 on
every path a command takes to its exit code; `--format json` is the JSON alone on standard output, on every command
that shows a result. Cheap commands stand in for the long ones: `check --from-report`
(no ranks; its JSON is 100 kB) and `compare` of the quick lab report; tests/integration/test_signals.py stops real
launches (the path every command that starts ranks shares) and test_check_stopped.py a real check."""

import json
import os
import signal
import subprocess
import sys

import pytest

from ddplab.cli import main
from tests.crafted_reports import FIXTURE

CRITICAL = ["check", "--from-report", str(FIXTURE), "--inject", "wrong:all_reduce"]


def run_with_reader_gone(args, tmp_path) -> subprocess.CompletedProcess:
    """`python -m ddplab ARGS` whose standard output is a pipe closed before ddplab writes a byte of it: every write
    meets EPIPE, as after `| head -c 50` has read its 50 bytes."""
    env = dict(os.environ, TMPDIR=str(tmp_path))  # where a traceback file would go
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run([sys.executable, "-m", "ddplab", *args], stdout=write, stderr=subprocess.PIPE,
                              text=True, cwd=tmp_path, env=env, timeout=120)
    finally:
        os.close(write)


@pytest.mark.parametrize("fmt, code", [("nagios", 2), ("json", 1)])  # a line, and 100 kB
def test_a_closed_stdout_keeps_the_exit_code_and_writes_no_traceback(fmt, code, tmp_path):
    done = run_with_reader_gone([*CRITICAL, "--format", fmt], tmp_path)
    assert done.returncode == code, done.stderr[-2000:]
    assert "internal-error" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr[-2000:]
    assert "Exception ignored" not in done.stderr, "the interpreter's last flush failed"
    assert list(tmp_path.glob("ddplab-traceback-*")) == []


def test_head_dash_1_of_a_critical_check_still_exits_2(tmp_path):
    line = subprocess.run(["bash", "-c", f'"{sys.executable}" -m ddplab "$@" --format nagios | head -1; '
                                         'exit "${PIPESTATUS[0]}"', "bash", *CRITICAL],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert line.returncode == 2 and line.stdout.startswith("DDPLAB CRITICAL - "), line.stderr[-2000:]


def test_json_dash_is_standard_output_and_what_the_command_shows_goes_to_stderr(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["compare", str(FIXTURE), str(FIXTURE), "--json", "-"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["command"] == "compare" and "rows compared" in err
    assert main([*CRITICAL, "--json", "-"]) == 1
    out, err = capsys.readouterr()
    assert json.loads(out)["results"]["status"] == "critical" and "status: CRITICAL - " in err
    assert list(tmp_path.iterdir()) == [], "no file named -"


def test_format_json_is_the_report_on_stdout_with_a_copy_where_json_says(capsys, tmp_path, monkeypatch):
    """--format json, the one spelling of every command that shows a result (check's too), beside --json PATH."""
    monkeypatch.chdir(tmp_path)
    assert main(["compare", str(FIXTURE), str(FIXTURE), "--format", "json", "--json", "copy.json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == json.loads((tmp_path / "copy.json").read_text())
    assert json.loads(out)["command"] == "compare" and "rows compared" in err and "rows compared" not in out


def test_an_unknown_format_is_refused_naming_the_choices(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["compare", str(FIXTURE), str(FIXTURE), "--format", "yaml"]) == 2
    assert 'unknown format "yaml"; valid choices: text, json' in capsys.readouterr().err
    assert main(["storm", "--format", "nagios"]) == 2  # a runner's format is check's alone
    assert 'unknown format "nagios"; valid choices: text, json' in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == [], "nothing started"


def test_json_dash_beside_a_format_that_writes_stdout_is_refused(capsys):
    assert main([*CRITICAL, "--format", "json", "--json", "-"]) == 2
    assert "error: stdout-taken" in capsys.readouterr().err


@pytest.fixture
def stop_midway(monkeypatch):
    """A real stop signal to this process while a command runs, from inside the step named (the handlers are the
    ones `ddplab` installs: cli.main owns them)."""
    def arm(target: str, sig=signal.SIGINT):
        module, name = target.rsplit(".", 1)
        real = getattr(__import__(module, fromlist=[name]), name)

        def signalled(*args, **kwargs):
            os.kill(os.getpid(), sig)
            return real(*args, **kwargs)

        monkeypatch.setattr(target, signalled)
    return arm


def test_ctrl_c_while_a_command_without_ranks_runs_is_130(stop_midway, capsys, tmp_path):
    """The path of every command that shows a report (display.finish: the measurements, env, clean, compare):
    the stop is recorded, the command ends as it would have, and says 130."""
    stop_midway("ddplab.commands.compare.render")
    assert main(["compare", str(FIXTURE), str(FIXTURE)]) == 130


def test_sighup_while_a_report_is_drawn_is_130(stop_midway, capsys, tmp_path):
    """`ddplab report`'s own path to its exit code."""
    stop_midway("ddplab.html_report.write_page", signal.SIGHUP)
    assert main(["report", str(FIXTURE), "--out", str(tmp_path / "page.html")]) == 130


def test_a_stop_while_a_check_is_judged_is_130_in_ddplabs_formats_and_unknown_in_a_runners(stop_midway, capsys):
    stop_midway("ddplab.check.runner.judge", signal.SIGTERM)
    assert main([*CRITICAL, "--format", "text"]) == 130
    assert main([*CRITICAL, "--format", "nagios"]) == 2, "the node's CRITICAL, found before the stop, stands"
