"""Live triage: discover a job's ranks, collect evidence in parallel, classify, render."""
