"""Corpora on the nodes (issue 45, item 3): ``sublayer fetch`` puts them where the nodes
read them; a sweep whose corpus is neither on disk nor downloadable stops before Ray
starts; a node of a real 2-node Ray that lacks the corpus stops the sweep before any
trial starts, naming the node and what to set."""

from __future__ import annotations

import contextlib
import http.server
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
from helpers import SUBLAYER, ray_cluster, run_cli, scratch, tail, write_experiment

SHARED = Path(os.environ.get("SUBLAYER_DATA_DIR", Path(__file__).parents[3] / "shared" / "data"))


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def mirror(folder: Path) -> Iterator[str]:
    """A download mirror on 127.0.0.1 serving ``folder`` (``SUBLAYER_DOWNLOAD_BASE``)."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(folder)))
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def _env(tmp_path: Path, data_dir: Path, base: str = "http://127.0.0.1:9") -> dict[str, str]:
    """Nothing on disk but ``data_dir``, an empty cache, downloads from ``base`` only."""
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env.update(HOME=str(tmp_path / "home"), SUBLAYER_DATA_DIR=str(data_dir),
               SUBLAYER_CACHE_DIR=str(tmp_path / "cache"), SUBLAYER_DOWNLOAD_BASE=base,
               NO_PROXY="127.0.0.1,localhost")
    (tmp_path / "home").mkdir(exist_ok=True)
    return env


def _sublayer(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SUBLAYER), *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=180)


def test_fetch_puts_the_corpus_in_the_data_dir(tmp_path: Path) -> None:
    data = tmp_path / "shared-corpora"
    config = write_experiment(tmp_path, "fetched", orders=["sfsf"],
                              tracking_uri=f"sqlite:///{tmp_path}/m.db")
    with mirror(SHARED / "tinyshakespeare") as base:
        got = _sublayer("fetch", str(config), env=_env(tmp_path, data, base), cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    placed = data / "tinyshakespeare" / "input.txt"
    assert placed.read_bytes() == (SHARED / "tinyshakespeare" / "input.txt").read_bytes()
    assert f"tinyshakespeare on disk in {data / 'tinyshakespeare'}" in got.stdout
    assert not (tmp_path / "cache" / "tinyshakespeare").exists()  # the data dir, not the cache
    again = _sublayer("fetch", str(config), env=_env(tmp_path, data), cwd=tmp_path)
    assert again.returncode == 0 and "on disk" in again.stdout, again.stderr  # no download


def test_fetch_names_a_corpus_it_cannot_download(tmp_path: Path) -> None:
    config = write_experiment(tmp_path, "offline", orders=["sfsf"],
                              tracking_uri=f"sqlite:///{tmp_path}/m.db")
    got = _sublayer("fetch", str(config), env=_env(tmp_path, tmp_path / "none"), cwd=tmp_path)
    assert got.returncode == 1, got.stderr
    assert "data.name: tinyshakespeare: cannot find input.txt" in got.stderr
    assert "Download failed" in got.stderr and "Traceback" not in got.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nspace: {type: nope}\n")
    refused = _sublayer("fetch", str(bad), env=_env(tmp_path, tmp_path / "none"), cwd=tmp_path)
    assert refused.returncode == 2 and "space.type" in refused.stderr, refused.stderr


def test_a_sweep_without_its_corpus_stops_before_ray_naming_the_command(tmp_path: Path) -> None:
    config = write_experiment(tmp_path, "nocorpus", orders=["sfsf"],
                              tracking_uri=f"sqlite:///{tmp_path}/m.db")
    got = _sublayer("sweep", str(config), env=_env(tmp_path, tmp_path / "none"), cwd=tmp_path)
    assert got.returncode == 2, got.stderr
    assert "data.name: got 'tinyshakespeare', expected an available corpus" in got.stderr
    assert "sublayer fetch <this experiment file>" in got.stderr, got.stderr
    assert not (tmp_path / "m.db").exists() and not (tmp_path / "ray_results").exists()


def _worker_node_id(address: str, env: dict[str, str]) -> str:
    code = (f"import ray; ray.init(address={address!r}, logging_level='ERROR', "
            "log_to_driver=False); print('WORKER', *[n['NodeID'] for n in ray.nodes() if "
            "n['Alive'] and not any(k.startswith('node:__internal_head') for k in "
            "n['Resources'])])")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=90)
    ids = [line.split()[1:] for line in out.stdout.splitlines() if line.startswith("WORKER")]
    assert ids and len(ids[0]) == 1, out.stdout + out.stderr
    return ids[0][0]


@pytest.mark.slow
def test_a_node_without_the_corpus_stops_the_sweep_before_any_trial(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    config = write_experiment(tmp_path, "nodedata", orders=["sfsf", "ssff"], tracking_uri=uri)
    worker_data = tmp_path / "worker-corpora"  # the worker node's own (empty) data folder
    worker_data.mkdir()
    worker = {"SUBLAYER_DATA_DIR": str(worker_data),
              "SUBLAYER_CACHE_DIR": str(tmp_path / "worker-cache"),
              "SUBLAYER_DOWNLOAD_BASE": "http://127.0.0.1:9"}  # and no internet
    with scratch("sublayer-home") as home, ray_cluster(home, nodes=2, cpus=2, gpus=0,
                                                       worker_env=worker) as cluster:
        node = _worker_node_id(cluster.address, cluster.env)
        log = tmp_path / "sweep.log"
        refused = run_cli(["sweep", str(config), "--address", cluster.address],
                          env=cluster.env, log=log, timeout=240)
        assert refused.returncode == 2, tail(log)
        assert "data.name: got 'tinyshakespeare', expected a corpus on disk on every node" \
            in refused.stdout, tail(log)
        assert "1 of 2 node(s) lack it" in refused.stdout and f"(id {node[:12]})" in refused.stdout
        assert "set SUBLAYER_DATA_DIR in the environment of those nodes' `ray start`" \
            in refused.stdout and f"sublayer fetch {config}" in refused.stdout
        assert not (tmp_path / "mlflow.db").exists(), "MLflow was touched"
        # the remedy named: fetch into the folder that node reads, then the sweep runs
        with mirror(SHARED / "tinyshakespeare") as base:
            fetched = _sublayer("fetch", str(config), env=_env(tmp_path, worker_data, base),
                                cwd=tmp_path)
        assert fetched.returncode == 0, fetched.stderr
        log2 = tmp_path / "sweep2.log"
        done = run_cli(["sweep", str(config), "--address", cluster.address], env=cluster.env,
                       log=log2, timeout=300)
        assert done.returncode == 0, tail(log2)
    shutil.rmtree(worker_data, ignore_errors=True)
