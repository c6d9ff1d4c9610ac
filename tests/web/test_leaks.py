"""No request leaves anything behind: after a warm-up, N more requests of a kind and N more again leave the
number of live objects (and the memory Python has allocated) within a small bound that does not grow with N.

With the Flask test client, no timing: a leak of even one object per request shows as N objects. The batches run in a
Python process of their own (this file run as a script), where no other test's threads allocate meanwhile: in a full
run, pools of earlier tests' apps logging reconnect warnings into pytest's capture grew the test process by 2-20 KB a
batch, and other threads by as much again.
"""
import gc
import hashlib
import io
import itertools
import json
import os
import pathlib
import re
import subprocess
import sys
import tracemalloc
import urllib.parse

import pytest

from service import create_app
from service.web.graphql.endpoint import CACHE_SIZE, CACHE_SIZE_CHARS, CACHED_QUERY_LENGTH, DocumentCache
from support.documents import BENCH_MUTATION, bench_process
from support.media import MP4, PNG, blob
from support.tokens import HEADERS, TOKENS

pytestmark = pytest.mark.exhaustive  # thousands of requests, counted objects and memory


WARM_UP = 20
N = 50
# What a batch of N requests may leave (a cache settling, a counter's int growing a digit); a leak of one object
# per request leaves N objects, a leaked 64-byte string per request leaves 3.2 KB.
OBJECT_BOUND = 20
MEMORY_BOUND = 2048
IDS = 4  # ids are reused, so the stored data stops growing after the first round


def graphql(client, query, variables=None, expected_error=None):
    response = client.post("/graph/v2", json={"query": query, "variables": variables}, headers=HEADERS)
    body = response.get_json()
    if expected_error is None:
        assert response.status_code == 200 and "errors" not in body, body
    else:
        assert expected_error in str(body["errors"]), body
    return body


READS = [
    ('query($id: String!) { process(id: $id) { id name revision steps { id actions { id kind torque } '
     'torqueGroups { actions { id } } } billOfMaterials { quantity } } }', lambda n: {"id": f"leak_p{n % IDS}"}),
    ("query($first: Int) { processes(first: $first) { id revision } }", lambda n: {"first": 10}),
    ('query($id: String!) { product(id: $id) { id dependencies { processId quantity } } }',
     lambda n: {"id": f"leak_prod{n % IDS}"}),
    ("{ products(first: 5) { id } }", lambda n: None),
    ('query($id: String!) { station(id: $id) { id name } }', lambda n: {"id": f"leak_s{n % IDS}"}),
    ("{ stations { id name updatedAt } }", lambda n: None),
]


def process_create(client, n):
    graphql(client, BENCH_MUTATION, {"input": {"process": bench_process(f"leak_p{n % IDS}", steps=3)}})


def product_create(client, n):
    graphql(client, "mutation($input: ProductCreateInput!) { productCreate(input: $input) }", {"input": {"product": {
        "id": f"leak_prod{n % IDS}", "name": "Widget", "finalProcessId": "leak_p1",
        "dependencies": [{"processId": "leak_p1", "upstreamProcessId": "leak_p0", "quantity": 2}]}}})


def station_create(client, n):
    graphql(client, "mutation($input: StationCreateInput!) { stationCreate(input: $input) }",
            {"input": {"station": {"id": f"leak_s{n % IDS}", "name": f"Bench {n}"}}})


def read_queries(client, n):
    query, variables = READS[n % len(READS)]
    graphql(client, query, variables(n))


def refused_input(client, n):
    if n % 2:  # refused by the variable coercion (graphql-core's path and messages)
        graphql(client, BENCH_MUTATION, {"input": {"process": {"id": n, "name": "x"}}}, expected_error="BAD_USER_INPUT")
    else:  # refused by the domain rules
        steps = [{"id": "twice"}, {"id": "twice"}]
        graphql(client, BENCH_MUTATION, {"input": {"process": {"id": "leak_bad", "name": "x", "steps": steps}}},
                expected_error="twice")


def single_upload(client, n):
    data = blob(PNG, 20_000 + n % 7)
    response = client.post("/uploads", headers=HEADERS, data={
        "destinationId": "stepImage", "sha": hashlib.sha256(data).hexdigest(), "file": (io.BytesIO(data), "p.png")})
    assert response.status_code == 201, response.get_json()


def chunked_stream(client, n):
    data = blob(MP4, 30_000 + n % 7)
    response = client.post("/uploads", headers=HEADERS, json={
        "destinationId": "stepVideo", "fileName": "clip.mp4", "fileSize": len(data),
        "sha": hashlib.sha256(data).hexdigest()})
    assert response.status_code == 201, response.get_json()
    stream_id = response.get_json()["streamId"]
    chunks = [data[i:i + 10_000] for i in range(0, len(data), 10_000)]
    for index in (1, 0, *range(2, len(chunks))):  # one out of order
        response = client.patch(f"/uploads/{stream_id}", headers=HEADERS, data={
            "chunkIndex": str(index), "totalChunks": str(len(chunks)), "file": (io.BytesIO(chunks[index]), "blob")})
        assert response.status_code in (200, 201), response.get_json()
    assert response.status_code == 201
    assert client.get(f"/uploads/{stream_id}", headers=HEADERS).status_code == 200


def media_range(client, n):
    if n == 0:  # the first request of the test stores the file the others read
        response = client.post("/uploads", headers=HEADERS, data={
            "destinationId": "stepImage", "file": (io.BytesIO(blob(PNG, 50_000)), "m.png")})
        client.media_path = response.get_json()["path"]
    start = n % 1000
    response = client.get(client.media_path, headers={**HEADERS, "Range": f"bytes={start}-{start + 4095}"})
    assert response.status_code == 206 and len(response.data) == 4096
    response.close()


KINDS = {
    "processCreate": process_create,
    "productCreate": product_create,
    "stationCreate": station_create,
    "reads": read_queries,
    "refused input": refused_input,
    "single upload": single_upload,
    "chunked stream": chunked_stream,
    "media GET with Range": media_range,
}


def settle():
    """Empty the interpreter's own bounded caches, then collect: what is left is what the requests kept.

    Python's `re` cache (512 patterns) gets two patterns per multipart request (werkzeug compiles them for each
    boundary), urllib's urlsplit cache (128) an entry per URL (the test client splits each, and a stream's URLs
    are new), and the type attribute cache (4096 entries) holds on to attribute-name strings made at run time;
    they stop growing at their size, but only after more requests than a batch.
    """
    re.purge()
    urllib.parse.clear_cache()
    sys._clear_type_cache()
    gc.collect()


def make_client(data_dir):
    app = create_app({"DATA_DIR": str(data_dir), "API_TOKENS": TOKENS, "TESTING": True})
    client = app.test_client()
    for n in range(IDS):  # what products and reads refer to
        process_create(client, n)
    return client


@pytest.fixture
def client(tmp_path):
    return make_client(tmp_path / "data")


def measure(send, client):
    """([live objects], [traced bytes]) after the warm-up and after each of two batches of N requests of `send`."""
    counter = itertools.count()
    tracemalloc.start()
    try:
        for _ in range(WARM_UP):
            send(client, next(counter))
        objects, memory = [], []
        for batch in range(3):
            if batch:
                for _ in range(N):
                    send(client, next(counter))
            settle()
            objects.append(len(gc.get_objects()))
            memory.append(tracemalloc.get_traced_memory()[0])
    finally:
        tracemalloc.stop()
    return objects, memory


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """{kind: (objects, memory)} measured by this file run as a script, each kind on a fresh app and data directory."""
    tests = str(pathlib.Path(__file__).resolve().parent.parent)  # for `support`, as pytest's rootdir conftest gives
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [tests, os.environ.get("PYTHONPATH")]))}
    result = subprocess.run([sys.executable, __file__, str(tmp_path_factory.mktemp("leaks"))], capture_output=True,
                            text=True, timeout=600, env=environment)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])


@pytest.mark.parametrize("kind", list(KINDS))
def test_requests_leave_nothing_behind(measured, kind):
    objects, memory = measured[kind]
    object_growth = [after - before for before, after in itertools.pairwise(objects)]
    memory_growth = [after - before for before, after in itertools.pairwise(memory)]
    report = (f"{kind}: live objects {objects} (+{object_growth} per {N} requests), "
              f"traced bytes {memory} (+{memory_growth})")
    print(report)
    # A leak grows with every batch; one batch alone may catch a one-off allocation (a cache's table doubling).
    assert min(object_growth) <= OBJECT_BOUND and min(memory_growth) <= MEMORY_BOUND, report


def test_distinct_query_texts_stay_within_the_caches_bounds(client):
    endpoint = client.application.extensions["graphql"]
    named = None
    for n in range(CACHE_SIZE + 20):
        # A new text each time, as a client writing its values into the query would send.
        graphql(client, f'query Q{n}($id: String!) {{ station(id: $id) {{ id }} s: station(id: "s{n}") {{ id }} }}',
                {"id": f"leak_s{n % IDS}"})
        named = named or dict(endpoint.coercer._named)
    info = endpoint.prepare.cache_info()
    assert info.currsize == CACHE_SIZE and info.chars <= CACHE_SIZE_CHARS
    assert endpoint.coercer._named == named  # the variables' types compiled once, whatever the text
    long_text = "query { stations { id } }" + " " * CACHED_QUERY_LENGTH
    for _ in range(2):
        graphql(client, long_text)
    assert endpoint.prepare.cache_info()[1:] == (info.misses + 2, *info[2:])  # parsed each time, not kept


def test_the_document_cache_drops_the_least_recently_used_to_stay_within_its_length():
    prepared = []
    cache = DocumentCache(lambda text: prepared.append(text) or text.upper(), maxsize=10, max_chars=10, max_length=4)
    assert [cache(text) for text in ("aaaa", "bbb", "aaaa", "cc", "d")] == ["AAAA", "BBB", "AAAA", "CC", "D"]
    assert prepared == ["aaaa", "bbb", "cc", "d"] and cache.cache_info().chars == 10
    cache("ee")  # 12 characters: "bbb", used least recently, goes
    assert cache.cache_info() == (1, 5, 10, 4, 9)
    prepared.clear()
    for text in ("aaaa", "cc", "d", "ee", "bbb", "fffff"):  # "aaaa" goes for "bbb"; "fffff" is too long to keep
        cache(text)
    assert prepared == ["bbb", "fffff"]
    assert cache.cache_info() == (5, 7, 10, 4, 8)


if __name__ == "__main__":  # the batches of every kind, in a process of their own: {kind: (objects, memory)}
    root = pathlib.Path(sys.argv[1])
    print(json.dumps({kind: measure(send, make_client(root / f"data-{number}"))
                      for number, (kind, send) in enumerate(KINDS.items())}))
