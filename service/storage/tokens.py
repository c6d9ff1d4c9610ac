"""The embedded default token: `<data>/default-token`, used when no WIS_API_TOKENS are configured."""
import os
import secrets
from pathlib import Path

DEFAULT_TOKEN_FILE = "default-token"


def ensure_default_token(data_dir):
    """Return (the embedded default token, whether this call created it), creating it exactly once even when workers
    race."""
    path = Path(data_dir) / DEFAULT_TOKEN_FILE
    created = False
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        candidate = path.with_name(f".{DEFAULT_TOKEN_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
        # Created readable by the owner only: a file written first and chmod-ed after is world-readable meanwhile.
        with os.fdopen(os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as handle:
            handle.write(secrets.token_urlsafe(24) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        try:
            # link() fails if another worker won the race; its token then stands for everyone.
            os.link(candidate, path)
            created = True
        except FileExistsError:
            pass
        finally:
            candidate.unlink()
    return path.read_text().strip(), created
