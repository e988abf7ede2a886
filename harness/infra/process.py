"""Run an external tool with a timeout and keep its output in the raw folder, on this
machine or on a load-generator host over SSH; secrets never reach what is kept: every
command line, output and file kept goes through harness.infra.redaction.

Remote runs: `ssh [-F CONFIG] [options] -- ADDRESS 'read secrets; exec timeout T cmd'`: the
options end before the destination, and every field of a RemoteHost is checked when it is
made (a host name or an IP address, a user name, a port, file paths), so nothing from an
inventory becomes an ssh option (`-oProxyCommand=...`) or reaches a local shell. Secrets
travel on ssh's stdin and reach the tool through shell variables, so they are in neither
ssh's command line nor anything kept here. Files the tool is told to write into its raw
folder are written in a temporary folder on the host and copied back afterwards.

Which host: `run_tool(host=...)`: the load tools run on the target's load generator
(harness.infra.target.Target.loadgen, from the inventory's `loadgen` group), None: here. A local
cluster has none, so its tools always run here.
"""

from __future__ import annotations

import io
import os
import shlex
import shutil
import subprocess
import tarfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Sequence, cast

from harness.base.errors import BadInput, EnvironmentProblem
from harness.base.hostnames import check_host, check_user
from harness.infra.redaction import redact, redact_command
from harness.infra.secret_store import add_secret, known_secrets


@dataclass(frozen=True)
class RemoteHost:
    """A host that runs tools over SSH, as an Ansible inventory names it."""

    name: str
    address: str
    user: str | None = None
    port: int | None = None
    ssh_config: str | None = None
    identity: str | None = None  # ssh -i

    def __post_init__(self):
        """Every field may come from an inventory: each is checked to be what it claims, so
        that none can become an ssh option or shell text."""
        where = f"load generator {str(self.name)[:60]!r}"
        check_host(self.name, f"{where}: its host name")
        check_host(self.address, f"{where}: ansible_host")
        if self.user is not None:
            check_user(self.user, f"{where}: ansible_user")
        if self.port is not None and (
            isinstance(self.port, bool) or not isinstance(self.port, int) or not 1 <= self.port <= 65535
        ):
            raise _bad(f"{where}: ansible_port must be a port number (1-65535), got {self.port!r}")
        for key, value in (("ssh config", self.ssh_config), ("ssh private key file", self.identity)):
            if value is not None and (
                not isinstance(value, str) or not value or value.startswith("-") or any(c in value for c in "\0\n\r")
            ):
                raise _bad(f"{where}: its {key} {str(value)[:80]!r} is not a file path; fix the inventory")

    @property
    def label(self) -> str:
        return f"{self.name} ({self.address}) over SSH"

    def ssh_argv(self, remote_command: str, connect_timeout: int = 10) -> list[str]:
        argv = ["ssh"]
        if self.ssh_config:
            argv += ["-F", self.ssh_config]
        argv += ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={connect_timeout}"]
        if self.user:
            argv += ["-l", self.user]
        if self.port:
            argv += ["-p", str(self.port)]
        if self.identity:
            argv += ["-i", self.identity]
        return argv + ["--", self.address, remote_command]  # options end before the destination

    def run(
        self, remote_command: str, timeout: float = 30, stdin: bytes | None = None, processes: list | None = None
    ) -> subprocess.CompletedProcess:
        """Run a shell command on the host; ssh's own failure is returncode 255. `processes`:
        see run_process."""
        try:
            return run_process(self.ssh_argv(remote_command), stdin or b"", timeout, processes=processes)
        except subprocess.TimeoutExpired as e:
            return subprocess.CompletedProcess(
                e.cmd, 255, e.stdout or b"", (e.stderr or b"") + f"ssh: no answer within {timeout:.0f} s".encode()
            )

    def check(self, timeout: float = 20) -> str:
        """'' when the host answers SSH, else one line saying what is wrong."""
        p = self.run("true", timeout=timeout)
        if p.returncode == 0:
            return ""
        err = (
            " | ".join(redact(p.stderr.decode(errors="replace")).strip().splitlines()[-2:])
            or f"exit code {p.returncode}"
        )
        how = f"ssh{' -F ' + self.ssh_config if self.ssh_config else ''} {self.address}"
        return (
            f"load generator {self.name} ({self.address}) does not answer SSH ({err}); check that the "
            f"host is up and that `{how} true` works (the inventory's loadgen group names it)"
        )

    def fetch(self, remote_path: str, local_path: Path, timeout: float = 60, remove: bool = True) -> bool:
        """Copy a file from the host (cat over SSH); True when it existed."""
        rm = f" && rm -f {shlex.quote(remote_path)}" if remove else ""
        p = self.run(f"cat {shlex.quote(remote_path)}{rm}", timeout=timeout)
        if p.returncode != 0:
            return False
        local_path.write_bytes(redact(p.stdout.decode(errors="surrogateescape")).encode(errors="surrogateescape"))
        return True

    def temp_path(self, name: str) -> str:
        return f"/tmp/harness-{uuid.uuid4().hex[:12]}-{name}"


def run_process(
    argv: list[str], stdin: bytes | None, timeout: float, env: dict | None = None, processes: list | None = None
) -> subprocess.CompletedProcess:
    """subprocess.run(argv, capture_output=True) with `stdin` and `timeout`; with `processes`
    (a list shared with the thread that started this one), the child is added to it while it
    runs, so that the other thread can kill it (several load generators at once: a SIGTERM
    that reaches the harness must not wait for every SSH session to end)."""
    if processes is None:
        return subprocess.run(argv, input=stdin, capture_output=True, timeout=timeout, env=env)
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    processes.append(proc)
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise subprocess.TimeoutExpired(argv, timeout, out, err) from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


CLOCK_COMMAND = "python3 -c 'import time; print(repr(time.time()))'"


def clock_offset_ms(host: RemoteHost) -> tuple[float, float]:
    """(how far `host`'s clock is ahead of this machine's, ms; the SSH round trip it was read
    in, ms: the offset is known to within half of it): the host's time.time() against the
    middle of the round trip. EnvironmentProblem when the host does not tell its time."""
    t0 = time.time()
    p = host.run(CLOCK_COMMAND, timeout=30)
    t1 = time.time()
    try:
        theirs = float(p.stdout.decode().strip())
    except ValueError:
        raise EnvironmentProblem(
            f"load generator {host.name} did not tell its time ({CLOCK_COMMAND}: exit {p.returncode}); it needs python3"
        ) from None
    return 1000 * (theirs - (t0 + t1) / 2), 1000 * (t1 - t0)


def kill_all(processes: list) -> None:
    """Kill every process of `processes` still running (see run_process)."""
    for proc in list(processes):
        if proc.poll() is None:
            proc.kill()


def run_each(jobs: list) -> list:
    """Call every job of `jobs` (each a function of one argument: the shared list of the
    processes it starts, see run_process) at once, one thread each; their answers in order.
    An interrupt or an error kills every process they started at once instead of waiting
    for them."""
    procs: list = []
    pool = ThreadPoolExecutor(max_workers=len(jobs))
    try:
        futures = [pool.submit(job, procs) for job in jobs]
        return [f.result() for f in futures]
    except BaseException:
        kill_all(procs)
        raise
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def _bad(message: str):
    return BadInput(message)


def tool_missing(tool: str, host: RemoteHost | None, hint: str) -> str:
    """'' when `tool` is on PATH here (or on `host`), else the skip reason. A host that does
    not answer SSH is an environment problem, not a missing tool."""
    if host is None:
        return "" if shutil.which(tool) else f"{tool} not found ({hint})"
    p = host.run(f"command -v {shlex.quote(tool)} >/dev/null", timeout=30)
    if p.returncode == 255:
        raise EnvironmentProblem(host.check() or f"ssh to {host.name} ({host.address}) failed")
    return "" if p.returncode == 0 else f"{tool} not found on {host.name} ({host.address}) ({hint})"


def where(host: RemoteHost | None) -> str:
    """Which machine runs the tools: for the record's details and the report."""
    return host.label if host is not None else f"{os.uname().nodename} (the harness's own machine)"


def _remote_script(
    cmd: list[str], secrets: list[str], timeout: float, raw_dirs: Sequence[str] = (), remote_dir: str | None = None
) -> str:
    """Shell for the remote side: read the secrets from stdin, then exec the tool under
    timeout(1) so that it stops on the host even when the SSH connection is gone. Paths in
    raw_dir become paths in remote_dir (created first)."""
    reads = "".join(f"IFS= read -r HARNESS_S{i}; " for i in range(len(secrets)))
    if remote_dir:
        reads += f"mkdir -p {shlex.quote(remote_dir)} || exit 125; "
    words = []
    for arg in map(str, cmd):
        for prefix in raw_dirs if remote_dir else ():
            if prefix in arg:
                arg = arg.replace(prefix, cast(str, remote_dir))  # the loop runs only with a remote_dir
                break
        for i, s in enumerate(secrets):
            if s in arg:
                arg = f'"$HARNESS_S{i}"'.join(shlex.quote(part) for part in arg.split(s))
                break
        else:
            arg = shlex.quote(arg)
        words.append(arg)
    return f"{reads}exec timeout -k 5 {int(timeout)} {' '.join(words)}"


@dataclass
class ToolRun:
    cmd: list[str]  # redacted
    returncode: int | None
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool
    files: list[Path]
    ran_on: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    @property
    def command(self) -> str:
        """The command line as kept (secrets hidden)."""
        return shlex.join(self.cmd)

    def failure(self, tool: str) -> str:
        if self.timed_out:
            return f"{tool} did not finish within its timeout ({self.duration_s:.0f} s)"
        tail = " | ".join((self.stderr or self.stdout).strip().splitlines()[-3:])
        if self.returncode == 255 and self.ran_on.endswith("over SSH"):
            return (
                f"ssh to {self.ran_on.removesuffix(' over SSH')} failed while running {tool}: {tail or '(no output)'}"
            )
        return f"{tool} exited with code {self.returncode}: {tail or '(no output)'}"


def _fetch_dir(host: RemoteHost, remote_dir: str, raw_dir: Path, secrets: list[str]) -> None:
    """Copy the files the tool wrote on the host back into raw_dir, then remove them there."""
    p = host.run(
        f"cd {shlex.quote(remote_dir)} 2>/dev/null && tar cf - . ; rm -rf {shlex.quote(remote_dir)}", timeout=120
    )
    if not p.stdout:
        return
    try:
        with tarfile.open(fileobj=io.BytesIO(p.stdout)) as tar:
            for m in tar.getmembers():
                dest = (raw_dir / m.name).resolve()
                if not m.isfile() or not dest.is_relative_to(raw_dir.resolve()):
                    continue
                # extractfile() is None only for a member that is not a regular file: skipped above
                data = cast(IO[bytes], tar.extractfile(m)).read().decode(errors="surrogateescape")
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(redact(data, secrets).encode(errors="surrogateescape"))
    except tarfile.TarError:
        pass


def run_tool(
    cmd: list[str],
    raw_dir: Path,
    name: str,
    timeout: float,
    env: dict | None = None,
    *,
    host: RemoteHost | None = None,
    secrets=(),
    processes: list | None = None,
) -> ToolRun:
    """Run `cmd` here or on a load-generator host over SSH (`host`, e.g. the target's
    loadgen), writing NAME.cmd, NAME.stdout and NAME.stderr under raw_dir. Every known
    secret (and `secrets`) is redacted from all three and, on a host, sent over stdin
    instead of the command line. `processes`: see run_process."""
    secrets = [str(s) for s in secrets if s]
    for s in secrets:
        add_secret(s)
    secrets = known_secrets(secrets)
    raw_dir.mkdir(parents=True, exist_ok=True)
    files = [raw_dir / f"{name}.cmd", raw_dir / f"{name}.stdout", raw_dir / f"{name}.stderr"]
    kept = redact_command(cmd, secrets)
    ran_on = where(host)
    files[0].write_text((f"# ran on {ran_on}\n" if host is not None else "") + shlex.join(kept) + "\n")
    remote_dir = None
    if host is not None:
        prefixes = sorted({str(raw_dir.resolve()), str(raw_dir)}, key=len, reverse=True)
        if any(p in str(a) for p in prefixes for a in cmd):
            remote_dir = host.temp_path(name)
        argv = host.ssh_argv(
            _remote_script(cmd, [s for s in secrets if any(s in str(a) for a in cmd)], timeout, prefixes, remote_dir)
        )
        stdin = "".join(s + "\n" for s in secrets if any(s in str(a) for a in cmd)).encode()
        limit = timeout + 30  # the remote timeout(1) stops the tool first
    else:
        argv, stdin, limit = cmd, None, timeout
    t0 = time.monotonic()
    try:
        p = run_process(argv, stdin, limit, env, processes)
        rc, out, err, timed_out = p.returncode, p.stdout, p.stderr, False
        if host is not None and rc in (124, 137) and time.monotonic() - t0 >= timeout:
            timed_out = True  # timeout(1) on the host stopped it
    except subprocess.TimeoutExpired as e:
        rc, out, err, timed_out = None, e.stdout or b"", e.stderr or b"", True
    dt = time.monotonic() - t0
    if remote_dir is not None and host is not None:  # remote_dir is only ever set with a host
        _fetch_dir(host, remote_dir, raw_dir, secrets)
    out_s = redact(out.decode(errors="replace"), secrets)
    err_s = redact(err.decode(errors="replace"), secrets)
    files[1].write_bytes(redact(out.decode(errors="surrogateescape"), secrets).encode(errors="surrogateescape"))
    files[2].write_bytes(redact(err.decode(errors="surrogateescape"), secrets).encode(errors="surrogateescape"))
    return ToolRun(kept, rc, out_s, err_s, dt, timed_out, files, ran_on)
