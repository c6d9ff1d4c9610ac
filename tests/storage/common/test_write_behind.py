"""The write-behind threads of tus PATCH bodies (service/storage/common/write_behind.py): every consumer sees every block in
order, a failure reaches the request's thread and nothing after it is consumed, and no thread outlives the body."""
import threading

import pytest

from service.storage.common.write_behind import INLINE_LIMIT, WriteBehind

LARGE = INLINE_LIMIT


def blocks(count):
    return [bytes([index]) * LARGE for index in range(count)]


def test_every_consumer_gets_every_block_in_order_in_a_thread_of_its_own():
    written, hashed, threads = [], [], set()

    def write(block):
        written.append(block[0])
        threads.add(threading.current_thread().name)

    behind = WriteBehind((write, lambda block: hashed.append(block[0])), "test-behind")
    for block in blocks(20):
        behind.put(block)
    behind.drain()
    assert written == hashed == list(range(20))
    assert threads == {"test-behind"}
    assert not [thread for thread in threading.enumerate() if thread.name == "test-behind"]


def test_small_blocks_before_any_large_one_are_consumed_at_once_in_the_callers_thread():
    seen = []
    behind = WriteBehind((lambda block: seen.append((len(block), threading.current_thread())),), "test-behind")
    behind.put(b"x" * 100)
    assert seen == [(100, threading.current_thread())]
    behind.put(b"y" * LARGE)
    behind.put(b"z" * 10)
    behind.drain()
    assert [size for size, _ in seen] == [100, LARGE, 10]
    assert seen[1][1] is not threading.current_thread() and seen[2][1] is seen[1][1]


def test_a_failure_is_raised_to_the_caller_and_later_blocks_are_dropped():
    consumed = []

    def write(block):
        if block[0] == 3:
            raise OSError("disk gone")
        consumed.append(block[0])

    behind = WriteBehind((write,), "test-behind")
    with pytest.raises(OSError, match="disk gone"):
        for block in blocks(50):
            behind.put(block)
        behind.drain()
    behind.drain()  # the thread is gone whichever call raised
    assert consumed == [0, 1, 2]
    assert not [thread for thread in threading.enumerate() if thread.name == "test-behind"]
