"""What the tests share besides fixtures: tokens and headers, media bytes and files, a real gunicorn server, upload
requests over the Flask test client and over HTTP, reading /metrics and the data directory.

Fixtures are in conftest.py; test modules import this module (pytest puts tests/ on sys.path), never conftest or
each other.
"""
import base64
import hashlib
import importlib.util
import io
import itertools
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import mimetypes
import threading
import time
from collections import Counter
from pathlib import Path

import requests
from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

from service.interface import MB, TOKEN_HEADER
from service.storage import disk, incoming
from service.storage.files import media
from service.storage.files.streams import append, layout, ledger, store, stream


# -- tokens and headers -----------------------------------------------------------------------------------------

TOKEN = "test-token-default"
OTHER_TOKEN = "test-token-other"
TOKENS = f"default:{TOKEN},other:{OTHER_TOKEN}"
HEADERS = {TOKEN_HEADER: TOKEN}
OTHER_HEADERS = {TOKEN_HEADER: OTHER_TOKEN}


# -- media bytes and files --------------------------------------------------------------------------------------

PNG = b"\x89PNG\r\n\x1a\n"
JPEG = b"\xff\xd8\xff\xe0"
GIF = b"GIF89a"
MP4 = b"\x00\x00\x00\x18ftypmp42"


def blob(magic, size, seed=0):
    """`size` bytes starting with `magic`, the rest a cheap non-constant pattern (repeating every 256 bytes)."""
    body = (bytes(range(seed % 256, 256)) + bytes(range(256))) * (size // 256 + 2)
    return magic + body[: size - len(magic)]


def random_blob(magic, size, seed):
    """`size` bytes starting with `magic`, the rest pseudo-random from `seed` (files of different seeds differ
    throughout)."""
    return magic + random.Random(seed).randbytes(size - len(magic))


def png(size, seed):
    return random_blob(PNG, size, seed)


def mp4(size, seed):
    return random_blob(MP4, size, seed)


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def write_media(path, size, header):
    """Write `size` bytes starting with `header` (a format signature), in blocks, and return the path."""
    with open(path, "wb") as handle:
        handle.write(header)
        remaining = size - len(header)
        while remaining > 0:
            block = os.urandom(min(MB, remaining))
            handle.write(block)
            remaining -= len(block)
    return path


def write_png(path, size=4096):
    return write_media(path, size, PNG)


def write_mp4(path, size):
    return write_media(path, size, MP4)


def sha256_of(path):
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


# -- service.client ---------------------------------------------------------------------------------------------

def downloaded_sha(client, media_path):
    """SHA-256 of a stored media file, downloaded with service.client."""
    buffer = io.BytesIO()
    client.download(media_path, buffer)
    return hashlib.sha256(buffer.getvalue()).hexdigest()


class Interrupted(Exception):
    """Raised from a progress callback to stop an upload part-way, as Ctrl-C would."""


def interrupt_after(chunks, chunk_size=MB):
    """A progress callback that stops the upload once that many chunks were sent whole.

    Chunks in flight when it stops are finished (and acknowledged); no new one is started.
    """
    sent = [0]

    def progress(count):
        sent[0] += count
        if sent[0] >= chunks * chunk_size:
            raise Interrupted()

    return progress




def sessions_through(adapter):
    """A session_factory whose sessions all go through `adapter`."""

    def session_factory():
        session = requests.Session()
        session.mount("http://", adapter)
        return session

    return session_factory


# -- the data directory -----------------------------------------------------------------------------------------

def snapshot(directory):
    """{relative path: SHA-256} of every file under `directory`, to show a request changed nothing."""
    files = {}
    for root, _dirs, names in os.walk(directory):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as handle:
                files[os.path.relpath(path, directory)] = hashlib.sha256(handle.read()).hexdigest()
    return files


def media_dir(data_dir, segment, org="default"):
    """Where the media of one segment ("images" or "videos") of one org are stored under a data directory."""
    return Path(data_dir) / "orgs" / org / "media" / segment


def media_files(data_dir, *segments, org="default"):
    """The stored media files of an org (of the given segments, else images and videos), sorted."""
    directories = [media_dir(data_dir, segment, org) for segment in segments or ("images", "videos")]
    return sorted(path for directory in directories if directory.exists() for path in directory.iterdir())


# -- uploads over the Flask test client -------------------------------------------------------------------------

def upload(client, headers, data, destination="stepImage", name="photo.png", **fields):
    """POST one file as a single upload; return the response."""
    form = {"destinationId": destination, "file": (io.BytesIO(data), name), **fields}
    return client.post("/uploads", headers=headers, data=form)


def uploaded_path(client, headers, data, destination="stepImage", name="photo.png"):
    """POST one file as a single upload that must be accepted; return its media path."""
    response = upload(client, headers, data, destination, name)
    assert response.status_code == 201, response.get_json()
    return response.get_json()["path"]


def create_stream(client, headers, data, destination="stepVideo", name="clip.mp4"):
    """Open a chunked upload of `data`; return its stream id."""
    response = client.post("/uploads", headers=headers, json={
        "destinationId": destination, "fileName": name, "fileSize": len(data), "sha": sha256(data)})
    assert response.status_code == 201, response.get_json()
    return response.get_json()["streamId"]


def send_chunk(client, headers, stream_id, index, total, chunk, **fields):
    """PATCH one chunk of a stream; return the response."""
    form = {"chunkIndex": str(index), "totalChunks": str(total), "file": (io.BytesIO(chunk), "blob"), **fields}
    return client.patch(f"/uploads/{stream_id}", headers=headers, data=form)


# -- uploads over HTTP (requests), for a real server --------------------------------------------------------------

def create_stream_over_http(url, data, name="clip.mp4", headers=HEADERS):
    """Open a chunked upload of `data` on the server at `url`; return its stream id."""
    response = requests.post(f"{url}/uploads", headers=headers, timeout=30, json={
        "destinationId": "stepVideo", "fileName": name, "fileSize": len(data), "sha": sha256(data)})
    assert response.status_code == 201, response.text
    return response.json()["streamId"]


def send_chunk_over_http(url, stream_id, index, total, chunk, timeout=60, with_sha=False, headers=HEADERS):
    """PATCH one chunk (with its own SHA-256 when `with_sha`); return (status, body)."""
    fields = {"chunkIndex": index, "totalChunks": total}
    if with_sha:
        fields["sha"] = sha256(chunk)
    response = requests.patch(f"{url}/uploads/{stream_id}", headers=headers, timeout=timeout,
                              data=fields, files={"file": ("blob", chunk)})
    return response.status_code, response.json()


# -- uploads through a requests session (service.testing's ServiceSession) ----------------------------------------

SMALL_PNG = PNG + b"\0" * 64


def upload_png(session, name="pic.png"):
    """Upload SMALL_PNG as a single upload through `session`, which must be accepted; return its media path."""
    response = session.post("/uploads", files={"file": (name, SMALL_PNG)}, data={"destinationId": "stepImage"},
                            timeout=10)
    assert response.status_code == 201, response.text
    return response.json()["path"]


# -- /metrics ---------------------------------------------------------------------------------------------------

def metric_value(text, name, **labels):
    """The value of one sample in Prometheus text, or 0 when absent."""
    for line in text.splitlines():
        match = re.fullmatch(r"(\w+)(?:\{(.*)\})? (\S+)", line)
        if not match or match.group(1) != name:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2) or ""))
        if all(found.get(key) == value for key, value in labels.items()):
            return float(match.group(3))
    return 0.0


# -- the benchmark's payloads -------------------------------------------------------------------------------------

def _bench_module(name):
    """A module of bench/, loaded from its file (sys.path stays as it is)."""
    path = Path(__file__).resolve().parent.parent / "bench" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The benchmark's realistic process and its mutation.
_payload = _bench_module("payload")
BENCH_MUTATION, bench_process = _payload.MUTATION, _payload.process


# -- servers and commands -----------------------------------------------------------------------------------------

WIS = Path(sys.executable).with_name("wis")
CHROMIUM = os.environ.get("WIS_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
BROWSER_WAIT_MS = 20_000  # two shared cores: be patient, never endless


def run_wis(*args, env=None, replace_env=False, cwd=None):
    """Run the installed `wis` command; return the finished process (output captured as text)."""
    return subprocess.run([str(WIS), *args], capture_output=True, text=True, timeout=120, cwd=cwd,
                          env=(env if replace_env else dict(os.environ, **(env or {}))))


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def store_media(repo, org, path, data=None):
    """Publish `data` (by default the signature of the path's kind) at a media path, as an upload would, on either
    backend."""
    if data is None:
        data = PNG if "/images/" in path else MP4
    with tempfile.TemporaryDirectory() as directory:
        source = Path(directory) / "media"
        source.write_bytes(data)
        assert repo.media.publish(org, path, source), f"{path} is taken"


def stored_names(app, org, area, *under):
    """What an org has stored under `area` ("media", optionally "images" or "videos"; or "streams", optionally a stream
    id), to check that a request left exactly what it should. File backend: the names of the files there. Shared
    backend: media names in the index, or ids of stream rows, plus the key of every object of the org in that area
    that the index does not name, and of every file left in the node's spool (both leftovers)."""
    from service.storage import get_repository

    repo = get_repository(app)
    if not hasattr(repo, "database"):
        root = repo.orgs_root.joinpath(org, area, *under)
        return sorted(path.name for path in root.rglob("*") if path.is_file()) if root.exists() else []
    with repo.database.transaction() as connection:
        if area == "media":
            rows = connection.execute("SELECT path, object_key FROM media WHERE org = %s", (org,)).fetchall()
            folder = f"/{under[0]}/" if under else "/"
            names = [path.rsplit("/", 1)[1] for path, _ in rows if folder in path]
            indexed = {key for _, key in rows}
        else:
            rows = connection.execute("SELECT id FROM streams WHERE org = %s", (org,)).fetchall()
            names = [stream_id for (stream_id,) in rows if not under or stream_id == under[0]]
            indexed = set()
    leftovers = [key for key in repo.objects.keys(f"{area}/{org}/{'/'.join(under)}") if key not in indexed]
    spooled = [path.name for path in repo.spool.iterdir()]
    return sorted(names + leftovers + spooled)


def media_names_of(server, segment="videos", org="default"):
    """Names of the media a GunicornServer holds for an org under /api/v1/<segment>/, on either backend; on the shared
    one also the key of every object of the org's media that the index does not name (a leftover)."""
    settings = getattr(server, "settings", {})
    if not settings.get("DATABASE_URL"):
        return [path.name for path in media_files(server.data_dir, segment, org=org)]
    import psycopg

    from service.storage.shared.objects import ObjectStore

    with psycopg.connect(settings["DATABASE_URL"]) as connection:
        rows = connection.execute("SELECT path, object_key FROM media WHERE org = %s", (org,)).fetchall()
    names = [path.rsplit("/", 1)[1] for path, _ in rows if path.startswith(f"/api/v1/{segment}/")]
    indexed = {key for _, key in rows}
    objects = ObjectStore(settings["S3_BUCKET"], settings["S3_PREFIX"])
    return sorted(names + [key for key in objects.keys(f"media/{org}/") if key not in indexed])


def stream_ids(server, org="default"):
    """Ids of every stream a GunicornServer holds for an org, on either backend."""
    settings = getattr(server, "settings", {})
    if settings.get("DATABASE_URL"):
        import psycopg

        with psycopg.connect(settings["DATABASE_URL"]) as connection:
            return {stream_id for (stream_id,) in connection.execute("SELECT id FROM streams WHERE org = %s", (org,))}
    streams = server.data_dir / "orgs" / org / "streams"
    return {path.name for path in streams.iterdir() if path.is_dir()} if streams.exists() else set()


# -- tus over HTTP --------------------------------------------------------------------------------------------------

TUS_HEADERS = dict(HEADERS, **{"Tus-Resumable": "1.0.0"})
TUS_BODY_TYPE = "application/offset+octet-stream"


def tus_metadata(**fields):
    return ",".join(f"{key} {base64.b64encode(value.encode()).decode()}" for key, value in fields.items())


def tus_create(url, data, name="clip.mp4"):
    """Create a tus upload of `data` (a video, its SHA-256 in the metadata) at a server; return its id."""
    response = requests.post(url + "/uploads", timeout=30, headers=dict(TUS_HEADERS, **{
        "Upload-Length": str(len(data)),
        "Upload-Metadata": tus_metadata(destinationId="stepVideo", filename=name, sha256=sha256(data))}))
    assert response.status_code == 201, response.text
    return response.headers["Location"].rsplit("/", 1)[1]


def tus_patch(url, upload_id, offset, body):
    return requests.patch(f"{url}/uploads/{upload_id}", data=body, timeout=60, headers=dict(
        TUS_HEADERS, **{"Upload-Offset": str(offset), "Content-Type": TUS_BODY_TYPE}))


def tus_offset(url, upload_id):
    response = requests.head(f"{url}/uploads/{upload_id}", headers=TUS_HEADERS, timeout=30)
    assert response.status_code == 200, response.headers
    return int(response.headers["Upload-Offset"])


# -- backends ---------------------------------------------------------------------------------------------------------
# The behaviour tests run against both storage backends (the `backend` fixture in conftest.py). Each app or server a
# test starts gets stores of its own: a data directory, and on the shared backend also a fresh PostgreSQL database and
# a key prefix of its own in the session's bucket.

class FileBackend:
    name = "file"

    def settings(self):
        """Config overrides for create_app (beside DATA_DIR, which every app gets)."""
        return {}

    def environment(self, settings):
        """The same settings as environment variables of a server process."""
        return {}


class SharedBackend:
    name = "shared"
    _prefixes = itertools.count(1)

    def __init__(self, postgres, bucket):
        self.postgres = postgres
        self.bucket = bucket

    def settings(self):
        from service.storage.shared.database import Database

        url = self.postgres.new_database()
        Database(url).upgrade()
        return {"DATABASE_URL": url, "S3_BUCKET": self.bucket, "S3_PREFIX": f"t{os.getpid()}-{next(self._prefixes)}/"}

    def environment(self, settings):
        return {"WIS_DATABASE_URL": settings["DATABASE_URL"], "WIS_S3_BUCKET": settings["S3_BUCKET"],
                "WIS_S3_PREFIX": settings["S3_PREFIX"]}


def process_children(pid):
    """The ids of a process's children (from /proc/<pid>/task/*/children)."""
    children = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children += [int(child) for child in (task / "children").read_text().split()]
        except OSError:
            pass
    return children


def process_alive(pid):
    """True while `pid` runs (a zombie, dead but not yet reaped, is not alive)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


class GunicornServer:
    """Real gunicorn on a free 127.0.0.1 port with its own data directory (and its own shared stores when `backend`
    is the shared one)."""

    def __init__(self, data_dir, workers=2, env=None, extra_args=(), backend=None, settings=None):
        """`settings` (from backend.settings()) puts this server on stores another server uses too: two nodes of one
        deployment; without it the server gets stores of its own."""
        self.data_dir = data_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        environment = dict(os.environ, WIS_DATA_DIR=str(data_dir), WIS_API_TOKENS=TOKENS)
        self.settings = {}
        if backend is not None:
            self.settings = settings if settings is not None else backend.settings()
            environment.update(backend.environment(self.settings))
        environment.update(env or {})
        # A file, not a pipe: a pipe nobody reads fills up and blocks a chatty server.
        self._stderr = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "--bind", f"127.0.0.1:{self.port}", "--workers", str(workers),
             "--timeout", "120", *extra_args, "service:create_app()"],
            env=environment, stdout=subprocess.DEVNULL, stderr=self._stderr,
        )
        self._wait_ready()

    def _wait_ready(self, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("gunicorn exited: " + self.stderr_text)
            try:
                # A refused connection fails at once; an accepted probe is waited for, not sent again, so tests
                # that count requests see exactly one /healthz from here even on a busy machine.
                if requests.get(self.url + "/healthz", timeout=(1, 30)).status_code == 200:
                    return
            except (requests.ConnectionError, requests.Timeout):
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("gunicorn did not become ready")

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def kill(self):
        """SIGKILL the master and its workers at once, as a machine crash would: no request in flight is finished."""
        master = self.process.pid
        workers = process_children(master)
        for pid in (master, *workers):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait(timeout=10)
        deadline = time.monotonic() + 10
        while any(process_alive(pid) for pid in workers):
            assert time.monotonic() < deadline, f"gunicorn workers {workers} outlived SIGKILL"
            time.sleep(0.05)

    @property
    def stderr_text(self):
        """What the server has written to stderr so far."""
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")


# tus-js-client (its Node and browser builds), installed into tests/js by the `node` fixture.
JS_DIR = Path(__file__).parent / "js"


class PageServer:
    """Static files on an origin of their own (a free 127.0.0.1 port): pages that call the service from another
    origin, as a web app does. `files` maps URL paths to files or bytes; more may be added while it runs."""

    def __init__(self, files):
        self.files = dict(files)
        self._server = make_server("127.0.0.1", 0, self._app, threaded=True)
        # The origin, exactly as Chromium sends it in the Origin header.
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, name=f"pages {self.url}", daemon=True)
        self._thread.start()

    @Request.application
    def _app(self, request):
        content = self.files.get(request.path)
        if content is None:
            return Response("not found", status=404, mimetype="text/plain")
        if isinstance(content, Path):
            content_type = mimetypes.guess_type(content.name)[0] or "application/octet-stream"
            content = content.read_bytes()
        else:
            content_type = mimetypes.guess_type(request.path)[0] or "application/octet-stream"
        return Response(content, content_type=content_type, headers={"Cache-Control": "no-store"})

    def stop(self):
        self._server.shutdown()
        self._thread.join(timeout=10)
        self._server.server_close()


# -- processes over the Flask test client -----------------------------------------------------------------------

def line_process(name, steps=3):
    """Process "line_1" named `name` with `steps` steps."""
    return {"id": "line_1", "name": name, "steps": [{"id": f"step_{i}", "name": f"{name} {i}"} for i in range(steps)]}


def upsert_process(client, headers, body):
    """processCreate through the Flask test client; return the GraphQL answer."""
    response = client.post("/graph/v2", headers=headers, json={
        "query": "mutation($input: ProcessCreateInput!) { processCreate(input: $input) }",
        "variables": {"input": {"process": body}}})
    assert response.status_code == 200
    return response.get_json()


def read_process(client, headers, identifier="line_1"):
    """id, name, revision and steps (id, name) of a stored process, through the Flask test client."""
    response = client.post("/graph/v2", headers=headers, json={
        "query": "query($id: String!) { process(id: $id) { id name revision steps { id name } } }",
        "variables": {"id": identifier}})
    assert response.status_code == 200
    return response.get_json()["data"]["process"]


def stream_status(client, headers, stream_id):
    """GET /uploads/<id>, which must answer 200; return its JSON."""
    response = client.get(f"/uploads/{stream_id}", headers=headers)
    assert response.status_code == 200
    return response.get_json()


def send_file_first(client, headers, stream_id, index, total, chunk):
    """A chunk whose file part comes before its fields: its index is not known while it arrives."""
    boundary = "file-first"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"blob\"\r\n\r\n".encode()
            + chunk + f"\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"chunkIndex\"\r\n\r\n{index}\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"totalChunks\"\r\n\r\n{total}\r\n"
            f"--{boundary}--\r\n".encode())
    return client.patch(f"/uploads/{stream_id}", headers=headers, data=body,
                        content_type=f"multipart/form-data; boundary={boundary}")


# -- a filesystem double ------------------------------------------------------------------------------------------

class FaultyDisk:
    """Stands in for `os`, `open` and `tempfile` inside the storage modules; counts each operation and fails the
    chosen call of one operation, and every later one, until `heal()` (a disk stays full until space is freed)."""

    def __init__(self, monkeypatch):
        self.calls = Counter()
        self._fault = None
        # Lock files are created through os.open: a full disk refuses a new one (no inode left).
        real_open = os.open

        def os_open(path, flags, *args, **kwargs):
            if flags & os.O_CREAT and str(path).endswith(".lock") and not os.path.exists(path):
                self.check("lock")
            return real_open(path, flags, *args, **kwargs)

        monkeypatch.setattr(os, "open", os_open)
        for module in (disk, incoming, layout, ledger, append, stream, store, media):
            monkeypatch.setattr(module, "os", _FaultyOs(self), raising=False)
            monkeypatch.setattr(module, "open", self.open, raising=False)
            if hasattr(module, "tempfile"):
                monkeypatch.setattr(module, "tempfile", _FaultyTempfile(self))

    def fail(self, operation, code, nth=1, where=""):
        """From now on, the `nth` call of `operation` (create, write, fsync, rename, link or lock) and every later one
        fail; with `where`, only writes to files whose path contains it are counted."""
        self.calls.clear()
        self._fault = (operation, code, nth, where)

    def heal(self):
        self._fault = None

    def check(self, operation, path=""):
        """Count one call of `operation`; raise the planned error if this call is to fail."""
        if self._fault is None or self._fault[3] not in path:
            return
        self.calls[operation] += 1
        if self._fault[0] == operation and self.calls[operation] >= self._fault[2]:
            raise OSError(self._fault[1], os.strerror(self._fault[1]))

    def wrap(self, handle, mode, path=""):
        return _FaultyFile(self, handle, path) if set(mode) & set("wa+") else handle

    def open(self, file, mode="r", *args, **kwargs):
        return self.wrap(open(file, mode, *args, **kwargs), mode, str(file))


class _FaultyOs:
    def __init__(self, disk):
        self._disk = disk

    def __getattr__(self, name):
        return getattr(os, name)

    def fdopen(self, fd, mode="r", *args, **kwargs):
        return self._disk.wrap(os.fdopen(fd, mode, *args, **kwargs), mode)

    def fsync(self, fd):
        self._disk.check("fsync")
        os.fsync(fd)

    def fdatasync(self, fd):
        self._disk.check("fsync")
        os.fdatasync(fd)

    def pwrite(self, fd, data, offset):
        """A write at an offset; a failing one stores half its data first, as a disk filling up mid-write does."""
        try:
            self._disk.check("write", os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            os.pwrite(fd, bytes(data[: len(data) // 2]), offset)
            raise
        return os.pwrite(fd, data, offset)

    def replace(self, source, target):
        self._disk.check("rename")
        os.replace(source, target)

    def link(self, source, target):
        self._disk.check("link")
        os.link(source, target)


class _FaultyTempfile:
    def __init__(self, disk):
        self._disk = disk

    def mkstemp(self, *args, **kwargs):
        self._disk.check("create")
        return tempfile.mkstemp(*args, **kwargs)


class _FaultyFile:
    """A file whose failing write stores half its data first, as a disk filling up mid-write does."""

    def __init__(self, disk, handle, path):
        self._disk = disk
        self._handle = handle
        self._path = path

    def __getattr__(self, name):
        return getattr(self._handle, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self._handle.close()

    def write(self, data):
        try:
            self._disk.check("write", self._path)
        except OSError:
            self._handle.write(bytes(data[: len(data) // 2]))
            self._handle.flush()
            raise
        return self._handle.write(data)


# -- processes over HTTP, and gunicorn as shipped ----------------------------------------------------------------

def shipped_server(tmp_path, data_dir):
    """Gunicorn with the service's own config (`-c python:service.gunicorn_config`), two workers; access log in
    `tmp_path/access.log`."""
    metrics = tmp_path / "metrics"
    metrics.mkdir(exist_ok=True)
    env = {"WIS_WORKERS": "2", "WIS_LOG_LEVEL": "warning",
           "WIS_ACCESS_LOG": str(tmp_path / "access.log"),
           # A directory of the test's own, so a server killed with -9 leaves nothing in /tmp.
           "PROMETHEUS_MULTIPROC_DIR": str(metrics)}
    return GunicornServer(data_dir, workers=2, env=env, extra_args=("-c", "python:service.gunicorn_config"))


def upsert_over_http(url, identifier, name, timeout=30):
    """One processCreate of a one-step process named `name`; return "CREATED" or "UPDATED" when acknowledged, else
    None."""
    body = {"id": identifier, "name": name, "steps": [{"id": "step_1", "name": name}]}
    response = requests.post(f"{url}/graph/v2", headers=HEADERS, timeout=timeout, json={
        "query": "mutation($input: ProcessCreateInput!) { processCreate(input: $input) }",
        "variables": {"input": {"process": body}}})
    if response.status_code != 200:
        return None
    return (response.json().get("data") or {}).get("processCreate")


def read_process_over_http(url, identifier):
    """name, revision and step names of a stored process."""
    response = requests.post(f"{url}/graph/v2", headers=HEADERS, timeout=30, json={
        "query": "query($id: String!) { process(id: $id) { name revision steps { name } } }",
        "variables": {"id": identifier}})
    assert response.status_code == 200, response.text
    return response.json()["data"]["process"]
