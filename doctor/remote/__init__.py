"""Multi-host triage: reach every host of a job with the job's own launcher, merge, judge once.

The pieces, in the order data flows:

* ``hosts``     host lists (``h[1-128]``, host files) through ClusterShell's ``NodeSet``;
* ``slurm``     a SLURM job's nodes (``scontrol show job``) and the one ``srun --overlap`` step;
* ``ssh``       ``ssh -o BatchMode=yes`` to each host in parallel (ClusterShell, bounded fan-out);
* ``frames``    the short tagged lines a host document travels in;
* ``document``  ``nccl-doctor/host-evidence/v1``: one host's evidence, stacks merged into classes;
* ``merge``     host documents (and the hosts that did not answer) -> one ``Evidence``;
* ``reach``     which hosts, by which transport, and the whole round within one deadline.

Nothing here listens on a port: the only ways in are the ones the cluster already trusts.
"""
