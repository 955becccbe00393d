"""The suite's warm launcher: a forked child sees and does what a cold interpreter would."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import warm_launcher

PROBE = """
import json, os, sys, warnings
import torch
import gnnstore.client
warnings.warn("a warning from the child")
print(json.dumps({
    "argv": sys.argv, "path0": sys.path[0], "cwd": os.getcwd(), "env": os.environ.get("PROBE"),
    "name": __name__, "main": sys.modules["__main__"].__dict__.get("__file__"),
    "fds": sorted(os.listdir("/proc/self/fd")), "stdin": sys.stdin.read(),
    "warnoptions": sys.warnoptions, "filters": [str(f) for f in warnings.filters],
    "loaded_engines": sorted(m for m in sys.modules if m.split(".")[0] in ("kuzu", "real_ladybug")),
}))
"""


def _without_library_warnings(stderr: str) -> str:
    """``stderr`` without the warnings libraries raise as they are imported (the zygote imported
    them; a forked child does not show them again), each a line and its indented source line."""
    lines, kept = stderr.splitlines(keepends=True), []
    for i, line in enumerate(lines):
        raised = re.match(r"\S*site-packages/\S+:\d+: \w+Warning: ", line)
        if not raised and not (i and re.match(r"\S*site-packages/", lines[i - 1]) and line.startswith("  ")):
            kept.append(line)
    return "".join(kept)


def _both(command: list[str], **kwargs: object) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    cold = subprocess.run(command, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, **kwargs)
    warm = warm_launcher.run(command, capture_output=True, text=True, timeout=120, **kwargs)
    return cold, warm


@pytest.mark.parametrize("form", ["-c", "script"])
def test_a_forked_child_sees_what_a_cold_interpreter_sees(form: str, tmp_path: Path) -> None:
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    code = [sys.executable, "-W", "ignore::DeprecationWarning"]
    command = [*code, "-c", PROBE, "one", "two"] if form == "-c" else [*code, str(script), "one", "two"]
    cold, warm = _both(command, cwd=tmp_path, env={**os.environ, "PROBE": "yes"})
    assert cold.returncode == warm.returncode == 0, (cold.stderr, warm.stderr)
    assert warm.stdout == cold.stdout
    assert warm.stderr == _without_library_warnings(cold.stderr) and "a warning from the child" in warm.stderr
    forked = warm_launcher.popen(command, stdout=subprocess.DEVNULL)
    assert isinstance(forked, warm_launcher.ForkedProcess) and forked.wait(60) == 0


def test_a_forked_gnnstore_command_answers_as_a_cold_one() -> None:
    for argv in (["version"], ["nosuch"], ["serve", "--data-dir"]):
        cold, warm = _both([sys.executable, "-m", "gnnstore", *argv])
        assert (warm.returncode, warm.stdout, warm.stderr) == (cold.returncode, cold.stdout, cold.stderr), argv


@pytest.mark.parametrize("code", [
    "import sys; sys.exit(3)",
    "import sys; sys.exit('a message')",
    "raise ValueError('from the child')",
    "import os, signal; print('before', flush=True); os.kill(os.getpid(), signal.SIGKILL)",
    "import atexit, threading, time; atexit.register(print, 'at exit')\n"
    "threading.Thread(target=lambda: (time.sleep(0.2), print('thread done'))).start()",
])
def test_a_forked_child_ends_as_a_cold_one(code: str) -> None:
    cold, warm = _both([sys.executable, "-c", code])
    assert (warm.returncode, warm.stdout, warm.stderr) == (cold.returncode, cold.stdout, cold.stderr)


def test_check_timeout_and_signals_behave_as_subprocess() -> None:
    with pytest.raises(subprocess.CalledProcessError) as failed:
        warm_launcher.run([sys.executable, "-c", "import sys; print('out'); sys.exit(4)"], check=True,
                          capture_output=True, text=True)
    assert failed.value.returncode == 4 and failed.value.stdout == "out\n"
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        warm_launcher.run([sys.executable, "-c", "import time; time.sleep(60)"], timeout=0.5, capture_output=True)
    assert time.monotonic() - started < 30
    child = warm_launcher.popen([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"],
                                stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline() == "up\n"
    child.send_signal(signal.SIGTERM)
    assert child.wait(30) == -signal.SIGTERM
    child.stdout.close()


def test_commands_that_need_a_cold_interpreter_get_one() -> None:
    for command in ([sys.executable, "-X", "importtime", "-c", "pass"], [sys.executable, "-m", "pip", "--version"],
                    ["true"]):
        proc = warm_launcher.popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert isinstance(proc, subprocess.Popen), command
        assert proc.wait(120) == 0
