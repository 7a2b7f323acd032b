"""Running a planned sweep on Ray Tune: the driver (``sweep``), the trainable, the local
Ray, trial checkpoints, the schedulers and the progress line."""
