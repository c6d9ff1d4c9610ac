"""The least a Python WSGI app can do per chunk, a reference for bench/upload_bench.py (not the service).

Each request is one chunk of the upload API, sent in order: its multipart body is parsed with werkzeug's sans-IO
decoder 1 MB at a time (as service/web/uploads/multipart.py does), the file part is appended to one file while hashlib
hashes it (the work of the service's running SHA-256, which the benchmark checks on the file instead), and the file
is fsynced before the answer, so what was acknowledged is on disk. There is no Flask, no
token, no stream bookkeeping and no resumable hash state: the distance between this and the service is what those
cost, and the distance between this and tus is what Python, multipart and fsync cost.

    gunicorn -c python:service.gunicorn_config --chdir bench 'floor_app:create_app()'
"""
import hashlib
import os
import threading

from werkzeug.http import parse_options_header
from werkzeug.sansio.multipart import Data, Epilogue, File, MultipartDecoder, NeedData

READ_SIZE = 1024 * 1024


def create_app():
    """A WSGI app appending every file part it receives to `$WIS_DATA_DIR/floor.bin`."""
    target = os.path.join(os.environ["WIS_DATA_DIR"], "floor.bin")
    lock = threading.Lock()

    def app(environ, start_response):
        if environ["REQUEST_METHOD"] != "PATCH":
            start_response("200 OK", [("Content-Type", "application/json")])
            return [b'{"status": "ok"}']
        sha = hashlib.sha256()
        stream, remaining = environ["wsgi.input"], int(environ["CONTENT_LENGTH"])
        boundary = parse_options_header(environ["CONTENT_TYPE"])[1]["boundary"]
        decoder = MultipartDecoder(boundary.encode("latin-1"))
        in_file = False
        with lock, open(target, "ab") as output:
            while True:
                data = stream.read(min(READ_SIZE, remaining))
                remaining -= len(data)
                decoder.receive_data(data or None)
                event = decoder.next_event()
                while not isinstance(event, (NeedData, Epilogue)):
                    if isinstance(event, File):
                        in_file = True
                    elif isinstance(event, Data) and in_file:
                        output.write(event.data)
                        sha.update(event.data)
                        in_file = event.more_data
                    event = decoder.next_event()
                if isinstance(event, Epilogue) or not data:
                    break
            output.flush()
            os.fsync(output.fileno())
        start_response("200 OK", [("Content-Type", "application/json")])
        return [b'{"stored": true}']

    return app
