"""Upload endpoints: single uploads, chunked streams, media serving (see views)."""
from service.uploads.views import init_app

__all__ = ["init_app"]
