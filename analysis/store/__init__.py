"""Runs in, tidy frames out: the MLflow store (``mlflow_store``), a sweep's runs (``runs``),
the trial frame and its translation/guidance columns, and study exports."""
