"""Change events (CONTRACT 14): their types and the filters that name them, the envelope every reader gets, and the
pull feed. The store writes an event with each history entry (service.storage.contract.events); this module reads."""
import re

from service.domain.reads import MAX_PAGE_SIZE
from service.domain.validation import Problems, quoted
from service.errors import EventsExpired
from service.interface.kinds import SINGULAR

# A filter entry: a kind and a change, or every change of a kind.
TYPE_FILTER = re.compile(r"(process|product|station)\.(created|updated|deleted|restored|\*)")
TYPE_RULE = ("must be <kind>.<change>: process, product or station, then created, updated, deleted, restored or * "
             "(every change)")
PLURAL = {singular: plural for plural, singular in SINGULAR.items()}
CHANGES = ("CREATED", "UPDATED", "DELETED", "RESTORED")
DEFAULT_FIRST = 100
# The most entries a reader's `types` may hold (the feed, GET /events, a subscription). There are 15 different ones, so
# a longer list repeats some: 780,000 copies of one pattern were checked one by one, and a subscription held them all.
MAX_TYPES = 100


def event_type(event):
    """`process.updated`: the event's kind and change, as every reader names it."""
    return f"{SINGULAR[event.kind]}.{event.change.lower()}"


def envelope(event):
    """The event as streams and webhooks send it (Standard Webhooks' shape): its type, the commit time, and data."""
    return {"type": event_type(event), "timestamp": event.timestamp,
            "data": {"seq": event.seq, "kind": SINGULAR[event.kind], "id": event.id, "revision": event.revision,
                     "change": event.change, "name": event.name, "author": event.author, "comment": event.comment}}


def wanted_of(types, problems, field="types"):
    """The (kind, change) pairs the filter `types` names (None: every event); each bad entry is a problem naming it
    (`types[1]`), and so is an empty list."""
    if types is None:
        return None
    if not isinstance(types, (list, tuple)) or not types:
        problems.add(field, "must name at least one type (leave it out for every type); got " + repr(types)[:60])
        return None
    wanted = set()
    for position, entry in enumerate(types):
        match = TYPE_FILTER.fullmatch(entry) if isinstance(entry, str) else None
        if match is None:
            problems.add(f"{field}[{position}]", f"{TYPE_RULE}; got {quoted(entry)}")
            continue
        kind = PLURAL[match[1]]
        changes = CHANGES if match[2] == "*" else (match[2].upper(),)
        wanted.update((kind, change) for change in changes)
    return frozenset(wanted)


def reader_wanted(types, problems, field="types"):
    """`wanted_of` for a reader of the events: a `types` of more than MAX_TYPES entries is one problem naming it,
    before any entry is looked at. (A webhook subscription's `types` has rules of its own: service.domain.webhooks.)"""
    if isinstance(types, (list, tuple)) and len(types) > MAX_TYPES:
        different = len(PLURAL) * (len(CHANGES) + 1)  # each kind's changes, and `<kind>.*`
        problems.add(field, f"at most {MAX_TYPES} entries: name each type once (there are {different}, and `<kind>.*` "
                            f"stands for the changes of a kind); got {len(types):,}")
        return None
    return wanted_of(types, problems, field)


def check_after(after, problems, field="after"):
    if after is not None and (isinstance(after, bool) or not isinstance(after, int) or after < 0):
        problems.add(field, f"must be a seq, 0 or more (0: from the oldest kept); got {after!r}")


def list_events(repo, org, after=None, first=DEFAULT_FIRST, types=None):
    """The org's events with seq > `after` (0 or None: from the oldest kept), oldest first, at most `first` (1 to
    1000), those `types` names. EventsExpired when events after `after` were pruned."""
    problems = Problems()
    if isinstance(first, bool) or not isinstance(first, int) or not 1 <= first <= MAX_PAGE_SIZE:
        problems.add("first", f"must be an integer from 1 to {MAX_PAGE_SIZE}; got {first!r}")
    check_after(after, problems)
    wanted = reader_wanted(types, problems)
    problems.raise_if_any()
    after = after or 0
    if after:
        oldest = repo.events.bounds(org).oldest
        if after < oldest - 1:
            raise EventsExpired(after, oldest)
    return repo.events.read(org, after, first, wanted)


def stream_start(repo, org, after):
    """Where a stream of the org's events asked to start after `after` (None: from now on) starts: (the seq it starts
    after, None), or (oldest - 1, oldest) when the events after `after` are no longer kept or `after` is past the
    latest seq (a test-mode reset numbered them again): the reader is told so, re-reads the state, and goes on from
    the oldest kept."""
    bounds = repo.events.bounds(org)
    if after is None:
        return bounds.latest, None
    if after < bounds.oldest - 1 or after > bounds.latest:
        return bounds.oldest - 1, bounds.oldest
    return after, None


def subscription_start(repo, org, after=None, types=None):
    """(the seq a subscription to the org's events starts after, the (kind, change) pairs it wants or None):
    BAD_USER_INPUT naming a bad `after` or `types` entry, EventsExpired when the events after `after` are no longer
    kept or `after` is past the latest seq (as `stream_start` decides)."""
    problems = Problems()
    check_after(after, problems)
    wanted = reader_wanted(types, problems)
    problems.raise_if_any()
    position, oldest = stream_start(repo, org, after)
    if oldest is not None:
        raise EventsExpired(after, oldest)
    return position, wanted


def latest_event_seq(repo, org):
    return repo.events.bounds(org).latest
