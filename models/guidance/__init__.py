"""Cross-layer guidance (Crossformer): the settings and the guided pairs of an order
(``config``, torch-free) and the guidance applied to built sublayers (``apply``)."""
