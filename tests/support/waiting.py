"""Waiting in a test for what a server does in the background (a webhook delivered, a log written)."""
import time


def wait_until(condition, seconds=10):
    """The first true value `condition()` answers, asked every 20 ms; AssertionError after `seconds`."""
    deadline = time.monotonic() + seconds
    while not (found := condition()):
        assert time.monotonic() < deadline, f"not within {seconds:g} s"
        time.sleep(0.02)
    return found
