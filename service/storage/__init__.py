"""The repository: every store of the service, rooted in one data directory."""
import os
from pathlib import Path

from service.storage import names
from service.storage.documents import DocumentStore
from service.storage.media import MediaStore
from service.storage.streams import StreamStore


class Repository:
    """What views and resolvers hand to domain functions; the only object that touches disk."""

    def __init__(self, data_dir):
        self.data_dir = Path(data_dir)
        self.orgs_root = self.data_dir / "orgs"
        self.orgs_root.mkdir(parents=True, exist_ok=True)
        self.documents = DocumentStore(self.orgs_root)
        self.media = MediaStore(self.orgs_root, names)
        self.streams = StreamStore(self.orgs_root, self.media)

    def orgs(self):
        """Every org that has stored something, sorted."""
        with os.scandir(self.orgs_root) as entries:
            stored = [entry.name for entry in entries if entry.is_dir() and names.SAFE_NAME.fullmatch(entry.name)]
        return sorted(names.name_to_id(name) for name in stored)


def init_app(app):
    app.extensions["repository"] = Repository(app.config["DATA_DIR"])


def get_repository(app):
    return app.extensions["repository"]
