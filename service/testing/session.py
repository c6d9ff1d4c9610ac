"""ServiceSession: a requests.Session bound to one service (service.testing's servers hand them out)."""
import requests

from service.interface import TOKEN_HEADER


class ServiceSession(requests.Session):
    """A requests.Session bound to one service: relative paths ('/uploads') go to its base URL, with the token."""

    def __init__(self, base_url, token):
        super().__init__()
        self.base_url = base_url.rstrip("/")
        self.headers[TOKEN_HEADER] = token

    def request(self, method, url, *args, **kwargs):
        if url.startswith("/"):
            url = self.base_url + url
        return super().request(method, url, *args, **kwargs)
