"""The tests start ``python -m trainkit`` from a warm interpreter (tests/helpers/warm_python.py):
the command sees what a new interpreter would see, and ends, is signalled and is waited for as
one; a command whose environment matters at import time still starts a new interpreter."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from tests.helpers import warm_python
from tests.helpers.command_env import cli_env
from tests.helpers.pace import wall

pytestmark = pytest.mark.timeout(120)

# imported by the command (``--model probe.Model``): what the process sees, written to a file
PROBE = """
import json, os, random, sys
from pathlib import Path

Path(os.environ["TRAINKIT_PROBE_FILE"]).write_text(json.dumps({
    "cwd": os.getcwd(),
    "argv": sys.argv[1:],
    "orig_argv": sys.orig_argv[1:],
    "path": sys.path[:2],
    "probe": os.environ.get("TRAINKIT_PROBE"),
    "main": getattr(sys.modules["__main__"].__spec__, "name", None),
    "executable": sys.executable,
    "random": random.random(),
    "pid": os.getpid(),
}))
if "TRAINKIT_PROBE_EXIT" in os.environ:
    os._exit(int(os.environ["TRAINKIT_PROBE_EXIT"]))
# else there is no probe.Model: the command ends with its one-line error
"""


@pytest.fixture(autouse=True)
def warm_switched_on(monkeypatch):
    monkeypatch.setenv(warm_python.SWITCH, "1")


def probe(
    tmp_path, name: str, program: list[str] | None = None, **env: str
) -> tuple[dict, subprocess.CompletedProcess, bool]:
    """Run ``trainkit fit --model probe.Model`` (by default as ``python -m trainkit``) in
    tmp_path; what the probe saw, the result, and whether it ran in the warm interpreter."""
    (tmp_path / "probe.py").write_text(PROBE)
    record = tmp_path / f"{name}.json"
    program = program or [sys.executable, "-m", "trainkit"]
    args = [*program, "fit", "--model", "probe.Model"]
    env = cli_env(TRAINKIT_PROBE="seen", TRAINKIT_PROBE_FILE=str(record), **env)
    result, warm = run_command(args, tmp_path, env)
    return json.loads(record.read_text()), result, warm


def run_command(
    args: list[str], cwd, env: dict[str, str]
) -> tuple[subprocess.CompletedProcess, bool]:
    """Run ``args`` through ``WarmPopen``: the result, and whether it started warm."""
    with warm_python.WarmPopen(
        args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        warm = proc.warm
        out, err = proc.communicate(timeout=wall(60))
    return subprocess.CompletedProcess(args, proc.returncode, out, err), warm


@pytest.mark.slow
def test_a_warm_command_sees_what_a_new_interpreter_sees(tmp_path):
    warm, warm_result, started_warm = probe(tmp_path, "warm")
    # a variable read at import time (here an unknown one) makes it a new interpreter
    cold, cold_result, started_cold = probe(tmp_path, "cold", TKTEST_UNKNOWN="1")
    assert started_warm and not started_cold
    for seen in (warm, cold):
        assert seen["cwd"] == str(tmp_path)
        assert seen["argv"] == ["fit", "--model", "probe.Model"]
        assert seen["orig_argv"] == ["-m", "trainkit", "fit", "--model", "probe.Model"]
        assert seen["path"][0] == str(tmp_path)  # ``-m`` puts the folder first
        assert seen["probe"] == "seen" and seen["main"] == "trainkit.__main__"
    assert warm["path"] == cold["path"]
    assert warm_result.returncode == cold_result.returncode == 2
    assert warm_result.stdout == cold_result.stdout and warm_result.stderr == cold_result.stderr


@pytest.mark.slow
@pytest.mark.skipif(warm_python.console_script() is None, reason="trainkit is not installed here")
def test_the_console_script_runs_warm_as_its_interpreter_would_run_it(tmp_path):
    script = warm_python.console_script()
    assert script is not None
    warm, warm_result, started_warm = probe(tmp_path, "warm", [script])
    cold, cold_result, started_cold = probe(tmp_path, "cold", [script], TKTEST_UNKNOWN="1")
    assert started_warm and not started_cold
    assert warm == {**cold, "random": warm["random"], "pid": warm["pid"]}
    assert warm["orig_argv"] == [script, "fit", "--model", "probe.Model"]
    assert warm["main"] is None  # a script, not a module: a launcher re-executes the file
    assert warm_result.returncode == cold_result.returncode == 2
    assert warm_result.stdout == cold_result.stdout and warm_result.stderr == cold_result.stderr


@pytest.mark.slow
def test_each_warm_command_seeds_its_own_random_state(tmp_path):
    first, _, _ = probe(tmp_path, "first")
    second, _, _ = probe(tmp_path, "second")
    assert first["pid"] != second["pid"] and first["random"] != second["random"]


@pytest.mark.slow
def test_exit_codes_and_signals_reach_the_test_as_from_a_new_interpreter(tmp_path):
    _, result, _ = probe(tmp_path, "exit", TRAINKIT_PROBE_EXIT="3")
    assert result.returncode == 3
    config = tmp_path / "slow.yaml"
    config.write_text("trainer:\n  max_epochs: 100000\n  enable_progress_bar: false\n")
    proc = warm_python.WarmPopen(
        [sys.executable, "-m", "trainkit", "fit", "-c", str(config)],
        cwd=tmp_path,
        env=cli_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    assert proc.poll() is None
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=wall(30)) == -signal.SIGKILL


@pytest.mark.slow
def test_a_python_file_and_a_thread_count_run_warm_as_a_new_interpreter_runs_them(tmp_path):
    program = tmp_path / "program.py"
    program.write_text(
        '"""A program."""\nimport json, os, sys\nimport torch\n'
        "print(json.dumps([__doc__, __name__, __file__, sys.argv, sys.orig_argv[1:], sys.path[0],"
        " torch.get_num_threads(), __spec__]))\n"
        "sys.exit(4)\n"
    )
    env = cli_env(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    seen = {}
    # a variable read at import time (here an unknown one) makes it a new interpreter
    for name, unknown in (("warm", {}), ("cold", {"TKTEST_UNKNOWN": "1"})):
        args = [sys.executable, str(program), "a", "b"]
        result, started_warm = run_command(args, tmp_path, {**env, **unknown})
        assert started_warm == (name == "warm") and result.returncode == 4, result.stderr
        seen[name] = json.loads(result.stdout)
    assert seen["warm"] == seen["cold"]
    assert seen["warm"][2:6] == [
        str(program),
        [str(program), "a", "b"],
        [str(program), "a", "b"],
        str(tmp_path),
    ]
    assert seen["warm"][6] == 1  # one intra-op thread, as OMP_NUM_THREADS=1 asks


@pytest.mark.parametrize("variable", ["RANK", "TRAINKIT_IMPORT_ALLOWLIST", "OMP_NUM_THREADS"])
def test_a_variable_read_at_import_starts_a_new_interpreter(variable):
    base = cli_env()
    assert not warm_python.differs_only_at_runtime({**base, variable: "1"}, base)
    assert warm_python.differs_only_at_runtime({**base, "TRAINKIT_STOP_GRACE": "1"}, base)
