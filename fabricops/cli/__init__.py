"""The ``fabricops`` command line: Typer commands that render with Rich.

``main`` holds the root command; each group (``sim``, ...) lives in its own
module, and ``render`` turns results into tables without doing any I/O itself.
"""
