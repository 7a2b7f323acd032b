"""``sublayer replay``: a finished sweep's learning curves driven through a trial scheduler
(``engine``), read from MLflow (``store``) or an export (``from_export``), and what it saved
(``report``)."""
