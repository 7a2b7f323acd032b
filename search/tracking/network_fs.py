"""Whether a sweep's SQLite tracking store sits on a network file system.

SQLite locks its file with POSIX locks, which NFS, Lustre, GPFS, CIFS, BeeGFS and their
kind implement loosely or not at all (SQLite's own FAQ): a sweep on a cluster, whose
driver writes the store while ``mlflow ui`` or ``sublayer analyze`` read it from a login
node, then meets "database is locked" errors, or a corrupted store. A cluster run
(``--address``, ``ray.address``, ``$RAY_ADDRESS`` or a Slurm job) is warned, naming the
alternative: an ``mlflow server`` on one machine, its ``http://`` URI as the tracking URI.

The file system is the one ``/proc/self/mountinfo`` names for the mount that holds the
path (the longest mount point above it; a later line over-mounts an earlier one).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["NETWORK_FS", "Mount", "cluster_run", "fs_type", "mount_of", "network_fs_warnings",
           "parse_mountinfo"]

NETWORK_FS = frozenset({
    "nfs", "nfs4", "lustre", "gpfs", "cifs", "smb3", "smbfs", "beegfs", "fuse.beegfs",
    "ceph", "fuse.ceph", "cephfs", "glusterfs", "fuse.glusterfs", "9p", "afs", "panfs",
    "fuse.sshfs", "sshfs", "wekafs", "orangefs", "pvfs2", "ocfs2", "gfs2", "fuse.s3fs",
    "fuse.gcsfuse", "fuse.rclone", "fuse.juicefs", "virtiofs"})
"""File systems whose locking SQLite cannot rely on (``fuse.*`` types as mountinfo names them)."""

MOUNTINFO = Path("/proc/self/mountinfo")
_ESCAPE = re.compile(r"\\([0-7]{3})")


@dataclass(frozen=True)
class Mount:
    point: str
    fs_type: str
    source: str


def _unescape(field: str) -> str:
    """mountinfo writes a space in a path as ``\\040`` (octal), and so on."""
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), field)


def parse_mountinfo(text: str) -> list[Mount]:
    """The mounts of a ``/proc/PID/mountinfo`` text, in its order (malformed lines skipped)."""
    mounts = []
    for line in text.splitlines():
        head, sep, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if not sep or len(fields) < 5 or not rest:
            continue
        mounts.append(Mount(point=_unescape(fields[4]), fs_type=rest[0],
                            source=_unescape(rest[1]) if len(rest) > 1 else ""))
    return mounts


def _existing(path: Path) -> Path:
    """``path`` made absolute and resolved as far as it exists (a store not created yet)."""
    path = Path(os.path.abspath(path.expanduser()))
    probe = path
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    return probe.resolve() / path.relative_to(probe)


def mount_of(path: Path, mounts: list[Mount]) -> Mount | None:
    """The mount that holds ``path``: the longest mount point above it, the last one listed."""
    target = _existing(path)
    best: Mount | None = None
    for mount in mounts:
        point = Path(mount.point)
        if (target == point or point in target.parents) and (
                best is None or len(mount.point) >= len(best.point)):
            best = mount
    return best


def fs_type(path: Path, mountinfo: str | None = None) -> str | None:
    """The file system type of the mount holding ``path`` (None where mountinfo is unreadable)."""
    if mountinfo is None:
        try:
            mountinfo = MOUNTINFO.read_text(errors="replace")
        except OSError:
            return None
    mount = mount_of(path, parse_mountinfo(mountinfo))
    return None if mount is None else mount.fs_type


def cluster_run(address: str | None, env: dict[str, str] | None = None) -> bool:
    """A run on a cluster: an address (``--address``, ``ray.address``, ``$RAY_ADDRESS``) or
    inside a Slurm job (``$SLURM_JOB_ID``)."""
    env = dict(os.environ) if env is None else env
    return bool(address or env.get("RAY_ADDRESS") or env.get("SLURM_JOB_ID"))


def network_fs_warnings(tracking_uri: str, field: str = "tracking.uri",
                        mountinfo: str | None = None) -> list[str]:
    """A warning when the SQLite store of ``tracking_uri`` is on a network file system."""
    if not tracking_uri.startswith("sqlite:///"):
        return []
    file = Path(tracking_uri.removeprefix("sqlite:///"))
    kind = fs_type(file, mountinfo)
    if kind is None or kind.lower() not in NETWORK_FS:
        return []
    return [f"{field} {tracking_uri} is a SQLite file on a network file system ({kind}): "
            "SQLite's locks are unreliable there, so the sweep, `mlflow ui` or "
            "`sublayer analyze` can fail with \"database is locked\" or corrupt the store. "
            "Run `mlflow server --backend-store-uri sqlite:////LOCAL/DISK/mlflow.db` on one "
            "machine and give its http:// URI as tracking.uri or --tracking-uri "
            "(docs/cluster.md)"]
