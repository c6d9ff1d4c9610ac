"""A request's input is freed with the request, by reference counting: none of it waits in a reference cycle for the
cycle collector, which would walk thousands of objects of each large processCreate (0.5 ms a request in a worker)."""
import gc

import orjson

from support.documents import BENCH_MUTATION, bench_process
from support.tokens import HEADERS


def unreachable_after(action):
    """The objects that `action()` leaves in reference cycles (found by the cycle collector, which frees them after)."""
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        action()
        gc.collect()
        return list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.collect()


def create(client, revision):
    process = bench_process("cycles_p1")
    process["name"] += f" {revision}"
    response = client.post("/graph/v2", data=orjson.dumps({"query": BENCH_MUTATION, "variables": {
        "input": {"process": process}}}), content_type="application/json", headers=HEADERS)
    assert response.status_code == 200 and "errors" not in response.get_json(), response.data[:300]


def test_a_large_process_create_leaves_none_of_its_input_to_the_cycle_collector(client):
    create(client, 0)  # the query is parsed and validated once (those are cycles too), then cached
    garbage = unreachable_after(lambda: [create(client, revision) for revision in range(1, 4)])
    inputs = [item for item in garbage if isinstance(item, dict) and ("actions" in item or "steps" in item)]
    assert inputs == []
    assert len(garbage) < 3 * 100  # the input alone is about 900 objects a request
