"""The shared backend for the benchmarks: a real PostgreSQL and a real SeaweedFS S3 gateway on free 127.0.0.1 ports
(tests/support/engines.py), and the environment a server process needs to use them.

    with SharedBackend() as shared:
        env = shared.server_env()      # a fresh database (schema upgraded) and bucket prefix for one server
"""
import itertools
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from support.engines import PostgresServer, SeaweedServer  # noqa: E402 (tests/ is not a package)

BUCKET = "wis-bench"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(pid):
    """utime + stime so far of process `pid` and every process under it, in seconds (from /proc)."""
    total, queue = 0, [pid]
    while queue:
        current = queue.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            for task in Path(f"/proc/{current}/task").iterdir():
                queue.extend(int(child) for child in (task / "children").read_text().split())
        except FileNotFoundError:  # ended meanwhile
            continue
        total += int(fields[11]) + int(fields[12])
    return total / CLOCK_TICKS


class SharedBackend:
    """PostgreSQL and SeaweedFS started together, one bucket; stopped (and their directories removed) on exit."""

    def __init__(self):
        self.postgres = PostgresServer()
        try:
            self.seaweed = SeaweedServer()
            self.seaweed.create_bucket(BUCKET)
        except BaseException:
            self.postgres.remove()
            raise
        self._prefixes = itertools.count(1)

    def server_env(self, tree=ROOT):
        """Environment for one server of the shared backend: its own database, its schema upgraded by the code of
        checkout `tree` (a baseline checkout's service refuses a schema newer than it knows), its own prefix."""
        url = self.postgres.new_database()
        # `python -c` imports `service` from its working directory: the checkout's own migrations.
        subprocess.run([sys.executable, "-c", "import sys; from service.storage.shared.database import Database; "
                        "Database(sys.argv[1]).upgrade()", url], cwd=tree, check=True)
        return {"WIS_DATABASE_URL": url, "WIS_S3_BUCKET": BUCKET, "WIS_S3_PREFIX": f"bench-{next(self._prefixes)}/",
                **self.seaweed.env()}

    def cpu_seconds(self):
        """{engine: CPU seconds so far} of PostgreSQL's processes and of SeaweedFS's."""
        return {"postgres": tree_cpu_seconds(self.postgres.process.pid),
                "seaweed": tree_cpu_seconds(self.seaweed.process.pid)}

    def close(self):
        try:
            self.seaweed.remove()
        finally:
            self.postgres.remove()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
