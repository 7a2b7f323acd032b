"""One-shot sweeps (``search.algorithm: oneshot``): validation (``checks``), the two stages as
plans (``plan``), stage 1 where it runs (``task``) and from the driver (``stage_one``), and the
supernet run's buffered MLflow writes (``writes``)."""
