"""The ``sublayer`` command line: one module per command (``main`` parses and dispatches;
``output`` prints bad input and tables the same way for all)."""
