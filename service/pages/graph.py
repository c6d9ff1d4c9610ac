"""The drawing of a product's workflow: where each process and each dependency goes in the page's SVG.

Columns are networkx's topological generations of the graph read backwards from the final process, so the final
process stands alone in the last column and every other process stands as far right as its downstream processes let
it, next to the first process that needs it. Within a column, processes are ordered by the average row of their
neighbours in the column before (one sweep from the right, one from the left: the barycenter heuristic), which keeps
most edges from crossing in the small graphs products have. Pure Python (networkx is pure Python), no Flask: the
template draws what this computes.

networkx rather than Graphviz's `dot`: it installs from PyPI with the service on any machine, where `dot` would be a
system package every host needs; `dot`'s drawings are better for large tangled graphs, which products are not.
"""
from typing import NamedTuple

NODE_WIDTH, NODE_HEIGHT = 210, 58
COLUMN_GAP, ROW_GAP, MARGIN = 90, 28, 16
# Names longer than this are cut on the node (the whole name is its tooltip and in the table below the drawing).
NAME_ON_NODE = 26


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


def layout(product, names):
    """The drawing of `product` (a stored product); `names` maps the ids of its processes that exist to their names."""
    import networkx  # a quarter of a second to import: paid by the first product page, not by every app started

    graph = networkx.DiGraph()
    graph.add_node(product["finalProcessId"])
    for edge in product.get("dependencies") or []:
        graph.add_edge(edge["upstreamProcessId"], edge["processId"])
    columns = [sorted(generation) for generation in networkx.topological_generations(graph.reverse(copy=False))]
    columns.reverse()
    _order_rows(graph, columns)
    rows = max(len(column) for column in columns)
    height = 2 * MARGIN + rows * NODE_HEIGHT + (rows - 1) * ROW_GAP
    width = 2 * MARGIN + len(columns) * NODE_WIDTH + (len(columns) - 1) * COLUMN_GAP
    places = {}
    for c, column in enumerate(columns):
        # A column of fewer processes is centred in the height of the tallest.
        top = MARGIN + (height - 2 * MARGIN - (len(column) * NODE_HEIGHT + (len(column) - 1) * ROW_GAP)) // 2
        for r, process_id in enumerate(column):
            places[process_id] = (MARGIN + c * (NODE_WIDTH + COLUMN_GAP), top + r * (NODE_HEIGHT + ROW_GAP))
    nodes = [Node(process_id, names.get(process_id, process_id), _cut(names.get(process_id, process_id)), x, y,
                  process_id == product["finalProcessId"], process_id in names)
             for process_id, (x, y) in places.items()]
    edges = [_edge(edge, places) for edge in product.get("dependencies") or []]
    return Layout(nodes, edges, width, height)


def _order_rows(graph, columns):
    """Reorder each column by the mean row of its neighbours in the column before: right to left, then left to
    right."""
    def sweep(order, neighbours):
        for before, column in zip(order, order[1:]):
            row = {process_id: i for i, process_id in enumerate(before)}

            def mean_row(process_id):
                near = [row[other] for other in neighbours(process_id) if other in row]
                return sum(near) / len(near) if near else len(before)

            column.sort(key=mean_row)  # stable: ties keep the order of ids

    sweep(columns[::-1], graph.successors)
    sweep(columns, graph.predecessors)


def _edge(dependency, places):
    """An S-curve from the right side of the upstream process to the left side of the downstream one."""
    (ux, uy), (dx, dy) = places[dependency["upstreamProcessId"]], places[dependency["processId"]]
    x1, y1 = ux + NODE_WIDTH, uy + NODE_HEIGHT // 2
    x2, y2 = dx - 6, dy + NODE_HEIGHT // 2  # the arrow head ends at the node
    bend = (x2 - x1) // 2
    path = f"M{x1},{y1} C{x1 + bend},{y1} {x2 - bend},{y2} {x2},{y2}"
    return Edge(dependency["upstreamProcessId"], dependency["processId"], dependency.get("quantity", 1), path,
                (x1 + x2) // 2, (y1 + y2) // 2 - 6)


def _cut(name):
    return name if len(name) <= NAME_ON_NODE else name[:NAME_ON_NODE - 1] + "\u2026"
