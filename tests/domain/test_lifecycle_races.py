"""CONTRACT 10's referential rule under concurrency, on both backends: a product created while the process it names
is being deleted ends with one of them refused, in both orders, never with a product naming a deleted process.

Each order is forced: the first request's guard (the check a store runs under the org's references lock) announces
that it runs and waits a little before checking, and the second request is sent while the first is inside it. The
second must wait for the lock and then see what the first did; without the lock it would check the state before
the first write and both would be stored."""
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from service.storage import get_repository

# How long the first request stays inside its guard: time for the second to reach the lock (the outcome asserted
# does not depend on it when the lock works; it only makes the race happen rather than end before it starts).
INSIDE_GUARD_SECONDS = 0.3


def gql(client, auth, query, **variables):
    response = client.post("/graph/v2", headers=auth, json={"query": query, "variables": variables})
    assert response.status_code == 200
    return response.get_json()


def delete_process(client, auth):
    return gql(client, auth, 'mutation { processDelete(id: "raced") }')


def create_product(client, auth):
    return gql(client, auth, "mutation($p: ProductInput!) { productCreate(input: {product: $p}) }",
               p={"id": "naming", "name": "P", "finalProcessId": "raced", "dependencies": []})


@pytest.fixture
def slowed_guards(app, monkeypatch):
    """The first guarded write of the app's document store announces (the event) that its guard runs, then waits;
    later ones check at once."""
    documents = get_repository(app).documents
    inside = threading.Event()

    def slowed(write):
        def call(*args, guard=None, **kwargs):
            def slow_guard(view):
                if not inside.is_set():
                    inside.set()
                    time.sleep(INSIDE_GUARD_SECONDS)
                guard(view)
            return write(*args, guard=None if guard is None else slow_guard, **kwargs)
        return call

    monkeypatch.setattr(documents, "save", slowed(documents.save))
    monkeypatch.setattr(documents, "delete", slowed(documents.delete))
    return inside


def race(app, auth, first, second, inside):
    gql(app.test_client(), auth, 'mutation { processCreate(input: {process: {id: "raced", name: "R"}}) }')
    with ThreadPoolExecutor(2) as pool:
        first_answer = pool.submit(first, app.test_client(), auth)
        assert inside.wait(timeout=30)
        second_answer = pool.submit(second, app.test_client(), auth)
        return first_answer.result(), second_answer.result()


def test_a_delete_first_refuses_the_product(app, auth, slowed_guards):
    deleted, created = race(app, auth, delete_process, create_product, slowed_guards)
    assert deleted == {"data": {"processDelete": "DELETED"}}
    assert created["errors"][0]["extensions"] == {"code": "BAD_USER_INPUT", "field": "product.finalProcessId"}
    client = app.test_client()
    assert gql(client, auth, '{ product(id: "naming") { id } process(id: "raced") { id } }')["data"] == {
        "product": None, "process": None}


def test_a_product_first_refuses_the_delete(app, auth, slowed_guards):
    created, deleted = race(app, auth, create_product, delete_process, slowed_guards)
    assert created == {"data": {"productCreate": "CREATED"}}
    assert deleted["errors"][0]["extensions"] == {"code": "CONFLICT", "products": ["naming"]}
    client = app.test_client()
    assert gql(client, auth, '{ product(id: "naming") { id } process(id: "raced") { id } }')["data"] == {
        "product": {"id": "naming"}, "process": {"id": "raced"}}
