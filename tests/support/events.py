"""Following GET /events over real HTTP with `requests` (the end-to-end, browser and benchmark tests): a stream's
lines or messages as they arrive, each with the time it arrived, and committing changes that make events."""
import time

import requests

from service.client.events import messages
from support.tokens import HEADERS

STATION_CREATE = "mutation($input: StationCreateInput!) { stationCreate(input: $input) }"


def commit(url, identifier, name, headers=HEADERS):
    """Create or change a station (one event); the seq is not known to the caller."""
    response = requests.post(f"{url}/graph/v2", headers=headers, timeout=30, json={
        "query": STATION_CREATE, "variables": {"input": {"station": {"id": identifier, "name": name}}}})
    assert response.status_code == 200 and "errors" not in response.json(), response.text
    return time.monotonic()


def latest_seq(url, headers=HEADERS):
    response = requests.post(f"{url}/graph/v2", headers=headers, timeout=30, json={"query": "{ latestEventSeq }"})
    return response.json()["data"]["latestEventSeq"]


class Follower:
    """One stream: GET /events with `headers` (the token by default) and `params`, read as it comes."""

    def __init__(self, url, headers=HEADERS, params=None, read_timeout=30):
        self.response = requests.get(f"{url}/events", headers=headers, params=params, stream=True,
                                     timeout=(10, read_timeout))
        self.status_code = self.response.status_code
        self._lines = self.response.iter_lines(decode_unicode=True)

    def lines(self):
        """(time it arrived, line) of each line, as the stream sends them; ends with the stream."""
        for line in self._lines:
            yield time.monotonic(), line

    def messages(self):
        """(time it arrived, message) of each message (service.client.events.messages: event, id, data, retry)."""
        arrived = [0.0]

        def stamped():
            for when, line in self.lines():
                arrived[0] = when
                yield line

        for message in messages(stamped()):
            yield arrived[0], message

    def events(self, count):
        """The next `count` messages that carry an id (events, resets), or fewer when the stream ends."""
        found = []
        for when, message in self.messages():
            if "id" in message:
                found.append((when, message))
                if len(found) == count:
                    break
        return found

    def close(self):
        """Hang up: the connection is closed, as a client that goes away closes it."""
        self.response.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def follower(url, attempts=100, **options):
    """A Follower that got its stream, opening again while workers at their cap answer 503 (another worker, or this one
    once a place frees, takes it)."""
    for _ in range(attempts):
        opened = Follower(url, **options)
        if opened.status_code == 200:
            return opened
        assert opened.status_code == 503, opened.response.text
        opened.close()
        time.sleep(0.05)
    raise AssertionError(f"no stream opened in {attempts} attempts")
