"""Helpers around service.client: downloading a media file, stopping an upload part-way, routing its sessions."""
import hashlib
import io

import requests

from service.interface import MB


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
