"""The drawing of a product's workflow: where each process and each dependency goes in the page's SVG, in time and
size linear in the product (plus the sorts).

Columns are networkx's topological generations of the graph read backwards from the final process, so the final
process stands alone in the last column and every other process stands as far right as its downstream processes let
it, next to the first process that needs it. Within a column, processes are ordered by the mean height of their
neighbours (one sweep from the right over the processes they lead to, one from the left over those they need: the
barycenter heuristic), which keeps most edges from crossing in the small graphs products have.

A dependency between neighbouring columns is one S-curve across the gap between them. A dependency that spans several
columns is one path too: it rises in the gap after its upstream process to a track above every process, runs along
it and falls in the gap before its downstream process, so it never runs under a process it does not touch and costs
the same whatever its length. (A slot of its own in every column it crosses, as Sugiyama's method gives it, made n
long dependencies n^2 slots: 28 MB of page for a chain of 1,000 processes that all also feed the final one.) The
dependencies into one process share a track, since they end at the same place; groups whose spans do not overlap share
one too (interval partitioning), so there are as many tracks as the most groups over one gap. Pure Python (networkx is
pure Python), no Flask: the template draws what this computes.

networkx rather than Graphviz's `dot`: it installs from PyPI with the service on any machine, where `dot` would be a
system package every host needs; `dot`'s drawings are better for large tangled graphs, which products are not.
"""
import heapq
from typing import NamedTuple

NODE_HEIGHT = 68
# A node is as wide as lets a drawing of few columns fill the page of a desktop (1440 px), within these bounds: its
# name gets two lines of 22 to 36 characters.
NODE_WIDTHS = (190, 300)
FILL_WIDTH = 1300
# A drawing up to this wide shrinks to fit a desktop's page; a wider one would be illegible shrunk, and scrolls.
SHRINK_UP_TO = 2 * FILL_WIDTH
COLUMN_GAP, ROW_GAP, MARGIN = 80, 24, 16
# The tracks of the dependencies that span columns, above the processes: this far apart, corners this round.
TRACK_GAP, CORNER = 18, 8
# Where in a gap a dependency rises to its track (from the gap's left) and falls from it (from the gap's right), moved
# a little by the row of the process it leaves or reaches: the dependencies of one process rise together and branch
# off at their tracks, those of its neighbour in the column rise beside them.
RISE, FALL, STAGGER, STAGGERS = 14, 22, 6, 3
# The arrow head ends this far before the process it points at.
ARROW = 6
# Where a curve is at a quarter of its way (t = 0.25), as fractions of its width and height.
LABEL_AT = (0.297, 0.156)


class Node(NamedTuple):
    id: str
    name: str
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
    node_width: int
    node_height: int = NODE_HEIGHT

    @property
    def shrinks(self):
        """True when the drawing may be shrunk to fit the page and stay legible."""
        return self.width <= SHRINK_UP_TO


class Frame(NamedTuple):
    """Where things are: each process's top left corner and row, the nodes' width, each track's height."""
    places: dict
    rows: dict
    node_width: int
    track_y: list


def layout(product, names):
    """The drawing of `product` (a stored product); `names` maps the ids of its processes that exist to their names."""
    final = product["finalProcessId"]
    dependencies = product.get("dependencies") or []
    columns, column_of = _columns(final, dependencies)
    track_of, tracks = _tracks(dependencies, column_of)
    frame, width, height = _frame(columns, tracks)
    nodes = [Node(process_id, names.get(process_id, process_id), x, y, process_id == final, process_id in names)
             for process_id, (x, y) in frame.places.items()]
    edges = [_edge(edge, frame, track_of[edge["processId"]] if _is_long(edge, column_of) else None)
             for edge in dependencies]
    return Layout(nodes, edges, width, height, frame.node_width)


def _frame(columns, tracks):
    """Where each process goes by its column and row, below `tracks` tracks; and the drawing's width and height."""
    node_width = min(max((FILL_WIDTH - 2 * MARGIN - (len(columns) - 1) * COLUMN_GAP) // len(columns),
                         NODE_WIDTHS[0]), NODE_WIDTHS[1])
    band = tracks * TRACK_GAP
    tallest = max(len(column) for column in columns)
    nodes_height = tallest * NODE_HEIGHT + (tallest - 1) * ROW_GAP
    places, rows = {}, {}
    for c, column in enumerate(columns):
        # A column of fewer rows is centred in the height of the tallest, below the tracks.
        top = MARGIN + band + (nodes_height - (len(column) * NODE_HEIGHT + (len(column) - 1) * ROW_GAP)) // 2
        for r, process_id in enumerate(column):
            places[process_id] = (MARGIN + c * (node_width + COLUMN_GAP), top + r * (NODE_HEIGHT + ROW_GAP))
            rows[process_id] = r
    # Track 0 is the lowest, nearest the processes.
    track_y = [MARGIN + band - TRACK_GAP // 2 - t * TRACK_GAP for t in range(tracks)]
    width = 2 * MARGIN + len(columns) * node_width + (len(columns) - 1) * COLUMN_GAP
    return Frame(places, rows, node_width, track_y), width, 2 * MARGIN + band + nodes_height


def _columns(final, dependencies):
    """The processes in columns (lists of ids, in drawing order), and {id: its column}."""
    import networkx  # a quarter of a second to import: paid by the first product page, not by every app started

    graph = networkx.DiGraph()
    graph.add_node(final)
    graph.add_edges_from((edge["upstreamProcessId"], edge["processId"]) for edge in dependencies)
    generations = list(networkx.topological_generations(graph.reverse(copy=False)))
    columns = [sorted(generation) for generation in reversed(generations)]
    _order_rows(columns, graph.successors, graph.predecessors)
    return columns, {process_id: c for c, column in enumerate(columns) for process_id in column}


def _order_rows(columns, successors, predecessors):
    """Reorder each column by the mean height of its processes' neighbours, wherever they stand: right to left over
    the processes they lead to, then left to right over those they need. Each sweep reads every dependency twice."""
    # A process's row as its distance from the middle of its column (columns are centred on one another).
    height = {}

    def place(column):
        middle = (len(column) - 1) / 2
        height.update((process_id, row - middle) for row, process_id in enumerate(column))

    def sweep(order, neighbours):
        place(order[0])
        for column in order[1:]:
            def mean_height(process_id):
                near = [height[other] for other in neighbours(process_id)]
                return sum(near) / len(near) if near else height.get(process_id, 0)

            column.sort(key=mean_height)  # stable: ties keep the order so far
            place(column)

    sweep(columns[::-1], successors)
    sweep(columns, predecessors)


def _is_long(edge, column_of):
    return column_of[edge["processId"]] - column_of[edge["upstreamProcessId"]] > 1


def _tracks(dependencies, column_of):
    """{downstream process: its track} for the processes a dependency spanning several columns leads to, and the
    number of tracks. Each such process's group spans from its leftmost upstream column to its own; a track is free
    again for a group that starts where the last group on it ended (one falls in the gap before that column, the
    other rises in the gap after it)."""
    spans = {}
    for edge in dependencies:
        if _is_long(edge, column_of):
            down = edge["processId"]
            start = min(column_of[edge["upstreamProcessId"]], spans.get(down, (len(column_of), 0))[0])
            spans[down] = (start, column_of[down])
    track_of, busy, free = {}, [], []  # busy: heap of (end column, track); free: heap of tracks
    for down, (start, end) in sorted(spans.items(), key=lambda item: (item[1], item[0])):
        while busy and busy[0][0] <= start:
            heapq.heappush(free, heapq.heappop(busy)[1])
        track_of[down] = heapq.heappop(free) if free else len(busy)  # every track is busy or free
        heapq.heappush(busy, (end, track_of[down]))
    return track_of, len(busy) + len(free)


def _edge(dependency, frame, track):
    """The path of one dependency (`track`: its track when it spans several columns, else None) and where its
    quantity's label goes: a quarter of the way along its first curve, or on its track just after it rises, near its
    upstream process either way, so that the labels of the dependencies meeting at one process do not pile up at its
    arrow heads."""
    (ux, uy), (dx, dy) = frame.places[dependency["upstreamProcessId"]], frame.places[dependency["processId"]]
    middle = NODE_HEIGHT // 2
    start_x, start_y, end_x, end_y = ux + frame.node_width, uy + middle, dx - ARROW, dy + middle
    if track is None:
        path = f"M{start_x},{start_y} {_curve(start_x, start_y, end_x, end_y)}"
        label_x = start_x + round(LABEL_AT[0] * (end_x - start_x))
        label_y = start_y + round(LABEL_AT[1] * (end_y - start_y)) - 6
    else:
        rise = start_x + RISE + STAGGER * (frame.rows[dependency["upstreamProcessId"]] % STAGGERS)
        fall = dx - FALL - STAGGER * (frame.rows[dependency["processId"]] % STAGGERS)
        track_y = frame.track_y[track]
        # Level out of the upstream process, a round corner up, along the track, a round corner down, level into it.
        path = (f"M{start_x},{start_y} H{rise - CORNER} Q{rise},{start_y} {rise},{start_y - CORNER} "
                f"V{track_y + CORNER} Q{rise},{track_y} {rise + CORNER},{track_y} "
                f"H{fall - CORNER} Q{fall},{track_y} {fall},{track_y + CORNER} "
                f"V{end_y - CORNER} Q{fall},{end_y} {fall + CORNER},{end_y} H{end_x}")
        label_x, label_y = rise + CORNER + 12, track_y - 5
    return Edge(dependency["upstreamProcessId"], dependency["processId"], dependency.get("quantity", 1), path,
                label_x, label_y)


def _curve(x1, y1, x2, y2):
    """A cubic S-curve, level where it leaves and where it arrives."""
    bend = (x2 - x1) // 2
    return f"C{x1 + bend},{y1} {x2 - bend},{y2} {x2},{y2}"
