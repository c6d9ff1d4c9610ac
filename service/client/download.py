"""Downloads of media: a body cut off is asked for again from where it stopped; a file is whole or left as it was.

The transport (service.client.transport) sends a request again until its answer's head arrives; the body comes after it.
When the connection breaks while the body streams (a proxy that gives up, a reset, a read that times out), the request
is sent again here, as the transport would send it again: up to `retries` times in a row, waiting backoff * 1, 2, 4...
s, then ServerUnreachable. The next request asks for the rest only (`Range: bytes=<received>-`, with `If-Range` and the
first answer's validator, so that the rest is of the same file) when the server said it takes ranges (`Accept-Ranges:
bytes`, as it does for media); an answer of the whole file (200) starts the file again. An attempt that brought at least
PROGRESS bytes (1 MB) beyond the farthest any attempt reached counts as progress: the count of failures in a row starts
again, so a long download over a link that drops now and then ends, while one that never moves is given up.

A destination named by a path is written to a temporary file beside it, synced and renamed over it only when whole,
and removed on any failure (Ctrl-C included): a failed download leaves the destination as it was.
"""
import os
import time
import uuid
from pathlib import Path

import requests

from service.client.errors import ClientError, ServerUnreachable
from service.client.transport import BROKEN, Repeat, error_message

# What is read from the connection at a time. A read that the connection's end cuts short loses what it had read
# (urllib3 raises IncompleteRead without it), so a resumed request asks for at most this much again.
READ_BLOCK = 64 * 1024
# An attempt that brought this much made progress: the failures in a row are counted again from there.
PROGRESS = 1024 * 1024


class _CutOff(Exception):
    """The body ended before the length its head announced (urllib3 raises for that too; this is the check's own)."""


def download(transport, media_path, destination):
    """Stream the media at `media_path` into `destination` (a file name or a binary file); return its size."""
    if hasattr(destination, "write"):
        return _fetch(transport, media_path, destination)
    target = Path(destination)
    temporary = target.with_name(f".{target.name}.{uuid.uuid4().hex[:12]}.part")
    # os.open's mode is the one open(..., "wb") gives a new file (0666 less the umask), unlike tempfile's 0600.
    handle = open(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), "wb")
    try:
        with handle:
            size = _fetch(transport, media_path, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return size


def _fetch(transport, media_path, handle):
    """Write the body into `handle`, asking again for what a broken connection did not bring; its size."""
    start = handle.tell() if getattr(handle, "seekable", lambda: False)() else None
    # `farthest`: the most received by any attempt. Progress is bytes beyond it: a server that ignores Range and breaks
    # off at the same place every time (the whole file again, received counting from 0) must not count as progress,
    # or it would be asked again for ever.
    received, farthest, validator, failures = 0, 0, None, 0
    while True:
        resuming = received > 0 and validator is not None
        headers = {"Range": f"bytes={received}-", "If-Range": validator} if resuming else {}
        response = transport.request("GET", media_path, Repeat.SAFE, stream=True, headers=headers)
        with response:
            if response.status_code >= 400:
                raise ClientError(response.status_code, error_message(response))
            if response.status_code != 206 or not resuming:
                if received:
                    _rewind(handle, start, media_path)  # the whole file again: it replaces what came before
                received = 0
                validator = _validator(response)
            elif _range_start(response) != received:
                raise ClientError(206, f"asked for {media_path} from byte {received}, the server answered "
                                       f"{response.headers.get('Content-Range')!r}")
            expected = received + int(response.headers["Content-Length"]) \
                if response.headers.get("Content-Length", "").isdigit() else None
            try:
                for block in response.iter_content(READ_BLOCK):
                    handle.write(block)
                    received += len(block)
                if expected is not None and received != expected:
                    raise _CutOff()
            except (*BROKEN, _CutOff) as error:
                failures = 1 if received - farthest >= PROGRESS else failures + 1
                farthest = max(farthest, received)
                if failures > transport.retries:
                    raise ServerUnreachable(
                        f"cannot download {media_path} from {transport.base_url}: the connection broke "
                        f"{failures} times in a row, the last after {received} bytes ({_reason(error)})") from None
                time.sleep(transport.backoff * 2 ** (failures - 1))
                continue
        return received


def _validator(response):
    """What If-Range may carry to ask for the rest of this answer's file: its strong ETag, else its Last-Modified;
    None when the server does not take ranges."""
    if response.headers.get("Accept-Ranges", "").lower() != "bytes":
        return None
    etag = response.headers.get("ETag")
    if etag and not etag.startswith("W/"):
        return etag
    return response.headers.get("Last-Modified")


def _range_start(response):
    """The first byte of a 206 answer (`Content-Range: bytes <start>-<end>/<size>`), or None."""
    unit, _, rest = response.headers.get("Content-Range", "").partition(" ")
    start = rest.partition("-")[0]
    return int(start) if unit == "bytes" and start.isdigit() else None


def _rewind(handle, start, media_path):
    if start is None:
        raise ClientError(None, f"the download of {media_path} must start again, and its destination cannot go back")
    handle.seek(start)
    handle.truncate()


def _reason(error):
    if isinstance(error, _CutOff):
        return "the body ended early"
    if isinstance(error, requests.Timeout) or "timed out" in str(error):
        return "timed out"
    # ChunkedEncodingError(ProtocolError("Connection broken: IncompleteRead(...)", ...)): the words inside say it.
    inner = error.args[0] if error.args else None
    if isinstance(inner, BaseException) and inner.args and isinstance(inner.args[0], str):
        return inner.args[0]
    return type(error).__name__
