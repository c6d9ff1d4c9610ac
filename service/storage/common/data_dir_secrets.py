"""Secrets made once and kept under the data directory: the embedded default token (`<data>/default-token`, used when
no WIS_API_TOKENS are configured) and the key that signs the preview pages' session cookies (`<data>/secret-key`,
used when WIS_SECRET_KEY is not set)."""
import os
import secrets
from pathlib import Path

DEFAULT_TOKEN_FILE = "default-token"
SECRET_KEY_FILE = "secret-key"
# A URL-safe token starts with "-" one time in 64, and `wis upload --token -Xy...` then reads as a missing value: the
# prefix keeps the default token a word any command line takes as it is.
DEFAULT_TOKEN_PREFIX = "wis-"


def ensure_default_token(data_dir):
    """Return (the embedded default token, whether this call created it), creating it exactly once even when workers
    race."""
    return _made_once(Path(data_dir) / DEFAULT_TOKEN_FILE, lambda: DEFAULT_TOKEN_PREFIX + secrets.token_urlsafe(24))


def ensure_secret_key(data_dir):
    """Return the session-signing key, creating it exactly once even when workers race."""
    return _made_once(Path(data_dir) / SECRET_KEY_FILE, lambda: secrets.token_urlsafe(32))[0]


def _made_once(path, make):
    """(the value kept at `path`, whether this call created it), made by `make()` when the file does not exist."""
    created = False
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        candidate = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        # Created readable by the owner only: a file written first and chmod-ed after is world-readable meanwhile.
        with os.fdopen(os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as handle:
            handle.write(make() + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        try:
            # link() fails if another worker won the race; its value then stands for everyone.
            os.link(candidate, path)
            created = True
        except FileExistsError:
            pass
        finally:
            candidate.unlink()
    return path.read_text().strip(), created
