"""The job directory: the registry that launch writes and triage reads, and the in-rank agent."""
