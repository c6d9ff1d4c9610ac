"""The drawing of a product's workflow: where each process and each dependency goes in the page's SVG.

Columns are networkx's topological generations of the graph read backwards from the final process, so the final
process stands alone in the last column and every other process stands as far right as its downstream processes let
it, next to the first process that needs it. A dependency that spans several columns passes through a slot of its
own in each column between (so it never runs under a process it does not touch). Within a column, processes and
slots are ordered by the average row of their neighbours in the column before (one sweep from the right, one from
the left: the barycenter heuristic), which keeps most edges from crossing in the small graphs products have. Pure
Python (networkx is pure Python), no Flask: the template draws what this computes.

networkx rather than Graphviz's `dot`: it installs from PyPI with the service on any machine, where `dot` would be a
system package every host needs; `dot`'s drawings are better for large tangled graphs, which products are not.
"""
from typing import NamedTuple

NODE_WIDTH, NODE_HEIGHT = 190, 58
COLUMN_GAP, ROW_GAP, MARGIN = 70, 24, 16
# The arrow head ends this far before the process it points at.
ARROW = 6
# Names longer than this are cut on the node (the whole name is its tooltip and in the table below the drawing).
NAME_ON_NODE = 22
# Where a curve is at a quarter of its way (t = 0.25), as fractions of its width and height.
LABEL_AT = (0.297, 0.156)


class Node(NamedTuple):
    id: str
    name: str
    label: str
    x: int
    y: int
    final: bool
    exists: bool


class Edge(NamedTuple):
    upstream: str
    downstream: str
    quantity: int
    path: str
    label_x: int
    label_y: int


class Layout(NamedTuple):
    nodes: list
    edges: list
    width: int
    height: int
    node_width: int = NODE_WIDTH
    node_height: int = NODE_HEIGHT


class Slot(NamedTuple):
    """Where the dependency numbered `edge` passes through a column it spans."""
    edge: int
    column: int


def layout(product, names):
    """The drawing of `product` (a stored product); `names` maps the ids of its processes that exist to their names."""
    import networkx  # a quarter of a second to import: paid by the first product page, not by every app started

    dependencies = product.get("dependencies") or []
    graph = networkx.DiGraph()
    graph.add_node(product["finalProcessId"])
    graph.add_edges_from((edge["upstreamProcessId"], edge["processId"]) for edge in dependencies)
    generations = list(networkx.topological_generations(graph.reverse(copy=False)))
    columns = [sorted(generation) for generation in reversed(generations)]
    column_of = {process_id: c for c, column in enumerate(columns) for process_id in column}

    # The graph the rows are ordered on: each long dependency is a chain through its slots.
    chained = networkx.DiGraph()
    chained.add_nodes_from(graph)
    routes = []
    for number, edge in enumerate(dependencies):
        up, down = edge["upstreamProcessId"], edge["processId"]
        slots = [Slot(number, c) for c in range(column_of[up] + 1, column_of[down])]
        for slot in slots:
            columns[slot.column].append(slot)
        networkx.add_path(chained, [up, *slots, down])
        routes.append(slots)
    _order_rows(chained, columns)

    rows = max(len(column) for column in columns)
    height = 2 * MARGIN + rows * NODE_HEIGHT + (rows - 1) * ROW_GAP
    width = 2 * MARGIN + len(columns) * NODE_WIDTH + (len(columns) - 1) * COLUMN_GAP
    places = {}
    for c, column in enumerate(columns):
        # A column of fewer rows is centred in the height of the tallest.
        top = MARGIN + (height - 2 * MARGIN - (len(column) * NODE_HEIGHT + (len(column) - 1) * ROW_GAP)) // 2
        for r, item in enumerate(column):
            places[item] = (MARGIN + c * (NODE_WIDTH + COLUMN_GAP), top + r * (NODE_HEIGHT + ROW_GAP))
    nodes = [Node(item, names.get(item, item), _cut(names.get(item, item)), x, y, item == product["finalProcessId"],
                  item in names)
             for item, (x, y) in places.items() if not isinstance(item, Slot)]
    edges = [_edge(edge, slots, places) for edge, slots in zip(dependencies, routes)]
    return Layout(nodes, edges, width, height)


def _order_rows(graph, columns):
    """Reorder each column by the mean row of its neighbours in the column before: right to left, then left to
    right."""
    def sweep(order, neighbours):
        for before, column in zip(order, order[1:]):
            row = {item: i for i, item in enumerate(before)}

            def mean_row(item):
                near = [row[other] for other in neighbours(item) if other in row]
                return sum(near) / len(near) if near else len(before)

            column.sort(key=mean_row)  # stable: ties keep the order so far

    sweep(columns[::-1], graph.successors)
    sweep(columns, graph.predecessors)


def _edge(dependency, slots, places):
    """From the right side of the upstream process, through the slots of the columns between (straight across each),
    to the left side of the downstream one, in S-curves; the quantity's label on the first curve."""
    (ux, uy), (dx, dy) = places[dependency["upstreamProcessId"]], places[dependency["processId"]]
    middle = NODE_HEIGHT // 2
    x, y = ux + NODE_WIDTH, uy + middle
    path = [f"M{x},{y}"]
    points = [(sx, sy + middle) for sx, sy in (places[slot] for slot in slots)]
    for sx, sy in points:
        path.append(_curve(x, y, sx, sy))
        x = sx + NODE_WIDTH
        path.append(f"L{x},{sy}")
        y = sy
    path.append(_curve(x, y, dx - ARROW, dy + middle))
    # The label sits a quarter of the way along the first curve, near its upstream process: the labels of the
    # dependencies that meet at one process do not pile up at its arrow heads.
    first_x, first_y = points[0] if points else (dx - ARROW, dy + middle)
    start_x, start_y = ux + NODE_WIDTH, uy + middle
    label_x = start_x + round(LABEL_AT[0] * (first_x - start_x))
    label_y = start_y + round(LABEL_AT[1] * (first_y - start_y)) - 6
    return Edge(dependency["upstreamProcessId"], dependency["processId"], dependency.get("quantity", 1),
                " ".join(path), label_x, label_y)


def _curve(x1, y1, x2, y2):
    """A cubic S-curve, level where it leaves and where it arrives."""
    bend = (x2 - x1) // 2
    return f"C{x1 + bend},{y1} {x2 - bend},{y2} {x2},{y2}"


def _cut(name):
    return name if len(name) <= NAME_ON_NODE else name[:NAME_ON_NODE - 1] + "\u2026"
