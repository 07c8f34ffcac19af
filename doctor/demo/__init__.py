"""A small CPU training-like job with injectable faults (``python -m doctor.demo.job``).

Tests and the docs use it to make real hangs and real Flight Recorder dumps
over gloo: see ``doctor.demo.job`` for the faults and options.
"""
