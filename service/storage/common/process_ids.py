"""Whether a process named in a file or directory name (its pid) is gone, so what it left can be removed."""
from pathlib import Path


def process_gone(pid):
    """True when `pid` no longer runs: no such process, or a zombie (dead, but not reaped because its parent died too
    and the pid 1 of a container may never reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    # The state follows the command name, which is in parentheses and may itself hold spaces or parentheses.
    fields = stat.rsplit(")", 1)[-1].split()
    return not fields or fields[0] in ("Z", "X")
