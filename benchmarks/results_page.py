"""The pages benchmarks write to ``benchmarks/results/``: each stamped with the commit, date and machine."""
from __future__ import annotations

import datetime
import os
import platform
import subprocess
from pathlib import Path

import psutil

RESULTS = Path(__file__).resolve().parent / "results"


def stamp(command: str) -> str:
    """One line saying what ran, at which commit, when and on what machine."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], check=False, capture_output=True,
                            text=True, cwd=RESULTS.parent).stdout.strip()
    return (f"`{command}`: commit {commit or '?'}, {datetime.date.today()}, {platform.machine()} with "
            f"{os.cpu_count()} CPUs and {psutil.virtual_memory().total / 2**30:.0f} GiB.")


def write_page(name: str, title: str, command: str, body: str) -> Path:
    """Write ``results/<name>.md``: the title, the stamp, then the body (Markdown)."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.md"
    path.write_text(f"# {title}\n\n{stamp(command)}\n\n{body.strip()}\n")
    return path
