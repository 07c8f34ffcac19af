"""The live triage TUI (textual): ``run_tui`` shows the newest ``TriageSnapshot``.

``view`` turns a snapshot into the plain rows each widget draws (pure, unit
tested); ``widgets`` draw them; ``app`` polls the injected provider in a
worker thread and routes snapshots and keys.
"""
