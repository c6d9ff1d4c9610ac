"""ChangeLog: the org's change events (CONTRACT 14) read back in a test, so that it can say "my importer changed exactly
these", and say what changed instead when it did not:

    changes = ChangeLog(server.session())
    run_the_importer()
    changes.assert_changed(("station.created", "press_1"), ("process.created", "weld_1"))
"""
EVENTS_QUERY = ("query($after: Int, $first: Int) { events(after: $after, first: $first) "
                "{ seq type timestamp kind id revision change name } }")
PAGE = 1000
SHOWN_EVENTS = 50


class ChangeLog:
    """The org's events through the `events` query, oldest first. Each helper reads anew; `mark()` makes them see only
    the events committed after it."""

    def __init__(self, session, after=0):
        self._session = session
        self.after = after

    def events(self):
        """The events after the mark: dicts with seq, type, timestamp, kind, id, revision, change and name."""
        found, after = [], self.after
        while True:
            answer = self._session.post("/graph/v2", json={"query": EVENTS_QUERY,
                                                             "variables": {"after": after, "first": PAGE}}, timeout=30)
            answer.raise_for_status()
            body = answer.json()
            if body.get("errors"):
                raise AssertionError(f"the events query failed: {body['errors'][0]['message']}")
            page = body["data"]["events"]
            found += page
            if len(page) < PAGE:
                return found
            after = page[-1]["seq"]

    def changes(self):
        """[(type, id)] of the events after the mark, in commit order: [("process.created", "weld_1"), ...]."""
        return [(event["type"], event["id"]) for event in self.events()]

    def mark(self):
        """From now on, the helpers see only the events committed after this call."""
        events = self.events()
        if events:
            self.after = events[-1]["seq"]

    def assert_changed(self, *expected):
        """Fail unless the events after the mark are exactly these (type, id) pairs, in this order."""
        __tracebackhide__ = True  # pytest shows the failing line of the test, not this helper's
        events = self.events()
        seen = [(event["type"], event["id"]) for event in events]
        if seen != list(expected):
            wanted = "".join(f"\n  {kind} {identifier}" for kind, identifier in expected) or " nothing"
            raise AssertionError(f"expected these changes:{wanted}\nsaw{_listing(events) or ' none'}")

    def assert_unchanged(self):
        """Fail if anything changed after the mark."""
        __tracebackhide__ = True
        self.assert_changed()


def _listing(events):
    lines = [f"#{event['seq']} {event['type']} {event['id']} (revision {event['revision']})"
             for event in events[-SHOWN_EVENTS:]]
    if len(events) > SHOWN_EVENTS:
        lines.insert(0, f"... {len(events) - SHOWN_EVENTS} earlier events not shown")
    return "".join(f"\n  {line}" for line in lines)
