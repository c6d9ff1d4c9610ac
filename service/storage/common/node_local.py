"""What both backends' repositories do alike with what stays on this node: its data directory (staging directories)
and its test state (pending faults, the request journal, the count of made-up names)."""
from service.storage.common.disk import staging_directory


class NodeLocal:
    """A base for a repository with `data_dir`, `faults`, `journal` and `names_counter` attributes."""

    def staging_directory(self):
        """A new directory in this node's data directory, removed when the block ends (service.storage.contract)."""
        return staging_directory(self.data_dir)

    def forget_test_state(self):
        """Clear the pending faults and the journal and count made-up names from the start again (reset, restore)."""
        self.faults.clear()
        self.journal.clear()
        self.names_counter.reset()
