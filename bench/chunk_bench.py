"""Multipart chunk benchmark: our SPEC chunk API (POST /uploads, then PATCH /uploads/<id> multipart/form-data with
chunkIndex, totalChunks, file, in order) against @tus/server + @tus/file-store, with one lean client (run by hand).

bench/tus_bench.py with our client swapped: the same servers (ours under the shipped gunicorn configuration, kept up
for the whole benchmark), the same modes (one upload at a time, then `--parallel` uploads of different files at
once, each sending its chunks in order), the same warm-up, sync after each run, order swapping and figures (MB/s,
server CPU s/GB, client CPU s/GB, completing request against the median one). Each chunk request is built by hand
(`http.client`, one keep-alive connection per upload): the form fields, then the file part, in one body, sent in
three pieces as the tus client sends its one (until 2026-11-29, fifth session, the pieces were joined first: a copy of
every chunk in the client, 0.26 client CPU s/GB more than the tus client); ours is given the file's sha and verifies
it. `--compare-tree DIR` runs another checkout too, as `before`. Unlike bench/upload_bench.py, it has no floor or
ceiling; `ChunksInFlight` (bench/ab_bench.py --in-flight) sends four chunks at once.

    .venv/bin/python bench/chunk_bench.py [--runs 4] [--size-mb 500] [--chunk-mb 5] [--parallel 4] [--compare-tree DIR]
        [--disk-ceiling] [--again]
"""
import http.client
import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import tus_bench  # noqa: E402
from upload_bench import TOKEN  # noqa: E402

BOUNDARY = "----chunk-bench-boundary-7f3a"
AUTH = {"x-service-api-org": TOKEN}


def multipart(fields, data):
    """A multipart/form-data body in three pieces, sent one after another without joining them (as the tus client
    sends its PATCH body, a copy of the file's bytes would cost the client a copy): the text `fields` in order and the
    head of the part `file`, then `data`, then the closing boundary."""
    head = b"".join(f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
                    for name, value in fields.items())
    head += (f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="c"\r\n'
             "Content-Type: application/octet-stream\r\n\r\n").encode()
    return [head, data, f"\r\n--{BOUNDARY}--\r\n".encode()]


class Chunks(tus_bench.Ours):
    """Our service, sent the SPEC API's multipart chunks in order."""
    # Chunks sent at once, each from a connection of its own; 1: one after another, in order.
    in_flight = 1

    def upload(self, file, size, chunk_size, sha):
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
        connection.request("POST", "/uploads", headers={**AUTH, "Content-Type": "application/json"}, body=json.dumps({
            "destinationId": "stepVideo", "fileName": file.name, "fileSize": size, "sha": sha}))
        response = connection.getresponse()
        created = response.read()
        connection.close()
        if response.status not in (200, 201):
            raise SystemExit(f"POST /uploads: {response.status} {created!r}")
        stream, total = json.loads(created)["streamId"], -(-size // chunk_size)
        indexes, lock, latencies, completed = iter(range(total)), threading.Lock(), [], []

        def send_some():
            """Send the next chunk not yet taken until there is none left, on a connection of this thread's own."""
            connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
            fd = os.open(file, os.O_RDONLY)
            try:
                while (index := _next(indexes, lock)) is not None:
                    body = multipart({"chunkIndex": index, "totalChunks": total},
                                     os.pread(fd, chunk_size, index * chunk_size))
                    sent = time.perf_counter()
                    connection.request("PATCH", f"/uploads/{stream}", body=body, headers={
                        **AUTH, "Content-Type": f"multipart/form-data; boundary={BOUNDARY}",
                        "Content-Length": str(sum(map(len, body)))})
                    response = connection.getresponse()
                    answer = response.read()
                    latencies.append(time.perf_counter() - sent)
                    if response.status not in (200, 201):
                        raise SystemExit(f"chunk {index}: {response.status} {answer!r}")
                    if response.status == 201:
                        completed.append(json.loads(answer)["path"])
            finally:
                os.close(fd)
                connection.close()

        with ThreadPoolExecutor(self.in_flight) as senders:
            for sending in [senders.submit(send_some) for _ in range(self.in_flight)]:
                sending.result()
        if len(completed) != 1:
            raise SystemExit(f"{len(completed)} chunks answered 201, not 1")
        media = self.data_dir / "orgs" / "default" / "media" / "videos" / completed[0].rsplit("/", 1)[1]
        return latencies, self.verifier(media, sha)


class ChunksInFlight(Chunks):
    """The same chunks, four at once, as a client that sends in parallel without a per-chunk `sha` field (the SPEC's
    chunks have none): all but one of those in flight arrive out of order and are received aside, then merged."""
    in_flight = 4


def _next(indexes, lock):
    with lock:
        return next(indexes, None)


if __name__ == "__main__":
    tus_bench.main(Chunks, __doc__)
