"""What a sweep prints and sets so that its MLflow page reads without a click.

* :func:`label_experiment` sets the experiment's tags: its description
  (``mlflow.note.content``, shown on the experiment page) and the experiment kind
  ``custom_model_development`` (``mlflow.experimentKind``), so MLflow 3 opens the
  classic runs table instead of the GenAI traces view.
* :func:`runs_page` is the runs-table URL fragment sorted by the final metric: sorted
  by a metric the table lists every trial flat (the default nests them under the
  parent run), with its name, and shows that metric's column.
* :func:`closing_lines` are the sweep's last lines: the UI and analysis commands,
  runnable as printed.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mlflow import MlflowClient

    from sublayer_search.search.plan.sweep_plan import SweepPlan

__all__ = ["EXPERIMENT_KIND", "RESUME_WITH", "label_experiment", "runs_page", "closing_lines",
           "program", "resume_command"]

RESUME_WITH = "SUBLAYER_RESUME_WITH"
"""Set by whatever started the sweep with settings of its own (``make run`` exports the
corpus folder): the command that continues it there, printed as is (``make run RESUME=1``)."""

EXPERIMENT_KIND = ("mlflow.experimentKind", "custom_model_development")
NOTE = "mlflow.note.content"


VIEW_KEY = "sublayer"
"""``viewStateShareKey`` of the runs page: the experiment tag ``mlflow.sharedViewState.sublayer``."""
SHARED_VIEW = "mlflow.sharedViewState."


def view_state(metric: str, mode: str) -> dict[str, Any]:
    """The runs table's state (MLflow's "Share" view): sorted by the final metric (child
    runs listed flat), with the columns order, seed, final and best metric."""
    key = f"metrics.`final_{metric}`"
    return {"orderByKey": key, "orderByAsc": mode == "min", "searchFilter": "",
            "selectedColumns": [key, f"metrics.`best_{metric}`", "params.`order`",
                                "params.`seed`", "params.`family`", "attributes.`Duration`"]}


def runs_page(experiment_id: str, metric: str, mode: str = "min") -> str:
    """The MLflow UI page listing every trial flat, best first, with the metric's column.

    ``viewStateShareKey`` loads :func:`view_state`, set by :func:`label_experiment` (MLflow
    ignores it when the URL carries a sort of its own, so the URL has nothing else).
    """
    del metric, mode  # both are in the shared view state
    return f"#/experiments/{experiment_id}/runs?viewStateShareKey={VIEW_KEY}"


def experiment_note(description: str, metric: str, mode: str) -> str:
    best = "lowest" if mode == "min" else "highest"
    return (f"{description.strip()}\n\n" if description.strip() else "") + (
        f"One child run per trial, named `ORDER_OR_SPACE@seedN`, under the sweep's parent "
        f"run. The link printed by `sublayer sweep` sorts the runs table by "
        f"`final_{metric}` ({best} first), which lists every trial flat with that metric. "
        f"Opened without it, the trials are folded under the parent run: click the `+` "
        f"beside it, or sort by `final_{metric}`; the `order` parameter is under Columns.")


def label_experiment(client: MlflowClient, experiment_id: str,
                     plan: SweepPlan[Any, Any, Any, Any]) -> None:
    """Description and experiment kind of the sweep's MLflow experiment."""
    exp = plan.experiment
    client.set_experiment_tag(experiment_id, NOTE,
                              experiment_note(exp.description or "", plan.metric, plan.mode))
    client.set_experiment_tag(experiment_id, *EXPERIMENT_KIND)
    client.set_experiment_tag(experiment_id, SHARED_VIEW + VIEW_KEY,
                              json.dumps(view_state(plan.metric, plan.mode)))


def program() -> str:
    """How to call ``sublayer`` here: bare when PATH finds this one, else the path that ran."""
    ran = sys.argv[0] if sys.argv and os.path.basename(sys.argv[0]) == "sublayer" else ""
    ran = ran or os.path.join(os.path.dirname(sys.executable), "sublayer")
    found = shutil.which("sublayer")
    if found and os.path.realpath(found) == os.path.realpath(ran):
        return "sublayer"
    rel = os.path.relpath(ran)
    return shlex.quote(rel if not rel.startswith("..") else os.path.abspath(ran))


def resume_command(source: str) -> str:
    """The one command that continues the sweep of file ``source`` in the shell that
    started it: :data:`RESUME_WITH` when its starter set it, else ``sublayer sweep FILE
    --resume``."""
    given = os.environ.get(RESUME_WITH, "").strip()
    return given or f"{program()} sweep {shlex.quote(source)} --resume"


def closing_lines(*, uri: str, experiment: str, experiment_id: str, metric: str,
                  mode: str, port: int = 5000) -> list[str]:
    """The UI and analysis commands (and the runs page) for a finished sweep."""
    prog = program()
    page = runs_page(experiment_id, metric, mode)
    q_uri, name = shlex.quote(uri), shlex.quote(experiment)
    out = shlex.quote(f"reports/{experiment}")
    lines = []
    if uri.startswith(("http://", "https://")):
        lines.append(f"open the runs in the MLflow UI: {uri.rstrip('/')}/{page}")
    else:
        lines.append(f"serve the MLflow UI with: {prog} ui --tracking-uri {q_uri}")
        lines.append(f"  then open: http://127.0.0.1:{port}/{page}")
    lines.append(f"analyse the sweep with: {prog} analyze --experiment {name} "
                 f"--tracking-uri {q_uri} --out {out}")
    return lines
