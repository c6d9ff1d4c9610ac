"""The drawing of a product (service.web.pages.graph): where processes and dependencies go, tested directly, and the
product page's size over HTTP (both backends). A dependency that spans several columns is one path whatever it spans,
so the drawing and the page grow linearly with the product; the browser tests (test_pages_browser.py) look at it."""
import random
import re
import tracemalloc

import pytest

from service.web.pages import graph
from support.products import PROCESS_MUTATION, PRODUCT_MUTATION, SHAPES, process_ids, process_input, product_input
from support.tokens import TOKEN

# A product of 100 processes and one 8 times larger: the work per process must not grow between them.
SIZES = (100, 800)
PATH_COMMAND = re.compile(r"[MLHVCQ]")
POINT = re.compile(r"([MLHVCQ])([^MLHVCQ]*)")


def edge(down, up, quantity=1):
    return {"processId": down, "upstreamProcessId": up, "quantity": quantity}


def test_a_product_is_drawn_in_columns_ending_with_its_final_process():
    # frame and motor feed the assembly (motor twice), wheels feed the final test directly, the assembly feeds it too.
    product = {"finalProcessId": "test", "dependencies": [
        edge("assembly", "frame"), edge("assembly", "motor", 2), edge("test", "assembly"), edge("test", "wheels"),
        edge("motor", "winding")]}
    names = {pid: pid.title() for pid in ("frame", "motor", "assembly", "test", "wheels", "winding")}
    drawing = graph.layout(product, names)
    column = {node.id: node.x for node in drawing.nodes}
    assert len(drawing.nodes) == 6 and len(drawing.edges) == 5
    # Every edge goes to the right; the final process stands alone in the last column.
    assert all(column[e.upstream] < column[e.downstream] for e in drawing.edges)
    assert [node.id for node in drawing.nodes if node.x == max(column.values())] == ["test"]
    assert [node.id for node in drawing.nodes if node.final] == ["test"]
    # A process stands next to the first process that needs it: wheels beside the test, not at the far left.
    assert column["wheels"] == column["assembly"] and column["winding"] < column["motor"] < column["assembly"]
    # Nothing overlaps, and everything is inside the drawing.
    boxes = {(node.x, node.y) for node in drawing.nodes}
    assert len(boxes) == 6
    assert all(0 < node.x and node.x + drawing.node_width < drawing.width and
               0 < node.y and node.y + drawing.node_height < drawing.height for node in drawing.nodes)
    assert {(e.upstream, e.downstream, e.quantity) for e in drawing.edges} == {
        ("frame", "assembly", 1), ("motor", "assembly", 2), ("assembly", "test", 1), ("wheels", "test", 1),
        ("winding", "motor", 1)}


def test_a_product_of_one_process_is_one_node():
    drawing = graph.layout({"finalProcessId": "only", "dependencies": []}, {"only": "Only"})
    assert [(node.id, node.final) for node in drawing.nodes] == [("only", True)] and drawing.edges == []


def test_a_long_name_is_kept_whole_and_a_missing_process_is_marked():
    # The page wraps the name on two lines (then an ellipsis); the whole name is the node's tooltip.
    drawing = graph.layout({"finalProcessId": "b", "dependencies": [edge("b", "a")]}, {"b": "B" * 60})
    by_id = {node.id: node for node in drawing.nodes}
    assert by_id["b"].name == "B" * 60
    assert not by_id["a"].exists and by_id["a"].name == "a"


def test_rows_follow_the_neighbours_so_edges_do_not_cross():
    # Two chains into one final process: a1 -> a2 -> final, b1 -> b2 -> final. Each chain keeps to its own row.
    product = {"finalProcessId": "final", "dependencies": [
        edge("final", "b2"), edge("final", "a2"), edge("a2", "a1"), edge("b2", "b1")]}
    drawing = graph.layout(product, {})
    row = {node.id: node.y for node in drawing.nodes}
    assert (row["a1"] < row["b1"]) == (row["a2"] < row["b2"])


@pytest.mark.parametrize("columns, node_width", [(1, 300), (2, 300), (4, 257), (5, 190), (12, 190)])
def test_nodes_are_as_wide_as_a_desktop_page_lets_them(columns, node_width):
    ids = [f"proc_{number}" for number in range(columns)]
    drawing = graph.layout({"finalProcessId": ids[-1], "dependencies": [edge(down, up) for up, down in
                                                                        zip(ids, ids[1:])]}, {})
    assert drawing.node_width == node_width
    # Up to four columns fill the page's 1300 px at most; more have the narrowest nodes, and shrink to fit up to twice
    # that.
    assert drawing.width <= graph.FILL_WIDTH or node_width == graph.NODE_WIDTHS[0]
    assert drawing.shrinks == (drawing.width <= 2 * graph.FILL_WIDTH)


def random_products(count, seed=7):
    """`count` acyclic products of 3 to 40 processes, each process feeding 1 to 3 processes after it."""
    rng = random.Random(seed)
    for _ in range(count):
        ids = [f"proc_{number}" for number in range(rng.randint(3, 40))]
        dependencies = {(down, up) for n, up in enumerate(ids[:-1])
                        for down in rng.sample(ids[n + 1:], min(len(ids) - n - 1, rng.randint(1, 3)))}
        yield {"finalProcessId": ids[-1], "dependencies": [edge(down, up) for down, up in sorted(dependencies)]}


def points_of(path):
    """The points a path's commands name, control points included: each curve lies inside their polygon."""
    points = []
    for command, numbers in POINT.findall(path):
        values = [float(value) for value in re.findall(r"-?[\d.]+", numbers)]
        if command == "H":
            points.append((values[0], points[-1][1]))
        elif command == "V":
            points.append((points[-1][0], values[0]))
        else:
            points += list(zip(values[::2], values[1::2]))
    return points


def enters(start, end, box):
    """True when the segment from `start` to `end` passes through the inside of `box` (left, top, right, bottom)."""
    low, high = 0.0, 1.0
    for origin, delta, near, far in ((start[0], end[0] - start[0], box[0], box[2]),
                                     (start[1], end[1] - start[1], box[1], box[3])):
        if delta == 0:
            if not near < origin < far:
                return False
            continue
        one, other = (near - origin) / delta, (far - origin) / delta
        low, high = max(low, min(one, other)), min(high, max(one, other))
    return low < high


@pytest.mark.parametrize("product", [product_input("chain", "chain", process_ids(12)), *random_products(40)])
def test_no_dependency_runs_under_a_process_it_does_not_touch(product):
    drawing = graph.layout(product, {})
    boxes = {node.id: (node.x, node.y, node.x + drawing.node_width, node.y + drawing.node_height)
             for node in drawing.nodes}
    for drawn in drawing.edges:
        points = points_of(drawn.path)
        assert all(0 <= x <= drawing.width and 0 <= y <= drawing.height for x, y in points)
        others = [box for process_id, box in boxes.items() if process_id not in (drawn.upstream, drawn.downstream)]
        assert not [(start, end) for start, end in zip(points, points[1:]) for box in others if enters(start, end, box)]
        # It leaves its upstream process on the right and ends at its downstream one's left, pointing at it.
        assert points[0] == (boxes[drawn.upstream][2], boxes[drawn.upstream][1] + drawing.node_height // 2)
        assert points[-1] == (boxes[drawn.downstream][0] - graph.ARROW,
                              boxes[drawn.downstream][1] + drawing.node_height // 2)
        assert points[-2][1] == points[-1][1] and points[-2][0] < points[-1][0]


def drawing_work(shape, count):
    """(path commands per dependency, bytes held at the peak per process) of drawing a product of `shape`."""
    product = product_input(shape, "big", process_ids(count))
    graph.layout(product, {})  # networkx imported, caches warm
    tracemalloc.start()
    try:
        drawing = graph.layout(product, {})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(drawing.nodes) == count and len(drawing.edges) == len(product["dependencies"])
    commands = [len(PATH_COMMAND.findall(drawn.path)) for drawn in drawing.edges]
    # However many columns it spans, a dependency is one path of a few commands.
    assert max(commands) <= 12
    return sum(commands) / len(commands), peak / count


@pytest.mark.parametrize("shape", SHAPES)
def test_drawing_a_product_takes_work_and_memory_linear_in_its_size(shape):
    (commands_small, held_small), (commands_large, held_large) = (drawing_work(shape, count) for count in SIZES)
    assert commands_large <= commands_small * 1.05
    # Dicts and lists grow by doubling, so the bytes a process holds vary up to 2 x between sizes; n^2 would be 8 x.
    assert held_large <= held_small * 2, (held_small, held_large)


# -- the page over HTTP ------------------------------------------------------------------------------------------------

def graphql(client, auth, query, value):
    response = client.post("/graph/v2", headers=auth, json={"query": query, "variables": {"input": value}})
    assert "errors" not in response.get_json(), response.get_json()


@pytest.mark.exhaustive  # a product of 1,000 processes, rendered twice
def test_the_product_page_grows_linearly_with_the_product(client, auth):
    ids = process_ids(SIZES[-1])
    for identifier in ids:
        graphql(client, auth, PROCESS_MUTATION, {"process": process_input(identifier)})
    client.post("/view/login", data={"token": TOKEN})
    for shape in SHAPES:
        per_process = []
        for count in SIZES:
            product = product_input(shape, f"{shape}_{count}", ids[:count])
            graphql(client, auth, PRODUCT_MUTATION, {"product": product})
            page = client.get(f"/view/products/{product['id']}")
            body = page.get_data(as_text=True)
            assert page.status_code == 200
            # One node a process, one path a dependency (and the arrow head's), one row of the table each.
            assert len(re.findall(r'<a href="[^"]+" class="node[ "]', body)) == count
            assert body.count("<path d=") == len(product["dependencies"]) + 1
            assert body.count("<tr>") == len(product["dependencies"]) + 1
            per_process.append(len(page.data) / count)
        assert per_process[1] <= per_process[0] * 1.1, (shape, per_process)
