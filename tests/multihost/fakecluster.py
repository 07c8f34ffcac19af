"""A real SLURM 22.05 cluster of N hosts on this machine, for the multi-host tests.

Built from ``shared/multihost.md`` (tested recipe, with its pitfalls): each
host is its own network, UTS, PID and mount namespace, joined by a bridge,
and runs a real ``slurmd`` and a real ``sshd``; ``slurmctld`` and ``munged``
run in the root network namespace (the "login node" is the root namespace
with hostname ``mhctl``). Every name that is global on the machine (bridge,
namespaces, subnet, controller port) comes from ``ClusterNames`` so parallel
runs can pick their own. Nothing is written to ``/etc`` or ``~/.ssh``: keys,
configs and munge's socket live in the fixture's scratch directory.

Teardown is by PID, then namespaces and bridge, whatever state ``up`` reached.
A state file (``STATE_DIR/<tag>.json``) names what a run brought up, so a run
killed before its teardown is cleaned up by the next one instead of leaving
every later run to skip.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from clusterconf import CTL_HOSTNAME, ClusterNames, slurm_conf, sshd_config

STATE_DIR = Path("/run/nccl-doctor-test-cluster")
TOOLS = ("ip", "unshare", "nsenter", "slurmctld", "slurmd", "srun", "sbatch", "scontrol")
TOOLS += ("munged", "mungekey", "sshd", "ssh", "ssh-keygen")
PACKAGES = "slurmctld slurmd slurm-client munge openssh-server"


class ClusterBusy(RuntimeError):
    """The names are taken (another run's cluster, another slurmctld): skip, do not fail."""


def sh(*argv: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=check, timeout=timeout)


def unavailable(names: ClusterNames) -> str | None:
    """Why a cluster cannot come up here (None: it can): the skip reason, in one sentence."""
    if os.geteuid() != 0:
        return "the multi-host cluster needs root (network, PID and mount namespaces)"
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        return (
            f"the multi-host cluster needs {', '.join(missing)}: `make install` as root "
            f"installs them (apt-get install {PACKAGES})"
        )
    probe = f"{names.tag}-probe"
    try:
        sh("ip", "netns", "add", probe)
        sh("ip", "netns", "del", probe)
        sh("unshare", "--pid", "--fork", "--mount-proc", "--uts", "--mount", "true")
    except (subprocess.CalledProcessError, OSError) as exc:
        return f"network/PID namespaces are not available here ({exc})"
    return None


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


@dataclass
class Cluster:
    """A running cluster: its names, scratch directory and the processes it started."""

    names: ClusterNames
    base: Path
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    owns_names: bool = False
    """Set once ``up`` claimed the names (nobody else's cluster holds them): then, and only
    then, ``down`` removes whatever network goes by them."""

    # ---- what tests use -------------------------------------------------------------
    @property
    def env(self) -> dict[str, str]:
        """What a client on the login node needs: SLURM's config and ssh's options."""
        return {
            "SLURM_CONF": str(self.base / "slurm.conf"),
            "NCCL_DOCTOR_SSH_OPTIONS": f"-F {self.base / 'ssh' / 'config'}",
        }

    def login(self, argv: Sequence[str]) -> list[str]:
        """``argv`` as run on the login node: hostname mhctl, the cluster's /etc/hosts."""
        script = (
            f'mount --bind {self.base / "hosts"} /etc/hosts && hostname {CTL_HOSTNAME} && exec "$@"'
        )
        return ["unshare", "--mount", "--uts", "sh", "-c", script, "login", *argv]

    def cut(self, host: int, connected: bool = False) -> None:
        """Cut host ``host`` off the network (or reconnect it): its link to the bridge."""
        sh("ip", "link", "set", self.names.veth(host), "up" if connected else "down")

    def sbatch(self, script: str, *args: str) -> str:
        """Submit ``script`` on every host; ``args``: sbatch options (``--x=y``), then the
        script's own arguments."""
        opts = [a for a in args if a.startswith("--")]
        rest = [a for a in args if not a.startswith("--")]
        done = sh(
            "sbatch",
            "--parsable",
            f"--nodes={self.names.hosts}",
            *opts,
            script,
            *rest,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip().split(";")[0]

    def kill_rank(self, job: str, rank: int) -> int:
        """SIGKILL the process of ``rank`` of SLURM job ``job`` (seen from the root PID
        namespace); its pid."""
        for proc in psutil.process_iter(["name", "environ"]):
            env = proc.info["environ"] or {}
            if (
                env.get("SLURM_JOB_ID") == job
                and env.get("RANK") == str(rank)
                and (proc.info["name"] or "").startswith("python")
            ):
                proc.kill()
                proc.wait(10)
                return proc.pid
        raise AssertionError(f"no rank {rank} of job {job} runs")

    def scancel(self, job: str) -> None:
        sh("scancel", "--signal=KILL", "--full", job, check=False)

    # ---- bring-up --------------------------------------------------------------------
    def up(self) -> Cluster:
        STATE_DIR.mkdir(mode=0o700, exist_ok=True)
        reclaim(self.names)
        if not _port_free(self.names.ctld_port):
            raise ClusterBusy(f"port {self.names.ctld_port} is in use (another slurmctld?)")
        self._record()
        self.owns_names = True
        self._files()
        self._network()
        self._daemons()
        self._record()
        self._wait_ready()
        return self

    def _files(self) -> None:
        b, n = self.base, self.names
        for d in ("munge", "state", "run", "log", "ssh", "jobs"):
            (b / d).mkdir(parents=True, exist_ok=True)
        for h in n.host_names:
            (b / "spool" / h).mkdir(parents=True, exist_ok=True)
            (b / "hostfs" / h).mkdir(parents=True, exist_ok=True)
        lines = ["127.0.0.1 localhost", f"{n.ctl_addr} {CTL_HOSTNAME}"]
        lines += [f"{n.addr(i)} {n.host(i)}" for i in range(1, n.hosts + 1)]
        (b / "hosts").write_text("\n".join(lines) + "\n")
        (b / "slurm.conf").write_text(slurm_conf(b, n))
        os.environ["SLURM_CONF"] = str(b / "slurm.conf")
        ssh = b / "ssh"
        for key in ("id", "host_key"):
            sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(ssh / key))
        shutil.copy(ssh / "id.pub", ssh / "authorized_keys")
        (ssh / "sshd_config").write_text(sshd_config(b))
        entries = [f"Host {n.host(i)}\n  HostName {n.addr(i)}\n" for i in range(1, n.hosts + 1)] + [
            f"Host *\n  User root\n  IdentityFile {ssh / 'id'}\n  IdentitiesOnly yes\n"
            f"  StrictHostKeyChecking no\n  UserKnownHostsFile {ssh / 'known_hosts'}\n"
            "  LogLevel ERROR\n  ConnectTimeout 3\n"
        ]
        (ssh / "config").write_text("".join(entries))
        sh("mungekey", "--create", f"--keyfile={b / 'munge' / 'munge.key'}")

    def _network(self) -> None:
        n = self.names
        sh("ip", "link", "add", n.bridge, "type", "bridge")
        sh("ip", "addr", "add", f"{n.ctl_addr}/24", "dev", n.bridge)
        sh("ip", "link", "set", n.bridge, "up")
        for i in range(1, n.hosts + 1):
            ns = n.netns(i)
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", n.veth(i), "type", "veth", "peer", "name", "eth0", "netns", ns)
            sh("ip", "link", "set", n.veth(i), "master", n.bridge, "up")
            sh("ip", "-n", ns, "addr", "add", f"{n.addr(i)}/24", "dev", "eth0")
            sh("ip", "-n", ns, "link", "set", "eth0", "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")

    def _start(self, name: str, argv: Sequence[str]) -> None:
        log = open(self.base / "log" / f"{name}.out", "wb")  # noqa: SIM115 - the child owns it
        self.procs[name] = subprocess.Popen(
            list(argv), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()

    def _daemons(self) -> None:
        b, n = self.base, self.names
        conf = str(b / "slurm.conf")
        m = b / "munge"
        self._start(
            "munged",
            ["munged", "--foreground", "--force", f"--socket={m / 'sock'}"]
            + [f"--key-file={m / 'munge.key'}", f"--pid-file={m / 'munged.pid'}"]
            + [f"--log-file={b / 'log' / 'munged.log'}", f"--seed-file={m / 'seed'}"],
        )
        _wait(lambda: (m / "sock").exists(), 10, "munged did not create its socket")
        # slurmctld must believe it runs on SlurmctldHost: its own UTS namespace says so.
        ctld = f"hostname {CTL_HOSTNAME}; exec slurmctld -D -i -f {conf}"
        self._start("slurmctld", ["unshare", "--uts", "/bin/sh", "-c", ctld])
        Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege separation directory
        for i in range(1, n.hosts + 1):
            h = n.host(i)
            # bash stays PID 1 of the host (slurmd as PID 1 leaves zombie slurmstepds);
            # `ip netns exec` would remount /sys and break slurmd's cgroup probe: nsenter.
            script = (
                f"mount --bind {b / 'hosts'} /etc/hosts; "
                f"mount --bind {b / 'hostfs' / h} /var/tmp; hostname {h}; "
                "trap 'kill -TERM $c $s 2>/dev/null; wait $c; exit 0' TERM; "
                f"/usr/sbin/sshd -D -e -f {b / 'ssh' / 'sshd_config'} "
                f"-o PidFile={b / 'run' / f'sshd-{h}.pid'} & s=$!; "
                f"slurmd -D -N {h} -f {conf} & c=$!; wait $c"
            )
            self._start(
                h,
                ["nsenter", f"--net=/run/netns/{n.netns(i)}", "unshare", "--mount", "--uts"]
                + ["--pid", "--fork", "--mount-proc", "--kill-child=KILL", "/bin/bash", "-c"]
                + [script],
            )

    def _wait_ready(self) -> None:
        def idle() -> bool:
            done = sh("sinfo", "-h", "-o", "%T %D", check=False, timeout=10)
            return done.returncode == 0 and done.stdout.split() == ["idle", str(self.names.hosts)]

        _wait(idle, 60, "the slurmd daemons did not all register as idle", self._logs)

        def sshd_up() -> bool:
            return all(_connects(self.names.addr(i), 22) for i in range(1, self.names.hosts + 1))

        _wait(sshd_up, 20, "sshd does not answer on every host", self._logs)

    def _logs(self) -> str:
        out = []
        for p in sorted((self.base / "log").glob("*")):
            out.append(f"--- {p.name}\n{p.read_text(errors='replace')[-1500:]}")
        return "\n".join(out)

    def _record(self) -> None:
        state = {
            "owner": os.getpid(),
            "owner_started": psutil.Process().create_time(),
            "base": str(self.base),
            "pids": {k: p.pid for k, p in self.procs.items()},
            "names": self.names.__dict__,
        }
        (STATE_DIR / f"{self.names.tag}.json").write_text(json.dumps(state))

    # ---- teardown --------------------------------------------------------------------
    def down(self) -> None:
        """Stop everything this cluster started, by PID; then namespaces and bridge."""
        hosts = [self.procs[h] for h in self.names.host_names if h in self.procs]
        _stop_hosts([p.pid for p in hosts])
        for p in hosts:
            _reap(p)
        for name in ("slurmctld", "munged"):  # slurmctld needs munge while it shuts down
            if name in self.procs:
                _terminate(self.procs[name].pid)
                _reap(self.procs[name])
        if self.owns_names:  # never another run's: only what this cluster claimed
            _remove_network(self.names)
            (STATE_DIR / f"{self.names.tag}.json").unlink(missing_ok=True)


def _connects(addr: str, port: int) -> bool:
    try:
        with socket.create_connection((addr, port), timeout=0.5):
            return True
    except OSError:
        return False


def _wait(ok, seconds: float, what: str, details=lambda: "") -> None:  # type: ignore[no-untyped-def]
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if ok():
            return
        time.sleep(0.1)
    raise RuntimeError(f"{what} within {seconds:.0f}s\n{details()}")


def _terminate(pid: int, grace: float = 10.0) -> None:
    """TERM, then KILL after ``grace``; never an error if it is already gone."""
    try:
        proc = psutil.Process(pid)
        proc.send_signal(signal.SIGTERM)
        proc.wait(grace)
    except psutil.TimeoutExpired:
        proc.kill()
    except psutil.Error:
        pass


def _stop_hosts(unshare_pids: Sequence[int]) -> None:
    """TERM each host's PID 1 (its trap stops slurmd), then KILL it: the kernel then kills
    every process left in that PID namespace (job ranks, stepds, sshd sessions)."""
    inits = []
    for pid in unshare_pids:
        try:
            inits += psutil.Process(pid).children()
        except psutil.Error:
            continue
    for p in inits:
        try:
            p.send_signal(signal.SIGTERM)
        except psutil.Error:
            pass
    psutil.wait_procs(inits, timeout=5)
    for p in inits:
        try:
            p.kill()
        except psutil.Error:
            pass
    for pid in unshare_pids:
        _terminate(pid, grace=5)


def _reap(proc: subprocess.Popen[bytes]) -> None:
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def _remove_network(names: ClusterNames) -> None:
    for i in range(1, names.hosts + 1):
        ns = names.netns(i)
        for pid in sh("ip", "netns", "pids", ns, check=False).stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)  # only ours live in our namespaces
            except (OSError, ValueError):
                pass
        sh("ip", "netns", "del", ns, check=False)
        sh("ip", "link", "del", names.veth(i), check=False)
    sh("ip", "link", "del", names.bridge, check=False)


def reclaim(names: ClusterNames) -> None:
    """Tear down what a previous run with the same names left up, when that run is gone."""
    path = STATE_DIR / f"{names.tag}.json"
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        state = None
    if state is not None:
        try:
            owner = psutil.Process(state["owner"])
            alive = owner.status() != psutil.STATUS_ZOMBIE
            if alive and abs(owner.create_time() - state["owner_started"]) < 1:
                raise ClusterBusy(f"cluster {names.tag!r} is in use by pid {owner.pid}")
        except psutil.Error:
            pass
        pids = state.get("pids", {})
        _stop_hosts(
            [pids[h] for h in names.host_names if h in pids and _is(pids[h], state["base"])]
        )
        for name in ("slurmctld", "munged"):
            if name in pids and _is(pids[name], name):
                _terminate(pids[name])
    if state is None and _exists(names):
        # a run writes its state before it creates anything: this network is not ours
        raise ClusterBusy(f"{names.bridge} or the {names.tag}-h* namespaces exist, not ours")
    if state is not None:
        _remove_network(names)
    path.unlink(missing_ok=True)


def _is(pid: int, name: str) -> bool:
    try:
        return name in " ".join(psutil.Process(pid).cmdline())
    except psutil.Error:
        return False


def _exists(names: ClusterNames) -> bool:
    netns = sh("ip", "netns", "list", check=False).stdout
    ours = any(names.netns(i) in netns.split() for i in range(1, names.hosts + 1))
    return ours or sh("ip", "link", "show", names.bridge, check=False).returncode == 0


@contextmanager
def cluster_or_skip(names: ClusterNames, base: Path) -> Iterator[Cluster]:
    """A running cluster of ``names`` for a fixture, or a skip that says why; torn down
    (and ``SLURM_CONF``, which ``up`` sets, given back) whatever happens."""
    import pytest

    why = unavailable(names)
    if why:
        pytest.skip(why)
    saved = os.environ.get("SLURM_CONF")
    running = Cluster(names, base)
    try:
        try:
            running.up()
        except ClusterBusy as exc:
            pytest.skip(f"{exc}: set NCCL_DOCTOR_TEST_CLUSTER_TAG/_BRIDGE/_SUBNET/_PORT")
        yield running
    finally:
        running.down()
        if saved is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = saved


def quote(argv: Sequence[str]) -> str:
    return shlex.join(argv)


def main() -> None:
    """``python fakecluster.py BASE``: bring a cluster up, hold it until SIGTERM/SIGINT."""
    import sys

    names = ClusterNames.from_env(os.environ)
    why = unavailable(names)
    if why:
        sys.exit(why)
    cluster = Cluster(names, Path(sys.argv[1]))
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    try:
        cluster.up()
        print(json.dumps(cluster.env), flush=True)
        while not stop:
            time.sleep(0.2)
    finally:
        cluster.down()


if __name__ == "__main__":
    main()
