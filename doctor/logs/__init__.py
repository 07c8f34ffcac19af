"""Logs as evidence: a job's combined output, NCCL debug files, RAS reports, kernel Xid
lines, nvidia-smi output and py-spy dumps, parsed into ``LogEvent`` values.

One module per format, each a pure function (or a small block reader) from lines to
events; ``parse`` runs them over a text within bounds; ``who`` ties processes, GPUs and
addresses to ranks; ``reader`` is the only module that opens files.
"""

from doctor.logs.parse import Bounds, Parsed, parse_lines, parse_text
from doctor.logs.reader import LogReading, read_logs

__all__ = ["Bounds", "LogReading", "Parsed", "parse_lines", "parse_text", "read_logs"]
