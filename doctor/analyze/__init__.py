"""Post-mortem analysis: the bundle format (``format``) and saved evidence in (``load``).

``nccl-doctor analyze`` loads ``Evidence`` from whatever a user hands over
(a triage bundle, a folder or archive of Flight Recorder dumps, dump files)
and judges it with the same ``doctor.verdict.classify.analyse`` as live triage.
"""
