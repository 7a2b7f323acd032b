"""The MLflow link a sweep prints shows every trial's name, order and final metric.

A sweep runs against a real ``mlflow server``; headless Chromium loads the exact URL
the sweep printed (no click, a fresh browser profile) and the rendered page must hold
a trial's name and its ``final_val_bpc`` value, its order, and the experiment's
description. The experiment is tagged as a classic (model training) experiment.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import (
    http_json,
    mlflow_server,
    run_cli,
    scratch,
    search_runs,
    subprocess_env,
    write_experiment,
)
from test_mlflow_server import _browse, _chromium

pytestmark = pytest.mark.slow

ORDERS = ["sfsf", "ssff", "fsfs"]


def _text(dom: str) -> str:
    dom = re.sub(r"<(style|script)\b.*?</\1>", " ", dom, flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", dom))


def test_the_printed_link_shows_trials_with_order_and_metric(tmp_path: Path) -> None:
    chromium = _chromium()
    with mlflow_server(tmp_path) as server, scratch("sublayer-home") as home:
        exp_file = write_experiment(tmp_path, "link_check", orders=ORDERS,
                                    tracking_uri="sqlite:///unused.db", max_concurrent=2)
        done = run_cli(["sweep", str(exp_file), "--tracking-uri", server.url],
                       env=subprocess_env(home), log=tmp_path / "sweep.log", timeout=150)
        assert done.returncode == 0, done.stdout[-4000:]
        printed = [line.split(": ", 1)[1] for line in done.stdout.splitlines()
                   if line.startswith("open the runs in the MLflow UI: ")]
        assert len(printed) == 1, done.stdout[-4000:]
        url = printed[0]
        assert url.startswith(server.url + "/#/experiments/")

        found = http_json(f"{server.url}/api/2.0/mlflow/experiments/get-by-name"
                          "?experiment_name=link_check")["experiment"]
        tags = {t["key"]: t["value"] for t in found.get("tags", [])}
        assert tags["mlflow.experimentKind"] == "custom_model_development"
        assert tags["mlflow.note.content"].startswith("end-to-end test link_check")
        children = search_runs(server.url, [found["experiment_id"]],
                               "tags.`sublayer.role` = 'trial'")
        assert len(children) == len(ORDERS)
        trial = children[0]
        name = trial["info"]["run_name"]
        final = next(m["value"] for m in trial["data"]["metrics"] if m["key"] == "final_val_bpc")
        order = next(p["value"] for p in trial["data"]["params"] if p["key"] == "order")

        dom = _browse(chromium, url, tmp_path / "chromium", "--dump-dom",
                      "--window-size=1600,1000")
        assert dom.returncode == 0, dom.stderr[-3000:]
        text = _text(dom.stdout)
        assert name in text, f"{url} does not name trial {name}: {text[:3000]!r}"
        shown = {f"{final}", f"{final:.6g}", f"{final:.4g}"}
        assert any(v in text for v in shown), (f"{url} does not show final_val_bpc {final} of "
                                               f"{name}: {text[:3000]!r}")
        assert "final_val_bpc" in text and order in text.split(name, 1)[1]
        assert "end-to-end test link_check" in text  # the description, on the page
