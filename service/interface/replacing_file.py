"""A file written aside and put in place of its path only once it is whole: what a writer of a file that may fail
half-way (`wis export`: the server refuses, goes down, the disk fills) uses so that a failure leaves the file that was
there before as it was, never a truncated one in its place."""
import contextlib
import os
import secrets
import stat


class ReplacingFile:
    """`file` (binary, open for writing) is a temporary beside `path`; `commit()` makes it durable and renames it over
    `path`; `discard()` removes it (a no-op after `commit()`).

    A `path` that is a pipe or a device (`/dev/stdout`) is written directly: there is nothing to keep, and a rename
    would replace the node itself. A symbolic link is followed, so that the file it names is replaced, not the link."""

    def __init__(self, path):
        self.path = os.path.realpath(path)
        try:
            mode = os.stat(self.path).st_mode
        except FileNotFoundError:
            mode = None
        if mode is not None and not stat.S_ISREG(mode):
            self.file, self._temporary = open(self.path, "wb"), None
            return
        directory, name = os.path.split(self.path)
        # In the same directory: a rename within one file system is atomic. Hidden and marked, so that nobody takes it
        # for an archive while it is written.
        self._temporary = os.path.join(directory, f".{name}.{secrets.token_hex(4)}.partial")
        # 0o666 less the umask, as open() makes a new file; a replaced file's own mode is kept (an archive someone made
        # private stays private).
        descriptor = os.open(self._temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            if mode is not None:
                os.fchmod(descriptor, stat.S_IMODE(mode))
            self.file = os.fdopen(descriptor, "wb")
        except BaseException:
            os.close(descriptor)
            os.unlink(self._temporary)
            raise

    def commit(self):
        """Flush, fsync and rename the file over `path`, then sync the directory so that the rename survives a crash."""
        self.file.flush()
        if self._temporary is None:
            self.file.close()
            return
        os.fsync(self.file.fileno())
        self.file.close()
        os.replace(self._temporary, self.path)
        self._temporary = None
        with contextlib.suppress(OSError):  # some file systems cannot sync a directory; the rename stands regardless
            directory = os.open(os.path.dirname(self.path), os.O_RDONLY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)

    def discard(self):
        """Close and remove the temporary: `path` stays as it was."""
        with contextlib.suppress(OSError):
            self.file.close()
        if self._temporary is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._temporary)
            self._temporary = None
