"""A changed text in words: whole when both sides fit on a line, else only the words that changed, each with a few
words around it, so that appending a sentence to a long instruction shows that sentence, not two identical beginnings:

    instruction text “…with four M4 screws.” -> “…with four M4 screws. Check that the cover sits flat.”

Texts are split into words and the runs of space between them. The common beginning and end are skipped in linear time;
the rest is matched word by word (difflib), which finds several separate changes in one text, only while the comparison
of two revisions (or the request that asks for several) has spent less than MATCH_BUDGET word comparisons on it
(`matching_budget`), else shown as one changed run: a text holds up to 20,000 characters and an input thousands of
texts, and difflib's matching is quadratic in the worst case.
"""
import contextlib
import contextvars
import difflib
import re

# A text this long or shorter is shown whole (the changes of a short name or title read best whole).
SHOWN_TEXT = 80
# Words and the space after them: three words of context on each side of a change.
CONTEXT_TOKENS = 6
# Separate changes shown in one text; more are counted.
SHOWN_RUNS = 3
# A changed run longer than this is shown by its beginning and end.
SHOWN_RUN = 160
# The most word comparisons (one text's changed words times the other's) that difflib may make for all the texts of
# one comparison of two revisions: about a second of the worst case (a small alphabet of words); beyond it, each
# changed text is shown as one run from its first change to its last.
MATCH_BUDGET = 2_000_000
ELLIPSIS = "\u2026"
TOKENS = re.compile(r"\S+|\s+")
_budget = contextvars.ContextVar("word_matching_budget", default=None)


@contextlib.contextmanager
def matching_budget(work=MATCH_BUDGET):
    """Within this block, the text changes share `work` word comparisons (outside one, a text has it to itself). A
    block within another shares the outer one's: every comparison of one request (a GraphQL operation may ask for
    hundreds under aliases) shares one budget."""
    if _budget.get() is not None:
        yield
        return
    token = _budget.set([work])
    try:
        yield
    finally:
        _budget.reset(token)


def quoted(text):
    """A text in quotes, cut when long."""
    return f"\u201c{text if len(text) <= SHOWN_TEXT else text[:SHOWN_TEXT - 1] + ELLIPSIS}\u201d"


def text_change(old, new):
    """'“old” -> “new”', whole when both are short, else the changed runs of each with their context."""
    if len(old) <= SHOWN_TEXT and len(new) <= SHOWN_TEXT:
        return f"\u201c{old}\u201d -> \u201c{new}\u201d"
    old_tokens, new_tokens = TOKENS.findall(old), TOKENS.findall(new)
    runs = _merged(_changed_runs(old_tokens, new_tokens))
    more = len(runs) - SHOWN_RUNS
    runs = runs[:SHOWN_RUNS]
    shown_old = _side(old_tokens, [(i1, i2) for i1, i2, _, _ in runs])
    shown_new = _side(new_tokens, [(j1, j2) for _, _, j1, j2 in runs])
    counted = f" (and {more} more change{'s' if more > 1 else ''})" if more > 0 else ""
    return f"\u201c{shown_old}\u201d -> \u201c{shown_new}\u201d{counted}"


def _changed_runs(old, new):
    """[(i1, i2, j1, j2)]: old[i1:i2] became new[j1:j2], in order."""
    start = 0
    limit = min(len(old), len(new))
    while start < limit and old[start] == new[start]:
        start += 1
    end = 0
    while end < limit - start and old[-1 - end] == new[-1 - end]:
        end += 1
    middle_old, middle_new = old[start:len(old) - end], new[start:len(new) - end]
    work = len(middle_old) * len(middle_new)
    remaining = _budget.get() or [MATCH_BUDGET]
    if work > remaining[0]:
        return [(start, len(old) - end, start, len(new) - end)]
    remaining[0] -= work
    matcher = difflib.SequenceMatcher(None, middle_old, middle_new, autojunk=False)
    return [(start + i1, start + i2, start + j1, start + j2)
            for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


def _merged(runs):
    """Runs whose contexts would overlap, shown as one."""
    merged = []
    for run in runs:
        if merged and run[0] - merged[-1][1] <= 2 * CONTEXT_TOKENS:
            merged[-1] = (merged[-1][0], run[1], merged[-1][2], run[3])
        else:
            merged.append(run)
    return merged


def _side(tokens, runs):
    """One side's text: each run with its context, '…' where the text goes on."""
    pieces = []
    for first, last in runs:
        before = "".join(tokens[max(0, first - CONTEXT_TOKENS):first])
        after = "".join(tokens[last:last + CONTEXT_TOKENS])
        changed = "".join(tokens[first:last])
        if len(changed) > SHOWN_RUN:
            changed = changed[:SHOWN_RUN * 2 // 3] + ELLIPSIS + changed[-(SHOWN_RUN // 3):]
        piece = (before + changed + after).strip()
        starts_cut = first > CONTEXT_TOKENS
        ends_cut = last + CONTEXT_TOKENS < len(tokens)
        pieces.append((ELLIPSIS if starts_cut else "") + piece + (ELLIPSIS if ends_cut else ""))
    return " ".join(pieces)
