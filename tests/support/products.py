"""Products of the shapes that cost a drawing most, as GraphQL inputs (tests/web/pages/test_pages_graph.py and
bench/product_page_bench.py):

    chain to final  p0 -> p1 -> ... -> final, and every process also straight to the final one: each of those
                    dependencies spans every column between (n long dependencies)
    wide            every process feeds the final one: one column of n processes
"""
PROCESS_MUTATION = "mutation($input: ProcessCreateInput!) { processCreate(input: $input) }"
PRODUCT_MUTATION = "mutation($input: ProductCreateInput!) { productCreate(input: $input) }"
SHAPES = ("chain", "wide")


def process_ids(count):
    return [f"proc_{number:05d}" for number in range(count)]


def process_input(identifier):
    """A process of one step, named as a real one might be (long enough to wrap on a node)."""
    return {"id": identifier, "name": f"OpenFlexure actuator assembly and calibration, {identifier}",
            "steps": [{"id": "step_1", "actions": [{"id": "act_1"}]}]}


def product_input(shape, identifier, ids):
    """The product of `shape` over the processes `ids` (the last is the final process)."""
    final = ids[-1]
    if shape == "chain":
        dependencies = [_dependency(ids[n + 1], up) for n, up in enumerate(ids[:-1])]
        dependencies += [_dependency(final, up, 2) for up in ids[:-2]]
    else:
        dependencies = [_dependency(final, up) for up in ids[:-1]]
    return {"id": identifier, "name": f"{shape.title()} of {len(ids)}", "finalProcessId": final,
            "dependencies": dependencies}


def _dependency(down, up, quantity=1):
    return {"processId": down, "upstreamProcessId": up, "quantity": quantity}
