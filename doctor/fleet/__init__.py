"""Preflight for a whole allocation: every host judged, merged, the odd ones named.

The pieces, in the order data flows:

* ``hostdoc``  ``nccl-doctor/host-preflight/v1``: one host's findings and facts (written on
  the host by ``nccl-doctor fleet-host``; read back, checked, on the login node);
* ``sweep``    the hosts asked through the transports ``triage --job`` uses (``srun --overlap``
  or ssh, ``doctor.remote``), answers within one deadline;
* ``merge``    host documents -> one ``FleetReport``: what holds everywhere once, the hosts
  that differ by finding and by fact, the hosts that did not answer (pure);
* ``outliers`` median-absolute-deviation outliers among per-host figures (pure);
* ``bisect``   which hosts make the AllReduce short: halving rounds over an oracle (pure);
* ``rounds``   the oracle: one round of real collectives among subsets, through the same
  transports (``worker`` runs on each host);
* ``render``   the terminal table (outliers and a count of the rest) and the JSON.
"""
