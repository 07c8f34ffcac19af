"""Flight Recorder: a safe reader and a cross-rank aligner."""
