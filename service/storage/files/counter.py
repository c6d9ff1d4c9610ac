"""A number every worker of a node shares: 8 bytes in a file, read and written under the file's lock (test mode's
count of the names made, service.storage.testmode.fresh_names)."""
import os

from service.errors import disk_errors
from service.storage.common.disk import lock

WIDTH = 8


class FileCounter:
    def __init__(self, path):
        self.path = path

    def next(self):
        """Add one and return the new value (1 after a reset)."""
        # Taking the lock makes the directory.
        with disk_errors(), lock(self.path):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                value = int.from_bytes(os.pread(fd, WIDTH, 0) or bytes(WIDTH), "big") + 1
                os.pwrite(fd, value.to_bytes(WIDTH, "big"), 0)
            finally:
                os.close(fd)
        return value

    def reset(self):
        with disk_errors(), lock(self.path):
            self.path.unlink(missing_ok=True)
