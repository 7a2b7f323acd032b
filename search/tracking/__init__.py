"""MLflow, written by the driver: the parent and child runs (``runs``), the write journal
that outlives an outage (``buffer``), the Ray Tune callback, links printed for the UI,
exports and the attention of logged checkpoints."""
