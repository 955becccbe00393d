"""The memory limit a server finds: cgroup v1 and v2, nested, seen from a container or a host.

Each case lays out the files the kernel shows (``/proc/self/cgroup``, ``/proc/self/mountinfo``
and the cgroup folders) under a temporary root, as they read on such a machine; the real
machine's own limit is checked by the out-of-core server test.
"""
from __future__ import annotations

import os
from pathlib import Path

from gnnstore.backend.features.memory_limit import memory_limit

GIB = 1 << 30
V1_MOUNT = "35 30 0:31 {root} /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory\n"
V2_MOUNT = "36 30 0:32 {root} /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
OTHER_MOUNTS = (
    "29 1 8:1 / / rw,relatime - ext4 /dev/vda rw\n"
    "40 30 0:33 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"
)


def _machine(root: Path, cgroup: str, mountinfo: str, limits: dict[str, str]) -> Path:
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/self/cgroup").write_text(cgroup)
    (root / "proc/self/mountinfo").write_text(OTHER_MOUNTS + mountinfo)
    for file, value in limits.items():
        (root / file).parent.mkdir(parents=True, exist_ok=True)
        (root / file).write_text(value + "\n")
    return root


def test_a_nested_v1_cgroup_is_bound_by_the_lowest_limit_above_it(tmp_path: Path) -> None:
    root = _machine(
        tmp_path, "5:cpu:/\n4:memory:/jobs/a/b\n0::/\n", V1_MOUNT.format(root="/"),
        {
            "sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712",  # v1's "no limit"
            "sys/fs/cgroup/memory/jobs/memory.limit_in_bytes": str(3 * GIB),
            "sys/fs/cgroup/memory/jobs/a/memory.limit_in_bytes": str(2 * GIB),
            "sys/fs/cgroup/memory/jobs/a/b/memory.limit_in_bytes": "9223372036854771712",
        },
    )
    found = memory_limit(root)
    assert found.bytes == 2 * GIB and found.source == "cgroup v1 /jobs/a/b"


def test_a_v2_cgroup_reads_memory_max_and_max_means_no_limit(tmp_path: Path) -> None:
    root = _machine(
        tmp_path, "0::/kubepods/pod1/c1\n", V2_MOUNT.format(root="/"),
        {
            "sys/fs/cgroup/kubepods/memory.max": "max",
            "sys/fs/cgroup/kubepods/pod1/memory.max": str(GIB),
            "sys/fs/cgroup/kubepods/pod1/c1/memory.max": "max",
        },
    )
    assert memory_limit(root).bytes == GIB


def test_a_container_sees_its_own_cgroup_at_the_mount_point(tmp_path: Path) -> None:
    """Docker without a cgroup namespace on v1: the process's path is the host's, the mount's
    root is that same cgroup."""
    root = _machine(
        tmp_path, "4:memory:/docker/abc\n", V1_MOUNT.format(root="/docker/abc"),
        {"sys/fs/cgroup/memory/memory.limit_in_bytes": str(GIB // 2)},
    )
    assert memory_limit(root).bytes == GIB // 2


def test_without_a_limit_or_cgroup_files_it_is_the_machines_memory(tmp_path: Path) -> None:
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    unlimited = _machine(tmp_path / "a", "0::/user.slice\n", V2_MOUNT.format(root="/"), {})
    assert memory_limit(unlimited).bytes == physical
    nothing = tmp_path / "b"
    nothing.mkdir()
    found = memory_limit(nothing)
    assert found.bytes == physical and found.source == "the machine's memory"
