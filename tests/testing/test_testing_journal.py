"""The request journal of test mode (GET /_test/requests, CONTRACT 12): what it records of each request, paging,
bad input, reset, its bound, and one journal for every gunicorn worker, on both backends."""
import hashlib
import threading

import pytest
import requests

from service.storage import get_repository
from service.storage.testmode.journal_store import KEEP, JournalStore
from service.testing import RequestJournal, ThreadedServer
from support.media import MP4, png
from support.servers import SHIPPED_WORKER_CLASS
from support.tokens import HEADERS, OTHER_HEADERS, TOKEN
from support.uploads import create_stream, send_chunk, upload

PROCESS_CREATE = "mutation($input: ProcessCreateInput!) { processCreate(input: $input) }"
FIELDS = ["seq", "at", "org", "method", "path", "status", "durationMs", "operation", "ids", "requestId", "fault"]


@pytest.fixture
def app(make_app):
    return make_app(TEST_MODE=True)


def journal(client, since=None):
    response = client.get("/_test/requests", headers=HEADERS, query_string={} if since is None else {"since": since})
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()["requests"]


def calls(entries):
    """(method, path, status, operation, ids) of each entry."""
    return [(e["method"], e["path"], e["status"], e["operation"], e["ids"]) for e in entries]


def gql(client, query, variables=None, headers=HEADERS):
    return client.post("/graph/v2", json={"query": query, "variables": variables}, headers=headers)


def test_each_call_is_recorded_with_its_operation_and_the_ids_it_named(client):
    gql(client, 'mutation { stationCreate(input: {station: {id: "st_1", name: "Press"}}) }')
    gql(client, PROCESS_CREATE, {"input": {"process": {"id": "weld_1", "name": "Weld"}}})
    # Two root fields in one request (aliases, a fragment): one entry each, sharing the request id.
    gql(client, 'query($id: String!) { a: process(id: $id) { id } ...More } '
                'fragment More on Query { b: process(id: "weld_2") { id } stations { id } }', {"id": "weld_1"})
    client.get("/graph/v2", query_string={"query": '{ station(id: "st_1") { id } }'},
               headers={**HEADERS, "Accept": "application/json"})
    gql(client, "{ stations { id } }", headers={})  # no token
    gql(client, "{ nothing }")  # does not validate: no operation to name

    entries = journal(client)
    assert calls(entries) == [
        ("POST", "/graph/v2", 200, "stationCreate", ["st_1"]),
        ("POST", "/graph/v2", 200, "processCreate", ["weld_1"]),
        ("POST", "/graph/v2", 200, "process", ["weld_1"]),
        ("POST", "/graph/v2", 200, "process", ["weld_2"]),
        ("POST", "/graph/v2", 200, "stations", []),
        ("GET", "/graph/v2", 200, "station", ["st_1"]),
        ("POST", "/graph/v2", 401, "stations", []),  # refused, and named all the same
        ("POST", "/graph/v2", 400, None, []),
    ]
    assert [entry["seq"] for entry in entries] == list(range(1, 9))
    assert all(list(entry) == FIELDS for entry in entries)
    assert [entry["org"] for entry in entries] == ["default"] * 6 + [None, "default"]
    assert len({entry["requestId"] for entry in entries}) == 6  # one per request: the three reads share one
    assert all(entry["at"].endswith("Z") and entry["durationMs"] >= 0 and entry["fault"] is None for entry in entries)


def test_a_call_a_fault_answered_is_named_too(client):
    fault = client.post("/_test/faults", headers=HEADERS, json={"path": "^/graph", "status": 503, "times": 2}).get_json()
    gql(client, PROCESS_CREATE, {"input": {"process": {"id": "weld_1", "name": "Weld"}}})
    client.get("/graphql", query_string={"query": '{ process(id: "weld_1") { id } }'},
               headers={**HEADERS, "Accept": "application/json"})
    entries = journal(client)
    assert calls(entries) == [("POST", "/graph/v2", 503, "processCreate", ["weld_1"]),
                              ("GET", "/graphql", 503, "process", ["weld_1"])]
    assert [entry["fault"] for entry in entries] == [fault["id"]] * 2


@pytest.mark.parametrize("fields", [1, 200])
def test_a_request_refused_for_its_token_is_one_entry_however_many_fields_it_names(client, fields):
    """A client without a token must not fill the journal: one entry per 401, whatever it asks for."""
    aliases = " ".join(f'p{n}: process(id: "weld_{n}") {{ id }}' for n in range(fields))
    for headers in ({}, {"x-service-api-org": "not-a-token"}):
        assert gql(client, f"{{ {aliases} }}", headers=headers).status_code == 401
    gql(client, '{ a: process(id: "weld_1") { id } b: process(id: "weld_2") { id } }')
    assert calls(journal(client)) == [("POST", "/graph/v2", 401, "process", ["weld_0"])] * 2 + [
        ("POST", "/graph/v2", 200, "process", ["weld_1"]), ("POST", "/graph/v2", 200, "process", ["weld_2"])]


def test_uploads_record_the_stream_id_and_the_media_path(client):
    image = upload(client, HEADERS, png(300, seed=1)).get_json()["path"]
    client.get(image, headers=HEADERS)
    data = MP4 + bytes(600)
    stream_id = create_stream(client, HEADERS, data)
    send_chunk(client, HEADERS, stream_id, 1, 2, data[300:])
    video = send_chunk(client, HEADERS, stream_id, 0, 2, data[:300]).get_json()["path"]
    client.get(f"/uploads/{stream_id}", headers=HEADERS)
    client.delete(f"/uploads/{stream_id}", headers=HEADERS)

    assert calls(journal(client)) == [
        ("POST", "/uploads", 201, None, [image]),
        ("GET", image, 200, None, [image]),
        ("POST", "/uploads", 201, None, [stream_id]),
        ("PATCH", f"/uploads/{stream_id}", 200, None, [stream_id]),
        ("PATCH", f"/uploads/{stream_id}", 201, None, [stream_id, video]),
        ("GET", f"/uploads/{stream_id}", 200, None, [stream_id]),
        ("DELETE", f"/uploads/{stream_id}", 204, None, [stream_id]),
    ]


def test_the_journal_keeps_no_token_query_string_or_body(app, client):
    secret = "NotForTheJournal"
    gql(client, f'{{ stations(after: "{secret}1") {{ id }} }}')
    client.get("/graph/v2", query_string={"query": f'{{ stations(after: "{secret}2") {{ id }} }}'},
               headers={**HEADERS, "Accept": "application/json"})
    gql(client, PROCESS_CREATE, {"input": {"process": {"id": "weld_1", "name": f"{secret}3"}}})
    client.get(f"/healthz?{secret}4=1", headers=HEADERS)
    answer = client.get("/_test/requests", headers=HEADERS).get_data(as_text=True)
    on_disk = b"".join(path.read_bytes() for path in get_repository(app).journal.directory.iterdir())
    for text in (answer, on_disk.decode()):
        assert "/healthz" in text
        assert secret not in text and TOKEN not in text


def test_each_org_token_is_named_but_every_org_shares_the_journal(client):
    gql(client, "{ stations { id } }", headers=OTHER_HEADERS)
    gql(client, "{ stations { id } }", headers={"x-pico-api-org": TOKEN})
    assert [entry["org"] for entry in journal(client)] == ["other", "default"]


def test_since_pages_through_the_journal(client):
    for _ in range(5):
        client.get("/healthz")
    assert [entry["seq"] for entry in journal(client, since=3)] == [4, 5]
    assert journal(client, since=5) == []
    assert journal(client, since=10**30) == []
    assert len(journal(client, since=0)) == 5


@pytest.mark.parametrize("since", ["abc", "1.5", "-1", "", "1e3", "9" * 5000])
def test_a_since_that_is_not_a_whole_number_is_a_400_naming_it(client, since):
    client.get("/healthz")
    response = client.get("/_test/requests", headers=HEADERS, query_string={"since": since})
    assert response.status_code == 400
    assert response.get_json()["error"].startswith("since: ")
    assert len(journal(client)) == 1


def test_an_unknown_parameter_is_a_400_naming_it(client):
    response = client.get("/_test/requests", headers=HEADERS, query_string={"snice": "1"})
    assert response.status_code == 400 and response.get_json() == {"error": "snice: unknown parameter"}


def test_reset_empties_the_journal_and_seq_goes_on(client):
    client.get("/healthz")
    client.get("/healthz")
    assert client.post("/_test/reset", headers=HEADERS).status_code == 200
    assert journal(client) == []
    client.get("/healthz")
    # Never a seq twice: a reader paging with `since` from before the reset still sees the new entry.
    assert [entry["seq"] for entry in journal(client, since=2)] == [3]


def test_the_test_endpoints_are_not_recorded(client):
    client.get("/_test/objects", headers=HEADERS)
    client.get("/_test/faults", headers=HEADERS)
    journal(client)
    client.get("/healthz")
    assert calls(journal(client)) == [("GET", "/healthz", 200, None, [])]


def test_a_huge_path_is_recorded_cut_to_1000_characters(client):
    client.get("/" + "x" * 5000)
    [entry] = journal(client)
    assert entry["status"] == 404 and entry["path"] == "/" + "x" * 999


# -- the store: bounded, seq, torn lines --------------------------------------------------------------------------

@pytest.mark.file_backend_only("about the journal's files, the same on both backends (each node's data directory)")
def test_the_journal_answers_the_last_10000_and_stays_bounded_on_disk(tmp_path):
    store = JournalStore(tmp_path)
    for batch in range(50):
        store.append([{"n": batch * 500 + i} for i in range(500)])  # 25,000 entries
    entries = store.read()
    assert len(entries) == KEEP == 10_000
    assert [entry["seq"] for entry in entries] == list(range(15_001, 25_001))
    assert entries[-1] == {"seq": 25_000, "n": 24_999}
    lines = sum(len(path.read_bytes().splitlines()) for path in store.directory.glob("*.jsonl"))
    assert KEEP <= lines <= 2 * KEEP
    assert [entry["seq"] for entry in store.read(since=24_990)] == list(range(24_991, 25_001))


@pytest.mark.file_backend_only("about the journal's files, the same on both backends (each node's data directory)")
def test_a_line_torn_by_a_killed_worker_costs_that_entry_only(tmp_path):
    store = JournalStore(tmp_path)
    store.append([{"n": 1}])
    store.append([{"n": 2}])
    current = store.directory / "current.jsonl"
    current.write_bytes(current.read_bytes()[:-5])  # the worker was killed while writing its line
    store.append([{"n": 3}, {"n": 4}])
    assert store.read() == [{"seq": 1, "n": 1}, {"seq": 3, "n": 3}, {"seq": 4, "n": 4}]


# -- across gunicorn workers --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def test_server(tmp_path_factory, backend, start_module_gunicorn):
    return start_module_gunicorn(tmp_path_factory.mktemp("journal") / "data", workers=2, backend=backend,
                                 env={"WIS_TEST_MODE": "1"},
                                 extra_args=("--worker-class", SHIPPED_WORKER_CLASS, "--threads", "4"))


def test_every_worker_appends_to_one_journal_with_one_seq(test_server):
    url = test_server.url
    requests.post(url + "/_test/reset", headers=HEADERS, timeout=30).raise_for_status()

    def call(number):
        # A new connection each time, from 6 threads at once: both workers answer some.
        assert requests.get(f"{url}/uploads/{number:032x}", headers=HEADERS, timeout=30).status_code == 404

    threads = [threading.Thread(target=lambda k=k: [call(k * 10 + i) for i in range(10)]) for k in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    readings = [requests.get(url + "/_test/requests", headers=HEADERS, timeout=30).json()["requests"]
                for _ in range(4)]
    assert all(reading == readings[0] for reading in readings)  # whichever worker answers the reading
    entries = readings[0]
    assert [entry["seq"] for entry in entries] == list(range(entries[0]["seq"], entries[0]["seq"] + 60))
    assert sorted(entry["path"] for entry in entries) == sorted(f"/uploads/{n:032x}" for n in range(60))
    assert all(entry["status"] == 404 and entry["ids"] == [entry["path"][9:]] for entry in entries)


# -- service.testing.RequestJournal: the helpers a test reads the journal with -------------------------------------

@pytest.fixture(scope="module")
def threaded():
    with ThreadedServer(token=TOKEN) as server:
        yield server


@pytest.fixture
def helpers(threaded):
    threaded.reset()
    with threaded.session() as session:
        yield RequestJournal(session), session


def test_helpers_filter_and_mark(helpers):
    journal_, session = helpers
    session.post("/graph/v2", json={"query": 'mutation { stationCreate(input: {station: {id: "st_1", name: "A"}}) }'})
    journal_.mark()
    session.get("/healthz")
    session.post("/graph/v2", json={"query": '{ station(id: "st_1") { id } }'})
    assert [entry["path"] for entry in journal_.entries()] == ["/healthz", "/graph/v2"]
    assert journal_.operations() == ["station"]
    assert [entry["path"] for entry in journal_.entries(method="get")] == ["/healthz"]
    assert journal_.entries(path="^/health") == journal_.entries(method="GET")
    journal_.assert_not_called("stationCreate")  # before the mark


def test_uploads_counts_a_retried_last_chunk_once_and_a_second_upload_twice(helpers):
    journal_, session = helpers
    data = MP4 + bytes(300)
    stream_id = session.post("/uploads", json={"destinationId": "stepVideo", "fileName": "c.mp4",
                                               "fileSize": len(data), "sha": hashlib.sha256(data).hexdigest()}
                             ).json()["streamId"]
    chunk = {"chunkIndex": "0", "totalChunks": "1"}
    first = session.patch(f"/uploads/{stream_id}", data=chunk, files={"file": ("b", data)}).json()["path"]
    again = session.patch(f"/uploads/{stream_id}", data=chunk, files={"file": ("b", data)})
    assert again.json()["path"] == first  # the client did not hear the first answer and sent the chunk again
    image = session.post("/uploads", files={"file": ("a.png", png(100, seed=2))}, data={"destinationId": "stepImage"})
    image_again = session.post("/uploads", files={"file": ("a.png", png(100, seed=3))},
                               data={"destinationId": "stepImage"})
    assert journal_.uploads() == [first, image.json()["path"], image_again.json()["path"]]


def test_failure_messages_say_what_was_expected_and_what_the_journal_holds(helpers):
    journal_, session = helpers
    with pytest.raises(AssertionError, match=r"^expected processCreate at least once, saw it 0 times; the journal "
                                             r"holds nothing$"):
        journal_.assert_called("processCreate")
    session.get("/healthz")
    with pytest.raises(AssertionError) as failure:
        journal_.assert_called("processCreate", ids=["weld_1"], times=1)
    assert str(failure.value) == (f"expected processCreate of `weld_1` once, saw it 0 times; the journal holds:\n"
                                  f"  #{journal_.entries()[0]['seq']} GET /healthz -> 200")
    for _ in range(3):
        session.post("/graph/v2", json={"query": PROCESS_CREATE,
                                        "variables": {"input": {"process": {"id": "weld_1", "name": "W"}}}})
    with pytest.raises(AssertionError, match=r"^expected no processCreate of `weld_1`, saw it 3 times:\n  #\d+ POST "
                                             r"/graph/v2 -> 200 processCreate \[weld_1\]\n"):
        journal_.assert_not_called("processCreate", ids=["weld_1"])
    journal_.assert_called("processCreate", ids=["weld_1"], times=3)
