"""A changed text in words (service.domain.text_changes): whole when short, else the words that changed with a few
around them, at a cost bounded whatever the texts."""
import random

import pytest

from service.domain import text_changes
from service.domain.changes import changes
from service.domain.text_changes import matching_budget, text_change
from support.word_matching import counted_matching

GUIDE = ("Place the actuator housing on the bench with the motor mount facing up, then insert the four M3 nuts into "
         "their slots.")


def test_short_texts_are_shown_whole():
    assert text_change("Fasten", "Fasten the cover") == "\u201cFasten\u201d -> \u201cFasten the cover\u201d"


def test_an_appended_sentence_is_what_the_change_shows():
    change = text_change(GUIDE, GUIDE + " Check that the nuts sit flush.")
    assert change == ("\u201c\u2026into their slots.\u201d -> "
                      "\u201c\u2026into their slots. Check that the nuts sit flush.\u201d")


def test_one_changed_word_is_shown_with_the_words_around_it():
    change = text_change(GUIDE, GUIDE.replace("four M3 nuts", "four M4 nuts"))
    assert change == "\u201c\u2026insert the four M3 nuts into their\u2026\u201d -> \u201c\u2026insert the four M4 nuts into their\u2026\u201d"


def test_separate_changes_in_one_text_are_each_shown():
    new = GUIDE.replace("Place", "Set").replace("slots", "pockets")
    assert text_change(GUIDE, new) == (
        "\u201cPlace the actuator housing\u2026 \u2026nuts into their slots.\u201d -> "
        "\u201cSet the actuator housing\u2026 \u2026nuts into their pockets.\u201d")


def test_more_than_three_changes_are_counted():
    text = GUIDE + " " + GUIDE.replace("Place", "Hold")
    new = " ".join(word.upper() if i % 9 == 0 else word for i, word in enumerate(text.split()))
    assert text_change(text, new) == (
        "\u201cPlace the actuator housing\u2026 \u2026bench with the motor mount facing up,\u2026 \u2026the four M3 nuts "
        "into their slots.\u2026\u201d -> \u201cPLACE the actuator housing\u2026 \u2026bench with the MOTOR mount facing "
        "up,\u2026 \u2026the four M3 NUTS into their slots.\u2026\u201d (and 2 more changes)")


def test_a_change_at_the_start_of_a_long_text_is_not_cut_before_it():
    assert text_change(GUIDE, "Now p" + GUIDE[1:]) == ("\u201cPlace the actuator housing\u2026\u201d -> "
                                                     "\u201cNow place the actuator housing\u2026\u201d")


def test_a_removed_middle_shows_what_was_removed():
    new = GUIDE.replace(" with the motor mount facing up,", "")
    assert text_change(GUIDE, new) == ("\u201c\u2026on the bench with the motor mount facing up, then insert the\u2026\u201d "
                                       "-> \u201c\u2026on the bench then insert the\u2026\u201d")


def test_the_history_words_use_it_for_every_text():
    old = {"id": "p", "name": "P", "description": GUIDE}
    new = {"id": "p", "name": "P", "description": GUIDE + " Wear gloves."}
    assert changes("processes", old, new) == [
        "description \u201c\u2026into their slots.\u201d -> "
        "\u201c\u2026into their slots. Wear gloves.\u201d"]




@pytest.mark.exhaustive  # the largest texts the limits allow
def test_one_comparison_spends_a_bounded_number_of_word_comparisons(monkeypatch):
    """Thousands of changed texts, each fully different in a small alphabet of words (difflib's worst case): the
    matching of all of them together stays within the budget, and every text is still said to have changed."""
    spent = counted_matching(monkeypatch)
    rng = random.Random(7)

    def text():
        return " ".join(rng.choice("ab") for _ in range(400))

    steps = lambda: [{"id": f"s_{i}", "instructionText": {"text": text()}} for i in range(2000)]
    old, new = {"id": "p", "name": "P", "steps": steps()}, {"id": "p", "name": "P", "steps": steps()}
    found = changes("processes", old, new)
    assert len(found) == 2000
    assert sum(spent) <= text_changes.MATCH_BUDGET
    assert all(len(line) < 500 for line in found)


def test_the_comparisons_of_one_request_share_its_budget(monkeypatch):
    """A GraphQL operation may compare the same revisions under hundreds of aliases: the request's budget (opened
    around the operation, service.web.graphql.endpoint) is shared by each comparison's own, so difflib is asked for
    at most one budget's word comparisons in all."""
    spent = counted_matching(monkeypatch)
    rng = random.Random(3)
    text = lambda: " ".join(rng.choice("ab") for _ in range(300))
    old, new = ({"id": "p", "name": "P", "steps": [{"id": "s_1", "instructionText": {"text": text()}}]}
                for _ in range(2))
    with matching_budget():
        found = [changes("processes", old, new) for _ in range(100)]
    assert all(len(lines) == 1 for lines in found)
    assert 0 < sum(spent) <= text_changes.MATCH_BUDGET
    assert len(spent) < 10  # each needs about 360,000: a handful fit, the rest are shown as one changed run


def test_outside_a_comparison_a_text_has_the_budget_to_itself(monkeypatch):
    spent = counted_matching(monkeypatch)
    text_change(" a" * 100, " b" * 100)
    with matching_budget(10):
        text_change(" a" * 100, " b" * 100)
    assert spent == [199 * 199]  # the leading space is common
