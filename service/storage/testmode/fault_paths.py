"""The `path` of a test-mode fault (service.testing.api): a regular expression searched in each request's path, and
what searching it may cost.

Python's `re` backtracks, so a pattern can cost far more than its length: `(a+)+$` takes seconds on a path of 30
characters, `.*a.*a.*b` half a minute on 1,000. A fault is searched in every request a node answers, so a pattern is
checked when the fault is added and refused unless its search is bounded. The bound counts, over the parse tree, the
ways the matcher can try at one start position (a quantifier on one character can stop at each count it allows, an
alternation tries each branch, a sequence multiplies), times the nodes tried for each way, times the start positions
(one when the pattern starts with `^` or `\\A`): at most MAX_STEPS for a path of MATCHED_PATH characters, about 10 ms
of the matcher's C code. What the bound cannot count is refused outright: a group repeated a variable number of times
(`(a+)+`, `(ab)*`), back-references, lookarounds and conditionals.
"""
import re
from re import _constants as sre, _parser

# A request's path is searched up to this many characters (the longest path the service serves has 270), as the
# request journal records it.
MATCHED_PATH = 1000
MAX_PATTERN = 1000
MAX_STEPS = 10_000_000
NESTED_TOO_DEEP = "its groups nest too deeply for Python's re to parse"
_ONE_CHARACTER = {sre.LITERAL, sre.NOT_LITERAL, sre.ANY, sre.IN}
_REPEATS = {sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT}


class CostlyPattern(ValueError):
    """The pattern's search cannot be bounded; the message says why and what to write instead."""


def check_pattern(pattern):
    """Raise CostlyPattern (or re.error for a pattern that does not compile) unless searching `pattern` in a path of
    MATCHED_PATH characters takes at most MAX_STEPS steps."""
    if len(pattern) > MAX_PATTERN:
        raise CostlyPattern(f"{len(pattern)} characters long; at most {MAX_PATTERN} are accepted")
    parsed = _parsed(pattern)
    try:
        ways, nodes = _cost(parsed.data)
    except RecursionError:  # _cost recurses once per nested group, as re's parser does
        raise re.error(NESTED_TOO_DEEP) from None
    steps = (1 if _anchored(parsed) else MATCHED_PATH + 1) * ways * nodes
    if steps > MAX_STEPS:
        raise CostlyPattern(f"its search may backtrack through about {steps:,} steps on a path of {MATCHED_PATH} "
                            f"characters, more than the {MAX_STEPS:,} accepted; anchor it with ^ and use fewer "
                            f"quantifiers (*, +, ?, {{m,n}}) and alternatives (|)")


def _parsed(pattern):
    """re's parse tree of `pattern`, or re.error for whatever re refuses it with. Not only re.error: OverflowError for
    a repeat count past its limit (`a{4294967295}`), ValueError for flags that exclude each other (`(?a)(?u)`),
    RecursionError for groups nested some 300 deep; and where warnings are errors (an integrator's pytest run, which
    hosts the test double) the FutureWarning of a set that will change meaning (`[[a]`). Each was a 500."""
    try:
        re.compile(pattern)
        # re's own parser (private, but the tree it gives is the one the matcher runs): what is counted is what runs.
        return _parser.parse(pattern)
    except (OverflowError, ValueError) as error:
        raise re.error(str(error)) from None
    except RecursionError:
        raise re.error(NESTED_TOO_DEEP) from None
    except Warning as warning:
        raise re.error(f"{warning} ({type(warning).__name__} of Python's re, an error in this process)") from None


def matches(pattern, path):
    """Whether a fault's (checked) pattern is found in a request's path, searched up to MATCHED_PATH characters."""
    return re.search(pattern, path[:MATCHED_PATH]) is not None


def _anchored(parsed):
    """Whether the pattern starts with `^` or `\\A`, so that it is tried at the path's start only (`^` under (?m) may
    also match after each newline)."""
    first = parsed.data[0] if parsed.data else (None, None)
    return first[0] is sre.AT and (first[1] is sre.AT_BEGINNING_STRING or
                                   (first[1] is sre.AT_BEGINNING and not parsed.state.flags & re.MULTILINE))


def _cost(items):
    """(ways to try at one start position, nodes tried for each way) of a parsed sequence; CostlyPattern past
    MAX_STEPS or for a construct the count does not cover."""
    ways, nodes = 1, 0
    for op, argument in items:
        if op in _ONE_CHARACTER or op is sre.AT:
            inner_ways, inner_nodes = 1, 1
        elif op is sre.SUBPATTERN:
            inner_ways, inner_nodes = _cost(argument[-1])
        elif op is sre.ATOMIC_GROUP:
            inner_ways, inner_nodes = _cost(argument)
        elif op is sre.BRANCH:
            branches = [_cost(branch) for branch in argument[1]]
            inner_ways, inner_nodes = sum(way for way, _ in branches), max(node for _, node in branches)
        elif op in _REPEATS:
            inner_ways, inner_nodes = _repeat_cost(op, *argument)
        else:
            raise CostlyPattern("back-references, lookarounds ((?=...), (?!...), (?<=...)) and conditional groups "
                                "are not accepted in a fault's path")
        ways, nodes = ways * inner_ways, nodes + inner_nodes
        if ways * nodes > MAX_STEPS:
            raise CostlyPattern(f"its alternatives and quantifiers give more than {MAX_STEPS:,} ways to match at one "
                                "position; use fewer quantifiers (*, +, ?, {m,n}) and alternatives (|)")
    return ways, max(nodes, 1)


def _repeat_cost(op, low, high, body):
    low, high = min(low, MATCHED_PATH + 1), min(high, MATCHED_PATH + 1)  # a path cannot hold more
    if len(body) == 1 and body[0][0] in _ONE_CHARACTER:
        # One scan of the characters, then (unless possessive) one way for each count it can give back.
        return (1 if op is sre.POSSESSIVE_REPEAT else high - low + 1), low + 1
    if low != high:
        raise CostlyPattern("a group repeated a variable number of times ((a+)+, (ab)*, (x|y){1,5}) may backtrack "
                            "without bound; repeat single characters or classes only ([a-z0-9/]+)")
    ways, nodes = _cost(body)
    if ways > 1 and low * ways.bit_length() > MAX_STEPS.bit_length():
        raise CostlyPattern(f"a group of alternatives or quantifiers repeated {low} times gives more than "
                            f"{MAX_STEPS:,} ways to match; use fewer")
    return ways ** low, nodes * low
