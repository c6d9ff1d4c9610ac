"""What the changes between two revisions ask of difflib (service.domain.text_changes)."""
from service.domain import text_changes


def counted_matching(monkeypatch):
    """A list that grows by the word comparisons (one text's changed words times the other's) of each matching difflib
    is asked for from now on, in this test."""
    spent = []
    real = text_changes.difflib.SequenceMatcher

    def counting(junk, a, b, autojunk):
        spent.append(len(a) * len(b))
        return real(junk, a, b, autojunk=autojunk)

    monkeypatch.setattr(text_changes.difflib, "SequenceMatcher", counting)
    return spent
