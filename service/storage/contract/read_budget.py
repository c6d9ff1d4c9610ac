"""A budget of the stored documents one request may read: each store charges every document it parses to it
(`spend`, with the document's stored size), and the request's budget (`read_budget`, opened around a GraphQL
operation by service.web.graphql.endpoint) stops the operation with ReadTooLarge at the document that goes over it,
before it is parsed.

The query limits count the objects an operation may read (service.web.graphql.limits: 1,000), not their size, and the
answer's budget counts what is answered, not what is read: `process(id: "big") { id }` under 500 aliases parsed a
9 MB document 500 times (3.5 s of a worker) for a 2 KB answer. Parsing runs at about 1.3 GB a second here, so this
budget holds one request's reading to about a second, whatever its aliases, pages and events ask for.
"""
import contextlib
import contextvars

from service.errors import ReadTooLarge

# 1 GiB: a page of 1,000 documents of 1 MB, or 100 of the largest the input limits allow, read in one request.
READ_BUDGET = 1 << 30
_left = contextvars.ContextVar("document_read_budget", default=None)


@contextlib.contextmanager
def read_budget():
    """Within this block, the documents the stores read share READ_BUDGET bytes (outside one, reading is not counted;
    a block within another shares the outer one's)."""
    if _left.get() is not None:
        yield
        return
    token = _left.set([READ_BUDGET, READ_BUDGET])  # what is left, and the whole
    try:
        yield
    finally:
        _left.reset(token)


def spend(size):
    """Charge a document of `size` stored bytes, about to be parsed, to the request's budget; ReadTooLarge once it is
    spent."""
    budget = _left.get()
    if budget is None:
        return
    budget[0] -= size
    if budget[0] < 0:
        raise ReadTooLarge(f"the request would read more than {budget[1]:,} bytes of stored documents, the most one "
                           "request may read: ask for fewer objects with `first` (and page on with `after`), and do "
                           "not select an object under several aliases")
