"""The names and config files of the test cluster (``fakecluster``), as plain data and text."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

CTL_HOSTNAME = "mhctl"


@dataclass(frozen=True)
class ClusterNames:
    """The machine-global names of one cluster (``NCCL_DOCTOR_TEST_CLUSTER_*`` override them)."""

    tag: str = "mh"
    """Prefix of namespaces (``mh-h1``) and root-side veths (``mhv1``)."""
    bridge: str = "mhbr0"
    subnet: str = "10.200.0"
    """The /24 the hosts live in: host i is ``<subnet>.i``, the login node ``<subnet>.254``."""
    ctld_port: int = 6817
    hosts: int = 3

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ClusterNames:
        p = "NCCL_DOCTOR_TEST_CLUSTER_"
        return cls(
            tag=env.get(p + "TAG", cls.tag),
            bridge=env.get(p + "BRIDGE", cls.bridge),
            subnet=env.get(p + "SUBNET", cls.subnet),
            ctld_port=int(env.get(p + "PORT", cls.ctld_port)),
            hosts=int(env.get(p + "HOSTS", cls.hosts)),
        )

    def host(self, i: int) -> str:
        return f"h{i}"

    def netns(self, i: int) -> str:
        return f"{self.tag}-h{i}"

    def veth(self, i: int) -> str:
        return f"{self.tag}v{i}"

    def addr(self, i: int) -> str:
        return f"{self.subnet}.{i}"

    @property
    def ctl_addr(self) -> str:
        return f"{self.subnet}.254"

    @property
    def host_names(self) -> list[str]:
        return [self.host(i) for i in range(1, self.hosts + 1)]


def slurm_conf(base: Path, n: ClusterNames) -> str:
    nodes = f"h[1-{n.hosts}]"
    addrs = ",".join(n.addr(i) for i in range(1, n.hosts + 1))
    return f"""ClusterName=mh
SlurmctldHost={CTL_HOSTNAME}({n.ctl_addr})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={base}/munge/sock
SlurmctldPort={n.ctld_port}
SlurmdPort=6818
StateSaveLocation={base}/state
SlurmdSpoolDir={base}/spool/%n
SlurmctldPidFile={base}/run/slurmctld.pid
SlurmdPidFile={base}/run/slurmd-%n.pid
SlurmctldLogFile={base}/log/slurmctld.log
SlurmdLogFile={base}/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
SlurmdTimeout=300
MessageTimeout=5
InactiveLimit=0
KillWait=2
MailProg=/bin/true
NodeName={nodes} NodeAddr={addrs} CPUs=2 RealMemory=2000 State=UNKNOWN
PartitionName=debug Nodes={nodes} Default=YES MaxTime=INFINITE State=UP
"""


def sshd_config(base: Path) -> str:
    return f"""Port 22
ListenAddress 0.0.0.0
HostKey {base}/ssh/host_key
AuthorizedKeysFile {base}/ssh/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
PrintMotd no
LogLevel ERROR
"""
