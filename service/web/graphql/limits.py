"""Size limits on GraphQL documents, so one request cannot occupy a worker.

Checked before graphql-core's own validation rules, some of which (overlapping fields) grow with the
square of the number of fields.
"""
from graphql import (
    FieldNode,
    FragmentSpreadNode,
    GraphQLError,
    InlineFragmentNode,
    IntValueNode,
    OperationType,
    ValidationRule,
    value_from_ast,
)
from graphql.language import FragmentDefinitionNode

from service.domain.reads import MAX_PAGE_SIZE

# (The length of the query text, service.web.graphql.http.MAX_QUERY_LENGTH, is checked before it is parsed.)
MAX_TOKENS = 10_000
MAX_DEPTH = 20
MAX_FIELDS = 500
# A few kilobytes of input can break a rule thousands of times; the answer stays small all the same.
MAX_ERRORS = 100
# Aliases repeat a field as often as the field limit allows: 40 aliased pages of 1000 processes were a
# 290 MB answer after 80 s, and 400 aliased processCreate of one 10 MB $input would be minutes of work.
# So one request reads at most one full page's worth of objects and runs at most a few mutations.
MAX_OBJECTS_READ = MAX_PAGE_SIZE
MAX_MUTATIONS = 10
# The most characters of field names and values one answer may hold (service.web.graphql.budget): 64 MiB, above the
# largest full read of one process (its input is at most MAX_INPUT_SIZE; a part's description may be read back five
# times: in its action, in the step's torque group, in the bill of materials, as the scan part and in the scan's text).
RESPONSE_BUDGET = 64 * 1024 * 1024
# The most fields one answer may hold. Completing a field is most of the CPU of a read (5-10 microseconds each), so
# this bounds the CPU of an answer of many small fields (64 MiB of them would be 4 million); the full read of the
# process of MAX_INPUT_OBJECTS objects with the most fields (serialized parts in torque actions) has 710,000.
FIELD_BUDGET = 1_500_000


class QueryLimits(ValidationRule):
    """Refuse operations nested deeper than MAX_DEPTH, selecting more than MAX_FIELDS fields (fragments expanded),
    reading more than MAX_OBJECTS_READ stored objects or running more than MAX_MUTATIONS mutations."""

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
            return
        root_fields = [field for field in fields_of_root(node.selection_set, fragments)
                       if field.name.value != "__typename"]
        if node.operation == OperationType.MUTATION and len(root_fields) > MAX_MUTATIONS:
            self.report_error(GraphQLError(f"the operation runs {len(root_fields)} mutations; at most {MAX_MUTATIONS} "
                                           "are allowed per request", node))
        elif node.operation == OperationType.QUERY:
            objects = sum(self._objects_read(field) for field in root_fields)
            if objects > MAX_OBJECTS_READ:
                self.report_error(GraphQLError(
                    f"the operation may read {objects} objects (the `first` of every list, {MAX_PAGE_SIZE} when it "
                    f"is a variable, aliases counted); at most {MAX_OBJECTS_READ} are allowed: ask for fewer or "
                    "split the request", node))

    def _objects_read(self, field):
        """How many stored objects a root query field may read: 1 for one object, `first` for a list."""
        definition = self.context.schema.query_type.fields.get(field.name.value)
        if definition is None or "first" not in definition.args:
            return 1
        given = next((argument.value for argument in field.arguments or () if argument.name.value == "first"), None)
        if given is None:
            default = definition.args["first"].ast_node.default_value
            return value_from_ast(default, definition.args["first"].type)
        # A variable's value is not known while validating (the result is cached per query text); a literal
        # out of 0..MAX_PAGE_SIZE is clamped here and refused by the domain, which names `first`.
        return min(max(int(given.value), 0), MAX_PAGE_SIZE) if isinstance(given, IntValueNode) else MAX_PAGE_SIZE


def fields_of_root(selection_set, fragments, seen=None):
    """The fields of a root selection set, through inline fragments and fragment spreads (each spread once)."""
    seen = set() if seen is None else seen
    for selection in selection_set.selections:
        if isinstance(selection, FieldNode):
            yield selection
        elif isinstance(selection, InlineFragmentNode):
            yield from fields_of_root(selection.selection_set, fragments, seen)
        elif isinstance(selection, FragmentSpreadNode) and selection.name.value in fragments:
            if selection.name.value not in seen:
                seen.add(selection.name.value)
                yield from fields_of_root(fragments[selection.name.value].selection_set, fragments, seen)


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
