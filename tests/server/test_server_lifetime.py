"""What the worker tells long answers (service.server.lifetime): its stop, once, to every callback, also to one that
comes after it; and a peek at a connection that asks not to wait (an event stream looking whether its client hung up)
gets the socket's own answer from the worker's PacedSocket: before, a peek that found nothing went through the body's
timed wait and came back b"", which reads as a hang-up, with the request marked as run out."""
import socket

from service.server.lifetime import WorkerLifetime
from service.server.worker import PacedSocket


def test_a_stop_calls_each_callback_once_and_a_late_one_at_once():
    lifetime, called = WorkerLifetime(threads=8), []
    lifetime.on_stop(lambda: called.append("first"))
    lifetime.on_stop(lambda: 1 / 0)  # a failing callback stops no other
    lifetime.on_stop(lambda: called.append("second"))
    assert called == [] and not lifetime.stopping
    lifetime.stop()
    lifetime.stop()
    assert called == ["first", "second"] and lifetime.stopping and lifetime.threads == 8
    lifetime.on_stop(lambda: called.append("late"))
    assert called == ["first", "second", "late"]


def test_a_peek_that_asks_not_to_wait_is_answered_at_once():
    server_side, client_side = socket.socketpair()
    with server_side, client_side:
        # A body timeout of an hour: a peek that waited for it would hang the test.
        paced = PacedSocket(server_side, timeout=3600, min_rate=1)
        try:
            paced.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            pass
        else:
            raise AssertionError("nothing was sent: the peek must find nothing, at once")
        client_side.close()
        assert paced.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        assert not paced.ran_out
