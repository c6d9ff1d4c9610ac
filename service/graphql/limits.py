"""Size limits on GraphQL documents, so one request cannot occupy a worker.

Checked before graphql-core's own validation rules, some of which (overlapping fields) grow with the
square of the number of fields.
"""
from graphql import FieldNode, FragmentSpreadNode, GraphQLError, InlineFragmentNode, ValidationRule
from graphql.language import FragmentDefinitionNode

MAX_QUERY_LENGTH = 100_000
MAX_TOKENS = 10_000
MAX_DEPTH = 20
MAX_FIELDS = 500
# A few kilobytes of input can break a rule thousands of times; the answer stays small all the same.
MAX_ERRORS = 100


class QueryLimits(ValidationRule):
    """Refuse operations nested deeper than MAX_DEPTH or selecting more than MAX_FIELDS fields (fragments expanded)."""

    def enter_operation_definition(self, node, *_args):
        fragments = {
            definition.name.value: definition
            for definition in self.context.document.definitions
            if isinstance(definition, FragmentDefinitionNode)
        }
        depth, fields = _measure(node.selection_set, fragments, {})
        if depth > MAX_DEPTH:
            self.report_error(GraphQLError(f"the operation is nested {depth} levels deep; at most {MAX_DEPTH} are allowed", node))
        if fields > MAX_FIELDS:
            self.report_error(GraphQLError(f"the operation selects more than {MAX_FIELDS} fields (fragments expanded, "
                                           "aliases counted); select fewer or split the request", node))


def _measure(selection_set, fragments, memo):
    """(depth, field count) of a selection set, each fragment measured once; cycles count as empty."""
    if selection_set is None:
        return 0, 0
    depth = fields = 0
    for selection in selection_set.selections:
        if isinstance(selection, FieldNode):
            inner_depth, inner_fields = _measure(selection.selection_set, fragments, memo)
            depth, fields = max(depth, inner_depth + 1), fields + inner_fields + 1
        elif isinstance(selection, InlineFragmentNode):
            inner_depth, inner_fields = _measure(selection.selection_set, fragments, memo)
            depth, fields = max(depth, inner_depth), fields + inner_fields
        elif isinstance(selection, FragmentSpreadNode):
            name = selection.name.value
            if name not in memo and name in fragments:
                memo[name] = (0, 0)  # placeholder while measuring: a cycle (refused by graphql-core) ends here
                memo[name] = _measure(fragments[name].selection_set, fragments, memo)
            inner_depth, inner_fields = memo.get(name, (0, 0))
            depth, fields = max(depth, inner_depth), fields + inner_fields
        # Stop adding once far over the limit: the sum of a fragment bomb can be astronomically large.
        fields = min(fields, MAX_FIELDS + 1)
    return depth, fields


def capped(errors):
    """At most MAX_ERRORS errors; one more error says how many were left out."""
    if len(errors) <= MAX_ERRORS:
        return errors
    return errors[:MAX_ERRORS] + [{
        "message": f"{len(errors) - MAX_ERRORS} more errors are not listed (at most {MAX_ERRORS} are reported "
                   "per request); fix the ones above and send the request again",
        "extensions": {"code": "TOO_MANY_ERRORS"},
    }]
