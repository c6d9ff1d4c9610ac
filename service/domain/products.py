"""Products: a workflow graph of processes of the same org, ending in one final process."""
from service.interface.ids import is_valid_id
from service.interface.kinds import PROCESSES, PRODUCTS
from service.domain.validation import Problems
from service.errors import ProcessInUse
from service.storage.contract import NOBODY

DEFAULT_DEPENDENCY_QUANTITY = 1
# How many of the products naming a process a message lists (extensions.products lists them all).
NAMED_IN_MESSAGE = 20


def upsert_product(repo, org, data, *, if_revision=None, dry_run=False, restored=False, by=NOBODY):
    """Check a ProductInput dict against the org's processes and store it whole, as a change `by` made (an
    Attribution); return what the store did (service.storage.contract.Saved). The check runs first to report every
    problem without holding a lock, then again as the write's guard, under the org's references lock: a process
    deleted in between is noticed."""
    stored = check_product(repo.documents, org, data)
    dependencies = [{**edge, "quantity": _quantity(edge)} for edge in stored.get("dependencies") or []]
    return repo.documents.save(org, PRODUCTS, data["id"], {**stored, "dependencies": dependencies},
                               restored=restored, if_revision=if_revision, dry_run=dry_run,
                               guard=lambda view: check_product(view, org, data), by=by)


def processes_of(product):
    """The ids of the processes a product names: its final process and both ends of each dependency."""
    named = {product.get("finalProcessId")}
    for edge in product.get("dependencies") or []:
        named.update((edge.get("processId"), edge.get("upstreamProcessId")))
    return named


def refuse_while_named(org, process_id):
    """The guard of a process's deletion: ProcessInUse naming the products of the org that name the process."""
    def guard(view):
        naming = [product["id"] for product in view.each(org, PRODUCTS) if process_id in processes_of(product)]
        if naming:
            raise ProcessInUse(process_id, naming, NAMED_IN_MESSAGE)
    return guard


def _quantity(edge):
    quantity = edge.get("quantity")
    return DEFAULT_DEPENDENCY_QUANTITY if quantity is None else quantity


def check_product(documents, org, product):
    """Raise InvalidInput listing every rule the product breaks; `documents` (a DocumentView) says which processes
    exist. Return its stored form (Problems.check_values)."""
    problems = Problems()
    stored = problems.check_values("product", product)
    problems.check_id("product.id", product.get("id"))
    problems.check_name("product.name", product.get("name"))
    # Every process the product names, looked up at once: one query on the shared backend, not one per edge.
    named = processes_of(product)
    existing = documents.existing(org, PROCESSES, [process_id for process_id in named if is_valid_id(process_id)])

    def check_reference(field, process_id):
        if not problems.check_id(field, process_id):
            return False
        if process_id not in existing:
            problems.add(field, f"no process {process_id!r} exists in your org; create it first")
        return True

    final = product.get("finalProcessId")
    final_valid = check_reference("product.finalProcessId", final)
    edges, first_seen, pairs = [], {}, {}
    for i, edge in enumerate(product.get("dependencies") or []):
        field = f"product.dependencies[{i}]"
        down, up = edge.get("processId"), edge.get("upstreamProcessId")
        down_valid = check_reference(f"{field}.processId", down)
        up_valid = check_reference(f"{field}.upstreamProcessId", up)
        if _quantity(edge) < 1:
            problems.add(f"{field}.quantity", f"must be 1 or more; got {edge.get('quantity')}")
        if not (down_valid and up_valid):
            continue
        if down == up:
            problems.add(field, f"process {down!r} cannot depend on itself")
        elif (up, down) in pairs:
            problems.add(field, f"repeats the dependency of {down!r} on {up!r} (product.dependencies[{pairs[up, down]}])")
        else:
            pairs[up, down] = i
            edges.append((i, up, down))
            first_seen.setdefault(down, f"{field}.processId")
            first_seen.setdefault(up, f"{field}.upstreamProcessId")
    cycle = find_cycle([(up, down) for _, up, down in edges])
    if cycle:
        problems.add("product.dependencies", "must not contain a cycle; found " + " -> ".join(cycle))
    if final_valid:
        for i, up, down in edges:
            if up == final:
                problems.add(f"product.dependencies[{i}].upstreamProcessId",
                             f"the final process {final!r} must be upstream of nothing, but {down!r} depends on it")
        leading = upstream_closure(final, [(up, down) for _, up, down in edges])
        for process_id, field in first_seen.items():
            if process_id not in leading:
                problems.add(field, f"process {process_id!r} does not lead to the final process {final!r}")
    problems.raise_if_any()
    return stored


def find_cycle(edges):
    """One cycle of the directed graph `edges` [(from, to)] as [a, b, ..., a], or None; deterministic."""
    successors = {}
    for start, end in edges:
        successors.setdefault(start, []).append(end)
        successors.setdefault(end, [])
    state = {}  # node -> "open" while on the current path, "done" once fully explored
    for root in successors:
        if root in state:
            continue
        # Iterative depth-first search: a 1000-process chain must not hit the recursion limit.
        path, iterators = [root], [iter(successors[root])]
        state[root] = "open"
        while path:
            following = next(iterators[-1], None)
            if following is None:
                state[path.pop()] = "done"
                iterators.pop()
            elif state.get(following) == "open":
                return path[path.index(following):] + [following]
            elif following not in state:
                state[following] = "open"
                path.append(following)
                iterators.append(iter(successors[following]))
    return None


def upstream_closure(final, edges):
    """The set of processes from which the final process can be reached along `edges` [(upstream, downstream)], final included."""
    upstreams = {}
    for up, down in edges:
        upstreams.setdefault(down, []).append(up)
    reached, pending = {final}, [final]
    while pending:
        for up in upstreams.get(pending.pop(), []):
            if up not in reached:
                reached.add(up)
                pending.append(up)
    return reached
