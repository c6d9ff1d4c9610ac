"""The webhook fields of the GraphQL API (CONTRACT 15), both backends, through the app (no dispatcher runs: nothing is
sent): what a subscribe refuses, each problem naming its input field, all at once, storing nothing; what it stores
and answers; NOT_FOUND for unknown ids; every root field refused to a write token, with nothing stored (CONTRACT 16's admin
scope)."""
import base64
import threading

import pytest

from service.domain import webhooks as webhooks_domain
from service.storage.contract import SubscriptionSettings
from support.tokens import SCOPED_HEADERS

SUBSCRIBE = "mutation($input: SubscribeRequest_Input!) { webhookSubscribe(input: $input) }"
LIST = "{ webhookSubscriptions { subscriptionID webhookUrl webhookHeaders types responseFragment secret createdAt " \
       "disabledAt disabledReason } }"
SECRET = "whsec_" + base64.b64encode(b"k" * 32).decode()
RECEIVER = "https://93.184.216.34/hooks"
WEBHOOK_FIELDS = {"webhookSubscribe": (SUBSCRIBE, {"input": {"subscriptionID": "mes", "webhookUrl": RECEIVER}}),
                  "webhookUnsubscribe": ('mutation { webhookUnsubscribe(subscriptionID: "mes") }', {}),
                  "webhookRedeliver": ('mutation { webhookRedeliver(subscriptionID: "mes", seq: 1) { seq } }', {}),
                  "webhookSubscriptions": ("{ webhookSubscriptions { subscriptionID } }", {}),
                  "webhookDeliveries": ('{ webhookDeliveries(subscriptionID: "mes") { seq } }', {})}


def run(client, auth, query, variables=None):
    response = client.post("/graph/v2", json={"query": query, "variables": variables or {}}, headers=auth)
    assert response.status_code == 200, response.text
    return response.json


def subscribe(client, auth, **fields):
    return run(client, auth, SUBSCRIBE, {"input": {"subscriptionID": "mes", "webhookUrl": RECEIVER, **fields}})


def test_a_subscribe_reports_every_problem_by_its_field_and_stores_nothing(client, auth):
    answer = subscribe(client, auth, subscriptionID="not ok", webhookUrl="http://127.0.0.1/", types=["station.*", "x"],
                       webhookHeaders={"Content-Type": "text/plain", "webhook-id": "x", "X-Ok": 3},
                       secret="whsec_c2hvcnQ=", responseFragment="fragment F on Process { id }")
    assert answer["data"] == {"webhookSubscribe": None}
    fields = [error["extensions"]["field"] for error in answer["errors"]]
    assert fields == ["subscriptionID", "webhookUrl", "webhookHeaders", "webhookHeaders", "webhookHeaders",
                      "types[1]", "responseFragment", "secret"]
    assert {error["extensions"]["code"] for error in answer["errors"]} == {"BAD_USER_INPUT"}
    assert "must be one fragment on Event" in answer["errors"][6]["message"]
    assert run(client, auth, LIST)["data"] == {"webhookSubscriptions": []}


@pytest.mark.parametrize("url", ["https://[::1/", "http://[]/"])
def test_a_malformed_bracketed_host_is_one_problem_among_the_others(client, auth, url):
    answer = subscribe(client, auth, webhookUrl=url, types=["process.moved"])
    assert [(error["extensions"]["code"], error["extensions"]["field"]) for error in answer["errors"]] == [
        ("BAD_USER_INPUT", "webhookUrl"), ("BAD_USER_INPUT", "types[0]")]
    assert run(client, auth, LIST)["data"] == {"webhookSubscriptions": []}


@pytest.mark.parametrize("fields, field", [
    ({"webhookHeaders": ["a"]}, "webhookHeaders"),
    ({"webhookHeaders": {"Host": "evil.example"}}, "webhookHeaders"),
    ({"webhookHeaders": {"X-A": "line\r\nInjected: yes"}}, "webhookHeaders"),
    ({"webhookHeaders": {"X-A": "half a pair \ud800"}}, "webhookHeaders"),  # was a 500: no encoder takes it
    ({"webhookHeaders": {"X-A": "caf\u00e9"}}, "webhookHeaders"),  # HTTP has no encoding for it
    ({"types": []}, "types"),
    ({"secret": "whsec_" + base64.b64encode(b"k" * 65).decode()}, "secret"),
    ({"secret": SECRET.rstrip("=")}, "secret"),  # padding is required
    ({"secret": SECRET.replace("whsec_", "")}, "secret"),
    ({"responseFragment": "fragment F on Event { nope }"}, "responseFragment"),
    ({"responseFragment": "{ seq }"}, "responseFragment"),
    ({"subscriptionID": "x" * 65}, "subscriptionID"),
])
def test_refused(client, auth, fields, field):
    answer = subscribe(client, auth, **fields)
    assert [error["extensions"]["field"] for error in answer["errors"]] == [field]


def test_a_subscription_is_stored_and_listed_and_the_same_id_replaces_it(client, auth, other_auth):
    assert subscribe(client, auth, types=["process.*"], webhookHeaders={"Authorization": "Bearer a"},
                     responseFragment="fragment F on Event { seq }")["data"] == {"webhookSubscribe": "SUBSCRIBED"}
    [stored] = run(client, auth, LIST)["data"]["webhookSubscriptions"]
    assert stored["secret"].startswith("whsec_") and len(base64.b64decode(stored["secret"][6:])) == 32
    assert {key: stored[key] for key in ("subscriptionID", "webhookUrl", "webhookHeaders", "types",
                                         "responseFragment", "disabledAt", "disabledReason")} == {
        "subscriptionID": "mes", "webhookUrl": RECEIVER, "webhookHeaders": {"Authorization": "Bearer a"},
        "types": ["process.*"], "responseFragment": "fragment F on Event { seq }", "disabledAt": None,
        "disabledReason": None}
    assert subscribe(client, auth)["data"] == {"webhookSubscribe": "UPDATED"}
    [replaced] = run(client, auth, LIST)["data"]["webhookSubscriptions"]
    assert (replaced["secret"], replaced["createdAt"]) == (stored["secret"], stored["createdAt"])  # kept
    assert (replaced["types"], replaced["webhookHeaders"], replaced["responseFragment"]) == (None, {}, None)
    assert subscribe(client, auth, secret=SECRET)["data"] == {"webhookSubscribe": "UPDATED"}
    assert run(client, auth, LIST)["data"]["webhookSubscriptions"][0]["secret"] == SECRET
    assert run(client, other_auth, LIST)["data"] == {"webhookSubscriptions": []}


def test_unknown_ids_are_not_found(client, auth):
    for name, (query, variables) in WEBHOOK_FIELDS.items():
        if name in ("webhookSubscribe", "webhookSubscriptions"):
            continue
        [error] = run(client, auth, query, variables)["errors"]
        assert error["extensions"]["code"] == "NOT_FOUND", name
    subscribe(client, auth)
    [error] = run(client, auth, 'mutation { webhookRedeliver(subscriptionID: "mes", seq: 7) { seq } }')["errors"]
    assert error["extensions"]["code"] == "NOT_FOUND" and error["message"].startswith("seq: ")
    [error] = run(client, auth, '{ webhookDeliveries(subscriptionID: "mes", first: 0) { seq } }')["errors"]
    assert error["extensions"]["field"] == "first"


@pytest.mark.parametrize("identifier", ["", "no such", "x/y", "../x", "\u00e9", "a" * 65, "a" * 201, "a\x00b",
                                        "\ud800"])
def test_an_id_no_subscription_can_have_is_not_found_by_every_field_that_takes_one(client, auth, identifier):
    """An id outside subscriptionID's rule names no subscription: NOT_FOUND like any unknown id, never a server error
    (they were 500s: the file backend makes no file name of `x/y`, PostgreSQL takes no NUL in a text)."""
    subscribe(client, auth)
    for query in ("mutation($id: String!) { webhookUnsubscribe(subscriptionID: $id) }",
                  "mutation($id: String!) { webhookRedeliver(subscriptionID: $id, seq: 1) { seq } }",
                  "query($id: String!) { webhookDeliveries(subscriptionID: $id) { seq } }"):
        [error] = run(client, auth, query, {"id": identifier})["errors"]
        assert error["extensions"]["code"] == "NOT_FOUND" and error["message"].startswith("subscriptionID: "), query
        assert len(error["message"]) < 200, query  # a long id is quoted in part
    listed = run(client, auth, LIST)["data"]["webhookSubscriptions"]
    assert [subscription["subscriptionID"] for subscription in listed] == ["mes"]


def test_types_are_at_most_100_and_stored_once_each(client, auth):
    """800,000 entries (9.6 MB) were stored whole and read again by the dispatcher every second; as many bad entries
    would be as many errors."""
    for types in (["process.*"] * 101, ["process.moved"] * 5000):
        [error] = subscribe(client, auth, types=types)["errors"]
        assert (error["extensions"]["code"], error["extensions"]["field"]) == ("BAD_USER_INPUT", "types")
        assert "types: at most 100 entries: name each type once (there are 15" in error["message"]
        assert error["message"].endswith(f"got {len(types):,}")
    assert run(client, auth, LIST)["data"] == {"webhookSubscriptions": []}
    types = ["process.*", "station.created", "process.*"] + ["station.created"] * 97
    assert subscribe(client, auth, types=types)["data"] == {"webhookSubscribe": "SUBSCRIBED"}
    [stored] = run(client, auth, LIST)["data"]["webhookSubscriptions"]
    assert stored["types"] == ["process.*", "station.created"]


def test_an_org_has_at_most_max_subscriptions(client, auth, other_auth, monkeypatch):
    monkeypatch.setattr(webhooks_domain, "MAX_SUBSCRIPTIONS", 3)
    for number in range(3):
        assert subscribe(client, auth, subscriptionID=f"s{number}")["data"] == {"webhookSubscribe": "SUBSCRIBED"}
    [error] = subscribe(client, auth, subscriptionID="s3")["errors"]
    assert (error["extensions"]["code"], error["extensions"]["field"]) == ("BAD_USER_INPUT", "subscriptionID")
    assert "your org has 3, the most it may have: remove one it no longer needs with webhookUnsubscribe" in \
        error["message"]
    assert subscribe(client, auth, subscriptionID="s1")["data"] == {"webhookSubscribe": "UPDATED"}  # a change
    assert subscribe(client, other_auth, subscriptionID="s3")["data"] == {"webhookSubscribe": "SUBSCRIBED"}
    run(client, auth, 'mutation { webhookUnsubscribe(subscriptionID: "s0") }')
    assert subscribe(client, auth, subscriptionID="s3")["data"] == {"webhookSubscribe": "SUBSCRIBED"}
    listed = run(client, auth, LIST)["data"]["webhookSubscriptions"]
    assert [subscription["subscriptionID"] for subscription in listed] == ["s1", "s2", "s3"]


def test_two_workers_cannot_both_make_the_last_subscription(repo, other_repo):
    """The count and the creation are one step for every worker (file backend) and node (shared backend)."""
    def settings(identifier):
        return SubscriptionSettings(identifier, RECEIVER, {}, None, None, None)
    for identifier in ("a", "b"):
        assert repo.webhooks.subscribe("acme", settings(identifier), SECRET, 86400, 3) is True
    for attempt in range(5):
        start, answers = threading.Barrier(2), []

        def make(store, identifier):
            start.wait()
            answers.append(store.subscribe("acme", settings(identifier), SECRET, 86400, 3))
        threads = [threading.Thread(target=make, args=(store, f"last{attempt}{index}"))
                   for index, store in enumerate((repo.webhooks, other_repo.webhooks))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert sorted(answers, key=repr) == [None, True], attempt
        assert len(repo.webhooks.subscriptions("acme")) == 3
        made = [subscription.id for subscription in repo.webhooks.subscriptions("acme") if subscription.id > "b"]
        assert repo.webhooks.unsubscribe("acme", made[0])


def test_every_webhook_root_field_needs_an_admin_token(client, auth):
    """A write token may change every document but sees no secret and sets no webhook: FORBIDDEN, nothing stored."""
    for name, (query, variables) in WEBHOOK_FIELDS.items():
        body = client.post("/graph/v2", headers=SCOPED_HEADERS["write"],
                           json={"query": query, "variables": variables}).get_json()
        assert [error["extensions"]["code"] for error in body["errors"]] == ["FORBIDDEN"], name
        assert body["errors"][0]["extensions"]["scope"] == "admin" and body["data"] in ({name: None}, None), name
    assert run(client, auth, LIST)["data"] == {"webhookSubscriptions": []}