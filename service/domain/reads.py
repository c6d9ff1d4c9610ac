"""Reading stored processes, products and stations back, one org at a time."""
from service.domain.ids import is_valid_id
from service.domain.validation import Problems

PROCESSES = "processes"
PRODUCTS = "products"
STATIONS = "stations"
MAX_PAGE_SIZE = 1000


def get_object(repo, org, kind, identifier):
    """The stored object of `kind` with this id in the org, or None (also for ids that cannot exist)."""
    if not is_valid_id(identifier):
        return None
    return repo.documents.get(org, kind, identifier)


def list_objects(repo, org, kind, first, after=None):
    """Up to `first` (0..1000) objects ordered by id, starting after the id `after`."""
    problems = Problems()
    if isinstance(first, bool) or not isinstance(first, int) or not 0 <= first <= MAX_PAGE_SIZE:
        problems.add("first", f"must be an integer from 0 to {MAX_PAGE_SIZE}; got {first!r}")
    if after is not None and not isinstance(after, str):
        problems.add("after", f"must be the id of the last object of the previous page; got {after!r}")
    problems.raise_if_any()
    return repo.documents.page(org, kind, first, after)
