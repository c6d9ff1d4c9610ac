"""Python client of the work-instruction service: GraphQL upserts and reads, uploads, downloads.

Uploads never hold a whole file in memory: the whole-file SHA-256 is computed by streaming the file,
and request bodies are read from disk as they are sent. Files over the single-request limit go
through a chunked stream whose id is kept in a small state file, so running the same upload again
after an interruption sends only the chunks the server does not have yet.
"""
import hashlib
import json
import os
import re
import time
import uuid
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path

import requests

from service.checksums import file_sha256

MB = 1024 * 1024
SINGLE_UPLOAD_LIMIT = 10 * MB
MAX_CHUNK_SIZE = 10 * MB
DEFAULT_CHUNK_SIZE = 5 * MB
DEFAULT_PARALLEL = 4
DESTINATIONS = ("stepImage", "stepVideo", "stepVideoGif")
HEADER = "x-service-api-org"
READ_BLOCK = 1024 * 1024
# Answers worth retrying: the server or a proxy in front of it had a passing problem.
RETRY_STATUSES = frozenset({500, 502, 503, 504})

PROCESS_FIELDS = """
  id name description partNumber startBehavior endBehavior autoSignoutMinutes
  image { path }
  createdAt updatedAt revision
  steps {
    id name
    instructionText { ...TextFields }
    primaryImage { path }
    video { path title autoplay loop }
    actions {
      id kind torque
      description { ...TextFields }
      inputParts { part { ...PartFields } quantity }
      outputPart { ...PartFields }
      scanPart { ...PartFields }
      toolUsed { id name description }
      measurement { measured units min max }
      confirmation { confirmed }
    }
    alerts { severity title text }
    notes { title text }
    torqueGroups { tool { id name description } actions { id } }
  }
  billOfMaterials { part { ...PartFields } quantity }
"""
FRAGMENTS = """
fragment PartFields on Part { id description serial { id name pattern } }
fragment TextFields on StyledText { text bold italic underline color }
"""



class ClientError(Exception):
    """An error answered by the service (or no answer at all: `status` is None then).

    `status` is the HTTP status; GraphQL errors come with HTTP 200 and carry `code`
    (e.g. BAD_USER_INPUT) and `field`, the path of the offending input field, when the server names one.
    """

    def __init__(self, status, message, field=None, code=None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field
        self.code = code


class ServerUnreachable(ClientError):
    """No answer from the service after every retry: connection refused or reset, or timed out."""

    def __init__(self, message):
        super().__init__(None, message)


class _FileSegment:
    """A multipart/form-data body whose file part is a byte range of a file on disk, read as it is sent."""

    def __init__(self, fields, file_name, path, offset, length):
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
        self._position = 0
        self._handle = None

    def __len__(self):
        # A known length makes requests send Content-Length instead of a chunked body.
        return len(self._head) + self._length + len(self._tail)

    def read(self, size=-1):
        size = len(self) - self._position if size is None or size < 0 else size
        out = bytearray()
        while len(out) < size and self._position < len(self):
            out += self._read_some(size - len(out))
        return bytes(out)

    def _read_some(self, size):
        head, length = len(self._head), self._length
        position = self._position
        if position < head:
            data = self._head[position : position + size]
        elif position < head + length:
            if self._handle is None:
                self._handle = open(self._path, "rb")
            self._handle.seek(self._offset + position - head)
            data = self._handle.read(min(size, head + length - position))
            if not data:
                raise ClientError(None, f"{self._path} became shorter while it was being uploaded")
        else:
            data = self._tail[position - head - length : position - head - length + size]
            if position - head - length + len(data) == len(self._tail):
                self.close()
        self._position += len(data)
        return data

    def close(self):
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def default_state_dir():
    """Where resumable upload state is kept: $XDG_CACHE_HOME/wis/uploads or ~/.cache/wis/uploads."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "wis" / "uploads"


def _connection_reason(exc):
    if isinstance(exc, requests.Timeout):
        return "timed out"
    match = re.search(r"\[Errno -?\d+\] ([^'\")]+)", str(exc))
    return match.group(1).strip() if match else type(exc).__name__


def _error_message(response):
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        return body["error"]
    text = " ".join(response.text.split())[:200]
    return f"unexpected answer from the server: {text or response.reason}"


class Client:
    """A session with one service: `Client("http://127.0.0.1:8000", token)`."""

    def __init__(self, base_url, token, timeout=60.0, retries=4, backoff=0.5):
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.session = requests.Session()
        self.session.headers[HEADER] = token

    def close(self):
        """Close the connections of the underlying session."""
        self.session.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    # -- HTTP -----------------------------------------------------------------------------------

    def _request(self, method, path, body=None, **kwargs):
        """Send a request, retrying connection errors, timeouts and 5xx with exponential backoff.

        `body` is a callable returning a fresh _FileSegment, since a retry must send the body again.
        """
        attempt = 0
        while True:
            segment = body() if body else None
            if segment is not None:
                kwargs["data"] = segment
                kwargs["headers"] = {"Content-Type": segment.content_type}
            try:
                response = self.session.request(method, self.base_url + path, timeout=self.timeout, **kwargs)
            except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError) as exc:
                if attempt >= self.retries:
                    raise ServerUnreachable(f"cannot reach {self.base_url}: {_connection_reason(exc)}") from None
            else:
                if response.status_code not in RETRY_STATUSES or attempt >= self.retries:
                    return response
                response.close()
            finally:
                if segment is not None:
                    segment.close()
            time.sleep(self.backoff * 2**attempt)
            attempt += 1

    def _json(self, method, path, **kwargs):
        response = self._request(method, path, **kwargs)
        if response.status_code >= 400:
            raise ClientError(response.status_code, _error_message(response))
        if response.status_code == 204:
            return None
        try:
            return response.json()
        except ValueError:
            raise ClientError(response.status_code, _error_message(response)) from None

    # -- GraphQL --------------------------------------------------------------------------------

    def graphql(self, query, variables=None):
        """Run a GraphQL document; return `data`, or raise ClientError with every error message."""
        response = self._request("POST", "/graph/v2", json={"query": query, "variables": variables or {}})
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise ClientError(response.status_code, _error_message(response))
        errors = body.get("errors")
        if errors:
            first = errors[0] if isinstance(errors[0], dict) else {}
            extensions = first.get("extensions") or {}
            message = "; ".join(str(e.get("message", e)) if isinstance(e, dict) else str(e) for e in errors)
            raise ClientError(response.status_code, message, field=extensions.get("field"),
                              code=extensions.get("code"))
        if response.status_code >= 400 or "data" not in body:
            raise ClientError(response.status_code, _error_message(response))
        return body["data"]

    def _upsert(self, kind, obj):
        mutation = f"{kind}Create"
        input_type = mutation[0].upper() + mutation[1:] + "Input"
        query = f"mutation($input: {input_type}!) {{ {mutation}(input: $input) }}"
        return self.graphql(query, {"input": {kind: obj}})[mutation]

    def create_process(self, process):
        """Create or update a process; return "CREATED" or "UPDATED"."""
        return self._upsert("process", process)

    def create_product(self, product):
        """Create or update a product; return "CREATED" or "UPDATED"."""
        return self._upsert("product", product)

    def create_station(self, station):
        """Create or update a station; return "CREATED" or "UPDATED"."""
        return self._upsert("station", station)

    def get_process(self, process_id):
        """The stored process with its derived data, or None when the org has no such process."""
        query = f"query($id: String!) {{ process(id: $id) {{ {PROCESS_FIELDS} }} }} {FRAGMENTS}"
        return self.graphql(query, {"id": process_id})["process"]

    # -- uploads --------------------------------------------------------------------------------

    def stream_status(self, stream_id):
        """State of a chunked upload stream (`receivedChunks`, `state`, `path` when complete, ...)."""
        return self._json("GET", f"/uploads/{stream_id}")

    def download(self, media_path, destination):
        """Stream the media at `media_path` into `destination` (a file name or a binary file); return its size."""
        response = self._request("GET", media_path, stream=True)
        with response:
            if response.status_code >= 400:
                raise ClientError(response.status_code, _error_message(response))
            if hasattr(destination, "write"):
                return _copy(response, destination)
            with open(destination, "wb") as handle:
                return _copy(response, handle)

    def upload(self, path, destination, chunk_size=DEFAULT_CHUNK_SIZE, parallel=DEFAULT_PARALLEL,
               progress=None, state_dir=None):
        """Upload a file to a destination and return its media path.

        Files up to 10 MB go in one request; larger ones through a chunked stream sending `parallel`
        chunks at a time. `progress(n)` is called with the number of bytes newly acknowledged by the
        server (from the calling thread). `state_dir` keeps the resume state (default: default_state_dir()).
        """
        if destination not in DESTINATIONS:
            raise ClientError(None, f"unknown destination {destination!r}: use one of {', '.join(DESTINATIONS)}")
        if not 1 <= chunk_size <= MAX_CHUNK_SIZE:
            raise ClientError(None, f"chunk size must be between 1 byte and {MAX_CHUNK_SIZE // MB} MB")
        if parallel < 1:
            raise ClientError(None, "parallel must be at least 1")
        path = Path(path)
        try:
            size = path.stat().st_size
            if not path.is_file():
                raise ClientError(None, f"{path} is not a regular file")
            sha = file_sha256(path)
        except OSError as exc:
            raise ClientError(None, f"cannot read {path}: {exc.strerror or exc}") from None
        progress = progress or (lambda n: None)
        if size <= SINGLE_UPLOAD_LIMIT:
            fields = {"destinationId": destination, "sha": sha}
            result = self._json("POST", "/uploads", body=lambda: _FileSegment(fields, path.name, path, 0, size))
            progress(size)
            return result["path"]
        state = _UploadState(Path(state_dir) if state_dir else default_state_dir(),
                             sha, size, destination, self.base_url)
        return self._upload_stream(path, destination, size, sha, chunk_size, parallel, progress, state)

    def _upload_stream(self, path, destination, size, sha, chunk_size, parallel, progress, state):
        stream = self._resume(state, size)
        if stream is None:
            total = -(-size // chunk_size)
            created = self._json("POST", "/uploads", json={"destinationId": destination, "fileName": path.name,
                                                           "fileSize": size, "sha": sha})
            stream = {"streamId": created["streamId"], "chunkSize": chunk_size, "totalChunks": total,
                      "received": []}
            state.save(stream["streamId"], chunk_size, total, path)
        elif stream.get("path"):
            state.remove()
            return stream["path"]
        stream_id, chunk_size, total = stream["streamId"], stream["chunkSize"], stream["totalChunks"]
        received = set(stream["received"])
        progress(sum(_chunk_length(i, chunk_size, size) for i in received))
        missing = [index for index in range(total) if index not in received]
        try:
            media_path = self._send_chunks(path, stream_id, chunk_size, total, size, missing, parallel, progress)
        except ClientError as error:
            if error.status is not None and self._stream_gone(stream_id):
                state.remove()
            raise
        if media_path is None:
            status = self.stream_status(stream_id)
            if status.get("state") != "complete":
                raise ClientError(None, f"stream {stream_id} is still missing chunks "
                                        f"{sorted(set(range(total)) - set(status.get('receivedChunks', [])))}")
            media_path = status["path"]
        state.remove()
        return media_path

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

    def _send_chunks(self, path, stream_id, chunk_size, total, size, indexes, parallel, progress):
        """PATCH the given chunks, `parallel` at a time; return the media path if a chunk completed the stream."""
        media_path = None
        executor = ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="wis-upload")
        try:
            pending = {executor.submit(self._send_chunk, path, stream_id, index, chunk_size, total, size): index
                       for index in indexes}
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    index = pending.pop(future)
                    answer = future.result()
                    media_path = answer.get("path") or media_path
                    progress(_chunk_length(index, chunk_size, size))
        finally:
            # On an error or an interrupt, chunks not yet started are dropped; a rerun resumes them.
            executor.shutdown(wait=True, cancel_futures=True)
        return media_path

    def _send_chunk(self, path, stream_id, index, chunk_size, total, size):
        offset, length = index * chunk_size, _chunk_length(index, chunk_size, size)
        fields = {"chunkIndex": index, "totalChunks": total, "sha": file_sha256(path, offset, length)}
        return self._json("PATCH", f"/uploads/{stream_id}",
                          body=lambda: _FileSegment(fields, path.name, path, offset, length))


def _chunk_length(index, chunk_size, size):
    return max(0, min(chunk_size, size - index * chunk_size))


def _copy(response, handle):
    written = 0
    for block in response.iter_content(READ_BLOCK):
        handle.write(block)
        written += len(block)
    return written


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
