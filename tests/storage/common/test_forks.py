"""An object registered with reset_in_forked_child is reset in a forked child, and only there."""
import os

from service.storage.common.forks import reset_in_forked_child


class Held:
    def __init__(self):
        self.state = "the parent's"

    def reset(self):
        self.state = "reset"


def test_a_registered_object_is_reset_in_a_forked_child_not_in_its_parent():
    held = Held()
    reset_in_forked_child(held, "reset")
    reading, writing = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report what it holds, then end without running the parent's test machinery
        os.write(writing, held.state.encode())
        os._exit(0)
    os.waitpid(pid, 0)
    assert os.read(reading, 100) == b"reset"
    assert held.state == "the parent's"
