"""From an experiment file to a typed sweep plan: the YAML schema (``experiment``), strict
scalars, validation problems with their YAML paths, pre-flight checks, the guidance axis,
the ``Variant`` of a trial and the plan itself (``sweep_plan``). No Ray, no MLflow."""
