"""GET /events and GraphQL subscriptions through the app (Flask's test client, both backends): what is refused before
any stream starts (400 naming the argument, 401, the cap's 503 with Retry-After), the first lines of a stream, the
session cookie, and the graphql-sse answers (errors in an accepted stream, a subscription refused without
`Accept: text/event-stream`, queries still answered with JSON)."""
import gc
import json
import tracemalloc

import pytest

from service.domain import events as events_domain
from service.domain.events import MAX_TYPES
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
    ("/events?types=" + ",".join(["station.*"] * (MAX_TYPES + 1)), {}, f"types: at most {MAX_TYPES} entries"),
])
def test_a_bad_start_or_type_is_a_400_naming_it_before_any_stream(client, auth, path, headers, named):
    response = opened(client, path, **auth, **headers)  # not read to its end: a stream taken would never end
    response.close()
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


def test_types_of_more_than_the_most_entries_are_refused_naming_types_and_as_many_are_taken(client, auth, repo):
    commit(repo, "a")
    too_many, most = ["station.*"] * (MAX_TYPES + 1), ["process.*", "station.created"] * (MAX_TYPES // 2)
    message = (f"types: at most {MAX_TYPES} entries: name each type once (there are 15, and `<kind>.*` stands for the "
               f"changes of a kind); got {MAX_TYPES + 1}")
    feed = "query($t: [String!]) { events(types: $t) { seq } }"
    [error] = client.post("/graph/v2", json={"query": feed, "variables": {"t": too_many}}, headers=auth).get_json()[
        "errors"]
    assert (error["message"], error["extensions"]) == (message, {"code": "BAD_USER_INPUT", "field": "types"})
    response = subscribe(client, auth, "subscription($t: [String!]) { events(types: $t) { seq } }", {"t": too_many})
    first = messages(response, 1)[0]  # a subscription taken would send a keepalive first, and go on
    response.close()
    assert first[0] == "event: next"
    [error] = json.loads(first[1].removeprefix("data: "))["errors"]
    assert (error["message"], error["extensions"]) == (message, {"code": "BAD_USER_INPUT", "field": "types"})
    answer = client.post("/graph/v2", json={"query": feed, "variables": {"t": most}}, headers=auth).get_json()
    assert answer == {"data": {"events": [{"seq": 1}]}}


@pytest.mark.exhaustive  # a types of 200,000 entries, its memory traced
@pytest.mark.parametrize("query", [
    "subscription($t: [String!], $named: Boolean!) { events(types: $t) { seq name @include(if: $named) } }",
    "subscription($t: [String!], $named: Boolean!) { ...Root } fragment Root on Subscription { events(types: $t) { "
    "seq ...Named } } fragment Named on Event { name @include(if: $named) }",
])
def test_a_subscription_holds_none_of_the_root_field_s_arguments_while_it_lasts(client, auth, repo, monkeypatch,
                                                                                query):
    """Each event is executed with the subscription's variables, for as long as it lasts: it keeps those its selection
    uses (`$named` here), not `types`, which the start alone read (a `types` of 10 MB was 60 MB of a worker a stream).
    Measured with the cap of `types` lifted, as a larger cap would be."""
    monkeypatch.setattr(events_domain, "MAX_TYPES", 10**6)
    variables = {"t": ["station.*"] * 200_000, "named": True}
    subscribe(client, auth, query, variables).close()  # what the app builds once (the schema's parts) is built
    gc.collect()
    tracemalloc.start()
    try:
        response = subscribe(client, auth, query, variables)
        assert next(iter(response.response)) == b": keepalive\n\n"
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    commit(repo, "a")
    [found] = messages(response, 1)
    response.close()
    assert json.loads(found[1].removeprefix("data: ")) == {"data": {"events": {"seq": 1, "name": "a"}}}
    # The 200,000 entries of `types` as the request's variables and their coerced copy: 15 MB (measured: 20 KB held).
    assert held < 1_000_000, held


def test_a_subscription_keeps_the_variables_its_events_are_executed_with(client, auth, repo):
    """A variable inside a root argument's list, and one of a directive below the root field, are read by each
    event."""
    query = "subscription($one: String!, $shown: Boolean!) { events(types: [$one]) { seq name @include(if: $shown) } }"
    response = subscribe(client, auth, query, {"one": "station.*", "shown": False})
    commit(repo, "a")
    _, found = messages(response, 2)
    response.close()
    assert json.loads(found[1].removeprefix("data: ")) == {"data": {"events": {"seq": 1}}}


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
