"""GET /events and GraphQL subscriptions through the app (Flask's test client, both backends): what is refused before
any stream starts (400 naming the argument, 401, the cap's 503 with Retry-After), the first lines of a stream, the
session cookie, and the graphql-sse answers (errors in an accepted stream, a subscription refused without
`Accept: text/event-stream`, queries still answered with JSON)."""
import json

import pytest

from service.domain.stations import upsert_station
from service.storage import get_repository
from support.metrics import metric_value
from support.tokens import TOKEN

ORG = "default"
SSE = "text/event-stream"
SUBSCRIBE = "subscription($after: Int) { events(after: $after) { seq type id revision station { name } } }"


@pytest.fixture
def repo(app):
    return get_repository(app)


def commit(repo, *names):
    for name in names:
        upsert_station(repo, ORG, {"id": "st_press", "name": name})


def opened(client, path="/events", **headers):
    """A stream's answer, not read yet (the test closes it)."""
    return client.get(path, headers=headers, buffered=False)


def messages(response, count):
    """The first `count` messages of a stream (each its lines), read from its body as it comes."""
    found, text = [], ""
    for chunk in response.response:
        text += chunk.decode()
        *whole, text = text.split("\n\n")
        found += [message.split("\n") for message in whole]
        if len(found) >= count:
            return found[:count]
    return found


def test_a_stream_starts_with_retry_then_the_events_after_last_event_id(client, auth, repo):
    commit(repo, "a", "b", "c")
    response = opened(client, **auth, **{"Last-Event-ID": "1"})
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "text/event-stream; charset=utf-8"
    assert response.headers["Cache-Control"] == "no-store" and response.headers["X-Accel-Buffering"] == "no"
    first, second, third = messages(response, 3)
    response.close()
    assert first == ["retry: 3000"]
    assert second[:2] == ["id: 2", "event: station.updated"]
    assert json.loads(second[2].removeprefix("data: ")) == {
        "type": "station.updated", "timestamp": json.loads(second[2][6:])["timestamp"],
        "data": {"seq": 2, "kind": "station", "id": "st_press", "revision": 2, "change": "UPDATED", "name": "b",
                 "author": None, "comment": None}}
    assert third[:2] == ["id: 3", "event: station.updated"]


@pytest.mark.parametrize("start", [{"Last-Event-ID": "99"}, {"after": "99"}])
def test_a_start_past_the_latest_is_told_to_start_again_from_the_oldest(client, auth, repo, start):
    commit(repo, "a", "b")
    path = "/events" + (f"?after={start['after']}" if "after" in start else "")
    response = opened(client, path, **auth, **{name: value for name, value in start.items() if name != "after"})
    found = messages(response, 4)
    response.close()
    assert found[1] == ["id: 0", "event: reset", 'data: {"oldest":1}']
    assert [message[0] for message in found[2:]] == ["id: 1", "id: 2"]


def test_last_event_id_wins_over_after_and_types_filter(client, auth, repo):
    commit(repo, "a", "b")
    repo.documents.delete(ORG, "stations", "st_press")
    response = opened(client, "/events?after=2&types=process.*&types=station.deleted,station.created", **auth,
                      **{"Last-Event-ID": "0"})
    found = messages(response, 3)
    response.close()
    assert [message[:2] for message in found[1:]] == [["id: 1", "event: station.created"],
                                                      ["id: 3", "event: station.deleted"]]


@pytest.mark.parametrize("path, headers, named", [
    ("/events", {"Last-Event-ID": "abc"}, "Last-Event-ID: must be a seq"),
    ("/events", {"Last-Event-ID": "-1"}, "Last-Event-ID: must be a seq"),
    ("/events", {"Last-Event-ID": " 7"}, "Last-Event-ID: must be a seq"),
    ("/events?after=1.5", {}, "after: must be a seq"),
    ("/events?after=%EF%BC%91", {}, "after: must be a seq"),  # a full-width digit
    ("/events?types=process.moved", {}, "types[0]: must be <kind>.<change>"),
    ("/events?types=station.*,", {}, "types[1]: must be <kind>.<change>"),
])
def test_a_bad_start_or_type_is_a_400_naming_it_before_any_stream(client, auth, path, headers, named):
    response = client.get(path, headers={**auth, **headers})
    assert response.status_code == 400 and response.mimetype == "application/json"
    assert response.get_json()["error"].startswith(named)


def test_a_stream_needs_the_token_or_a_session_cookie(client, auth, repo):
    assert client.get("/events").status_code == 401
    assert client.get("/events", headers={"x-service-api-org": "nope-nope"}).status_code == 401
    assert client.post("/view/login", data={"token": TOKEN}).status_code == 303
    commit(repo, "a")
    response = opened(client, **{"Last-Event-ID": "0"})
    found = messages(response, 2)
    response.close()
    assert response.status_code == 200 and found[1][:2] == ["id: 1", "event: station.created"]


def test_beyond_the_cap_a_503_with_retry_after_at_once_and_a_closed_stream_frees_its_place(make_app, auth):
    client = make_app(EVENT_STREAMS_PER_WORKER=1).test_client()
    first = opened(client, **auth)
    refused = client.get("/events", headers=auth)
    assert refused.status_code == 503 and refused.headers["Retry-After"] == "5"
    assert "(1, WIS_EVENT_STREAMS_PER_WORKER)" in refused.get_json()["error"]
    subscription = client.post("/graph/v2", json={"query": SUBSCRIBE}, headers={**auth, "Accept": SSE})
    assert subscription.status_code == 503 and subscription.headers["Retry-After"] == "5"
    assert subscription.get_json()["errors"][0]["extensions"]["code"] == "SERVICE_UNAVAILABLE"
    assert metric_value(client.get("/metrics").get_data(as_text=True), "wis_event_streams_open") == 1
    first.close()
    second = opened(client, **auth)
    assert second.status_code == 200
    second.close()
    assert metric_value(client.get("/metrics").get_data(as_text=True), "wis_event_streams_open") == 0


# -- GraphQL subscriptions ---------------------------------------------------------------------------------------------

def subscribe(client, auth, query=SUBSCRIBE, variables=None, accept=SSE):
    return client.post("/graph/v2", json={"query": query, "variables": variables or {}},
                       headers={**auth, "Accept": accept}, buffered=False)


def test_a_subscription_streams_each_event_as_a_next_result(client, auth, repo):
    commit(repo, "a", "b")
    response = subscribe(client, auth, variables={"after": 0})
    assert response.status_code == 200 and response.headers["Content-Type"] == "text/event-stream; charset=utf-8"
    opened, *found = messages(response, 3)
    response.close()
    assert opened == [": keepalive"]  # at once: the answer's head goes out with it
    assert [message[0] for message in found] == ["event: next", "event: next"]
    assert [json.loads(message[1].removeprefix("data: ")) for message in found] == [
        {"data": {"events": {"seq": 1, "type": "station.created", "id": "st_press", "revision": 1,
                             "station": {"name": "a"}}}},
        {"data": {"events": {"seq": 2, "type": "station.updated", "id": "st_press", "revision": 2,
                             "station": {"name": "b"}}}}]


@pytest.mark.parametrize("query, variables, code, named", [
    ("subscription { events { nope } }", {}, "GRAPHQL_VALIDATION_FAILED", "Cannot query field 'nope'"),
    (SUBSCRIBE, {"after": "x"}, "BAD_USER_INPUT", "after: Int cannot represent"),
    ("subscription { events(after: -1, types: [\"process.moved\"]) { seq } }", {}, "BAD_USER_INPUT", "after: must"),
    ("subscription { events(after: 7) { seq } }", {}, "EVENTS_EXPIRED", "after: the events after 7"),
])
def test_a_refused_subscription_is_one_next_with_its_errors_then_complete(client, auth, query, variables, code,
                                                                          named):
    response = subscribe(client, auth, query, variables)
    body = response.get_data(as_text=True)
    assert response.status_code == 200 and response.mimetype == SSE
    next_message, complete, empty = body.split("\n\n")
    assert complete == "event: complete\ndata:" and empty == ""
    errors = json.loads(next_message.removeprefix("event: next\ndata: "))["errors"]
    assert errors[0]["extensions"]["code"] == code and errors[0]["message"].startswith(named)


def test_a_subscription_without_event_stream_in_accept_is_refused_and_queries_stay_json(client, auth):
    for accept in ("application/json", "*/*", "text/event-stream;q=0, application/json"):
        refused = client.post("/graph/v2", json={"query": SUBSCRIBE}, headers={**auth, "Accept": accept})
        assert refused.status_code == 400 and refused.mimetype == "application/json"
        [error] = refused.get_json()["errors"]
        assert error["extensions"]["code"] == "BAD_REQUEST" and "Accept: text/event-stream" in error["message"]
    query = client.post("/graph/v2", json={"query": "{ latestEventSeq }"}, headers={**auth, "Accept": SSE})
    assert query.status_code == 200 and query.get_json() == {"data": {"latestEventSeq": 0}}
    invalid = client.post("/graph/v2", json={"query": "{ nope }"}, headers={**auth, "Accept": SSE})
    assert invalid.status_code == 400 and invalid.get_json()["errors"][0]["extensions"]["code"] == (
        "GRAPHQL_VALIDATION_FAILED")
