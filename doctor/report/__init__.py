"""The incident report: one file that carries a verdict out of the terminal.

``content.build`` turns ``(evidence, analysis)`` into a ``Report`` (pure: the triage
JSON of ``doctor.verdict.render.to_json`` plus the playbook's steps, the ranks folded
into ranges, the Flight Recorder grid, versions); ``html`` writes it as one
self-contained page (inline SVG, no request, a Content-Security-Policy that says so),
``markdown`` as an issue body under GitHub's 65,536 characters. Every string quoted
from the job is escaped by the renderer that writes it.
"""
