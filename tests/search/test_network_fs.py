"""A SQLite tracking store on a network file system is warned about in a cluster run
(issue 45, item 5): the mount is read from a fabricated ``/proc/self/mountinfo``."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import write_experiment

from sublayer_search.search.tracking.network_fs import (
    cluster_run,
    fs_type,
    network_fs_warnings,
    parse_mountinfo,
)

MOUNTINFO = """\
22 1 253:0 / / rw,relatime shared:1 - ext4 /dev/mapper/root rw
40 22 0:35 / /home rw,relatime shared:20 - nfs4 filer:/export/home rw,vers=4.2
41 22 0:36 / /lustre/scratch rw shared:21 - lustre 10.1.0.1@o2ib:/scratch rw,flock
42 41 0:37 / /lustre/scratch/local\\040disk rw - xfs /dev/nvme0n1 rw
43 22 0:38 / /gpfs rw - gpfs fs1 rw
44 22 0:39 / /beegfs rw - beegfs beegfs_nodev rw
45 22 0:40 / /mnt/win rw - cifs //srv/share rw
46 22 0:41 / /tmp rw - tmpfs tmpfs rw
47 40 0:42 / /home/alice/fast rw - ext4 /dev/sdb1 rw
"""


def test_mountinfo_is_parsed_with_escaped_paths() -> None:
    mounts = parse_mountinfo(MOUNTINFO + "garbage line\n")
    assert len(mounts) == 9
    assert mounts[3].point == "/lustre/scratch/local disk" and mounts[3].fs_type == "xfs"
    assert mounts[1].source == "filer:/export/home"


@pytest.mark.parametrize(("path", "kind"), [
    ("/home/alice/sweeps/mlflow.db", "nfs4"),
    ("/home/alice/fast/mlflow.db", "ext4"),  # a local disk mounted under the NFS home
    ("/lustre/scratch/u/runs/mlflow.db", "lustre"),
    ("/lustre/scratch/local disk/mlflow.db", "xfs"),
    ("/gpfs/projects/x/mlflow.db", "gpfs"),
    ("/beegfs/x.db", "beegfs"),
    ("/mnt/win/x.db", "cifs"),
    ("/opt/mlflow.db", "ext4"),
    ("/homeless/x.db", "ext4"),  # /home is not a prefix of /homeless
])
def test_the_mount_holding_a_path_gives_its_type(path: str, kind: str) -> None:
    assert fs_type(Path(path), MOUNTINFO) == kind


@pytest.mark.parametrize(("uri", "warned"), [
    ("sqlite:////home/alice/mlflow.db", "nfs4"),
    ("sqlite:////lustre/scratch/mlflow.db", "lustre"),
    ("sqlite:////gpfs/mlflow.db", "gpfs"),
    ("sqlite:////beegfs/mlflow.db", "beegfs"),
    ("sqlite:////mnt/win/mlflow.db", "cifs"),
    ("sqlite:////opt/mlflow.db", None),
    ("http://127.0.0.1:5000", None),  # a server: nothing to warn about
])
def test_a_sqlite_store_on_a_network_fs_is_warned(uri: str, warned: str | None) -> None:
    warnings = network_fs_warnings(uri, "tracking.uri", MOUNTINFO)
    if warned is None:
        assert warnings == []
    else:
        assert len(warnings) == 1 and f"network file system ({warned})" in warnings[0]
        assert "mlflow server" in warnings[0] and "http://" in warnings[0]


def test_a_cluster_run_is_an_address_or_a_slurm_job() -> None:
    assert cluster_run("10.0.0.1:6379", {})
    assert cluster_run(None, {"SLURM_JOB_ID": "42"})
    assert cluster_run(None, {"RAY_ADDRESS": "auto"})
    assert not cluster_run(None, {})


def test_this_machines_own_mounts_are_read() -> None:
    assert fs_type(Path("/")) is not None  # /proc/self/mountinfo names the root's type


@pytest.mark.parametrize(("env", "args", "warned"), [
    ({"SLURM_JOB_ID": "7"}, [], True),  # the Slurm pre-check
    ({}, ["--address", "127.0.0.1:1"], True),
    ({}, [], False),  # a local sweep: one machine, nothing shared
])
def test_the_dry_run_warns_a_cluster_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str],
                                         env: dict[str, str], args: list[str],
                                         warned: bool) -> None:
    from sublayer_search.search.cli.main import main
    from sublayer_search.search.tracking import network_fs

    fake = tmp_path / "mountinfo"  # this test's folder is on NFS, as a cluster's home
    fake.write_text(MOUNTINFO + f"99 22 0:50 / {tmp_path} rw - nfs filer:/x rw\n")
    monkeypatch.setattr(network_fs, "MOUNTINFO", fake)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    path = write_experiment(tmp_path, "nfs", orders=["sfsf"],
                            tracking_uri=f"sqlite:///{tmp_path}/m.db")
    assert main(["sweep", str(path), "--dry-run", *args]) == 0
    err = capsys.readouterr().err
    assert ("sublayer: warning: tracking.uri sqlite:///" in err
            and "network file system (nfs)" in err) == warned, err
