"""Uploads from disk: one request up to 10 MB, else a chunked stream sent in parallel and resumable.

Files are never held in memory: the whole-file SHA-256 is computed by streaming the file, and request
bodies are read from disk as they are sent. Files over the single-request limit go through a chunked
stream whose id is kept in a small state file, so running the same upload again after an
interruption sends only the chunks the server does not have yet. Each upload thread has its own
requests.Session. Progress callbacks always run in the calling thread.
"""
import hashlib
import json
import os
import queue
import threading
import uuid
from pathlib import Path

from service.interface.checksums import file_sha256
from service.client.errors import ClientError
from service.client.transport import Repeat
from service.interface import (DESTINATIONS, FORMATS, MAX_TOTAL_CHUNKS, MB, REQUEST_FILE_LIMIT, SNIFF_BYTES,
                               sniff_format)

DEFAULT_CHUNK_SIZE = 5 * MB
DEFAULT_PARALLEL = 4
# How much of a file a request body hands to the connection at a time.
SEND_BLOCK = MB
# A sniffed format names its destination when exactly one destination accepts it.
FORMAT_DESTINATIONS = {
    fmt: name
    for name, destination in DESTINATIONS.items() for fmt in destination.formats
    if sum(fmt in other.formats for other in DESTINATIONS.values()) == 1
}


def default_state_dir():
    """Where resumable upload state is kept: $XDG_CACHE_HOME/wis/uploads or ~/.cache/wis/uploads."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "wis" / "uploads"


def file_format(path):
    """The sniffed format of a file ("jpeg", "png", "gif", "mp4") or None; OSError if it cannot be read."""
    with open(path, "rb") as handle:
        return sniff_format(handle.read(SNIFF_BYTES))


def destination_of(path):
    """The destination a file goes to, from its sniffed format; ValueError when the content says none."""
    fmt = file_format(path)
    if fmt in FORMAT_DESTINATIONS:
        return FORMAT_DESTINATIONS[fmt]
    accepted = ", ".join(" or ".join(FORMATS[f].label for f in destination.formats) + f" -> {name}"
                         for name, destination in DESTINATIONS.items())
    what = f"a {FORMATS[fmt].label} file, which more than one destination accepts" if fmt else "none of these"
    raise ValueError(f"cannot tell the destination of {path} from its content: uploads accept {accepted}; "
                     f"this is {what}")


class Uploader:
    """Uploads over a Transport; `state_dir` keeps the resume records (default: default_state_dir())."""

    def __init__(self, transport, state_dir=None):
        self.transport = transport
        self.state_dir = state_dir

    def upload(self, path, destination=None, chunk_size=DEFAULT_CHUNK_SIZE, parallel=DEFAULT_PARALLEL,
               progress=None, resumed=None, state_dir=None):
        """Upload a file and return its media path; see Client.upload."""
        path = Path(path)
        if destination is None:
            destination = destination_of(path)
        elif destination not in DESTINATIONS:
            raise ValueError(f"unknown destination {destination!r}: use one of {', '.join(DESTINATIONS)}")
        if not 1 <= chunk_size <= REQUEST_FILE_LIMIT:
            raise ValueError(f"chunk size must be between 1 byte and {REQUEST_FILE_LIMIT // MB} MB, "
                             f"not {chunk_size}")
        if parallel < 1:
            raise ValueError(f"parallel must be at least 1, not {parallel}")
        size = path.stat().st_size
        sha = file_sha256(path)  # OSError for a directory or an unreadable file
        progress = progress or (lambda n: None)
        if size <= REQUEST_FILE_LIMIT:
            fields = {"destinationId": destination, "sha": sha}
            result = self.transport.json("POST", "/uploads", Repeat.HARMLESS,
                                         body=lambda: FileSegment(fields, path.name, path, 0, size, progress))
            return result["path"]
        if -(-size // chunk_size) > MAX_TOTAL_CHUNKS:
            raise ValueError(f"a chunk size of {chunk_size} bytes makes more than {MAX_TOTAL_CHUNKS} chunks; "
                             f"use at least {-(-size // MAX_TOTAL_CHUNKS)} bytes")
        state_dir = state_dir or self.state_dir
        state = _UploadState(Path(state_dir) if state_dir else default_state_dir(),
                             sha, size, destination, self.transport.base_url)
        job = _Job(path, destination, size, sha)
        return self._upload_stream(job, chunk_size, parallel, progress, resumed or progress, state)

    def _upload_stream(self, job, chunk_size, parallel, progress, resumed, state):
        stream = self._resume(state, job.size)
        if stream is None:
            total = -(-job.size // chunk_size)
            created = self.transport.json("POST", "/uploads", Repeat.HARMLESS, json={
                "destinationId": job.destination, "fileName": job.path.name, "fileSize": job.size, "sha": job.sha})
            stream = {"streamId": created["streamId"], "chunkSize": chunk_size, "totalChunks": total, "received": []}
            state.save(stream["streamId"], chunk_size, total, job.path)
        elif stream.get("path"):
            state.remove()
            return stream["path"]
        job.stream_id, job.chunk_size, job.total = stream["streamId"], stream["chunkSize"], stream["totalChunks"]
        received = set(stream["received"])
        held = sum(job.chunk_length(index) for index in received)
        if held:
            resumed(held)
        missing = [index for index in range(job.total) if index not in received]
        try:
            media_path = self._send_chunks(job, missing, parallel, progress)
        except ClientError as error:
            if error.status is not None and self._stream_gone(job.stream_id):
                state.remove()
            raise
        if media_path is None:
            status = self.stream_status(job.stream_id)
            if status.get("state") != "complete":
                raise ClientError(None, f"stream {job.stream_id} is still missing chunks "
                                        f"{sorted(set(range(job.total)) - set(status.get('receivedChunks', [])))}")
            media_path = status["path"]
        state.remove()
        return media_path

    def stream_status(self, stream_id):
        return self.transport.json("GET", f"/uploads/{stream_id}", Repeat.SAFE)

    def _resume(self, state, size):
        """The stream of an earlier run of this upload, if the server still has it; else None."""
        saved = state.load()
        if saved is None:
            return None
        try:
            status = self.stream_status(saved["streamId"])
        except ClientError as error:
            if error.status == 404:
                state.remove()
                return None
            raise
        if status.get("state") == "complete":
            return {"path": status["path"]}
        # totalChunks is unknown to the server until a first chunk arrives.
        if status.get("totalChunks") not in (None, saved["totalChunks"]) or status.get("fileSize") != size:
            state.remove()
            return None
        return {"streamId": saved["streamId"], "chunkSize": saved["chunkSize"], "totalChunks": saved["totalChunks"],
                "received": status.get("receivedChunks", [])}

    def _stream_gone(self, stream_id):
        try:
            self.stream_status(stream_id)
        except ClientError as error:
            return error.status == 404
        return False

    def _send_chunks(self, job, indexes, parallel, progress):
        """PATCH the given chunks from `parallel` threads; return the media path if a chunk completed the stream.

        Each thread has its own requests.Session and reports bytes as they are read into the request
        (and takes them back when an attempt fails); the calling thread passes them on to `progress`.
        An error stops the starting of chunks and waits for those in flight; Ctrl-C (KeyboardInterrupt) does not wait.
        """
        events = queue.Queue()
        todo = queue.SimpleQueue()
        for index in indexes:
            todo.put(index)
        stop = threading.Event()

        def work():
            try:
                with self.transport.new_session() as session:
                    while not stop.is_set():
                        try:
                            index = todo.get_nowait()
                        except queue.Empty:
                            return
                        try:
                            answer = self._send_chunk(job, index, session, lambda n: events.put(("bytes", n)))
                        except BaseException as exc:  # handed to the calling thread, which raises it
                            events.put(("error", exc))
                            return
                        events.put(("done", answer))
            finally:
                events.put(("exit", None))

        threads = [threading.Thread(target=work, name=f"wis-upload-{number}", daemon=True)
                   for number in range(min(parallel, len(indexes)))]
        for thread in threads:
            thread.start()
        interrupted = False
        try:
            media_path, failure = _gather(events, len(threads), progress, stop)
        except KeyboardInterrupt:
            # Whoever pressed Ctrl-C is told at once (the command prints how to resume), not after the chunks in flight
            # end: on a slow link that was a minute of silence. The daemon threads end with their chunk or with the
            # process; the server keeps what it acknowledged, and a rerun asks it what it holds.
            interrupted = True
            raise
        finally:
            stop.set()
            for thread in threads if not interrupted else ():
                thread.join()
        if failure is not None:
            raise failure
        return media_path

    def _send_chunk(self, job, index, session, on_read):
        offset, length = index * job.chunk_size, job.chunk_length(index)
        fields = {"chunkIndex": index, "totalChunks": job.total, "sha": file_sha256(job.path, offset, length)}
        return self.transport.json(
            "PATCH", f"/uploads/{job.stream_id}", Repeat.SAFE, session=session,
            body=lambda: FileSegment(fields, job.path.name, job.path, offset, length, on_read))


def _gather(events, running, progress, stop):
    """Read what the `running` threads report until they have all ended: bytes to `progress`; (the media path if a
    chunk completed the stream, the first error)."""
    media_path, failure = None, None
    while running:
        kind, value = events.get()
        if kind == "bytes":
            progress(value)
        elif kind == "done":
            media_path = value.get("path") or media_path
        elif kind == "error":
            # Chunks not yet started are dropped; those in flight finish; a rerun resumes the rest.
            stop.set()
            failure = failure or value
        else:
            running -= 1
    return media_path, failure


class _Job:
    """One file being sent through a stream."""

    def __init__(self, path, destination, size, sha):
        self.path, self.destination, self.size, self.sha = path, destination, size, sha
        self.stream_id = self.chunk_size = self.total = None

    def chunk_length(self, index):
        return max(0, min(self.chunk_size, self.size - index * self.chunk_size))


class FileSegment:
    """A multipart/form-data body whose file part is a byte range of a file on disk, read as it is sent.

    It is an iterable with a length: requests sends it with a Content-Length, block by block as the iteration
    yields them, SEND_BLOCK bytes of the file at a time (a file-like body would be read 16 KB at a time, each read a
    round of Python calls and a progress report). `on_read(n)` is told of file bytes as they are handed to the
    connection; `take_back()` withdraws them when the attempt failed, so a retried body is not counted twice.
    """

    def __init__(self, fields, file_name, path, offset, length, on_read=None):
        boundary = uuid.uuid4().hex
        self.content_type = f"multipart/form-data; boundary={boundary}"
        quoted = file_name.replace("\\", "\\\\").replace('"', "%22").replace("\r", " ").replace("\n", " ")
        head = "".join(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'
            for name, value in fields.items()
        )
        head += (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{quoted}"\r\n'
                 "Content-Type: application/octet-stream\r\n\r\n")
        self._head = head.encode()
        self._tail = f"\r\n--{boundary}--\r\n".encode()
        self._path, self._offset, self._length = path, offset, length
        self._handle = None
        self._on_read = on_read or (lambda n: None)
        self._reported = 0

    def __len__(self):
        # A known length makes requests send Content-Length instead of a chunked body.
        return len(self._head) + self._length + len(self._tail)

    def __iter__(self):
        yield self._head
        self._handle = open(self._path, "rb", buffering=0)
        self._handle.seek(self._offset)
        left = self._length
        while left > 0:
            data = self._handle.read(min(SEND_BLOCK, left))
            if not data:
                raise ClientError(None, f"{self._path} became shorter while it was being uploaded")
            left -= len(data)
            self._reported += len(data)
            self._on_read(len(data))
            yield data
        self.close()
        yield self._tail

    def take_back(self):
        """Report the file bytes read so far as not sent after all (the attempt failed)."""
        if self._reported:
            self._on_read(-self._reported)
            self._reported = 0

    def close(self):
        if self._handle is not None:
            self._handle.close()
            self._handle = None


class _UploadState:
    """The resume record of one upload: which stream holds this file for this destination and server."""

    def __init__(self, directory, sha, size, destination, base_url):
        key = hashlib.sha256(f"{sha}\n{size}\n{destination}\n{base_url}".encode()).hexdigest()
        self.path = directory / f"{key}.json"

    def load(self):
        try:
            saved = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(saved, dict) or not {"streamId", "chunkSize", "totalChunks"} <= saved.keys():
            return None
        return saved

    def save(self, stream_id, chunk_size, total, file):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        temporary.write_text(json.dumps({"streamId": stream_id, "chunkSize": chunk_size, "totalChunks": total,
                                         "file": str(file)}))
        os.replace(temporary, self.path)

    def remove(self):
        self.path.unlink(missing_ok=True)
