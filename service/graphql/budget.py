"""A budget on the size of one answer, spent while graphql-core builds it rather than measured once it is built.

The query limits (service.graphql.limits) count fields and objects, not the bytes a field repeats: one 8 MB text
selected under 100 aliases was an 839 MB answer, and the worker grew to 1.9 GB building it. Here every field of the
answer spends the length of its name (alias) and a few characters of JSON around it, every leaf value its length
(a string's characters, a fixed width for other scalars); the field that goes over RESPONSE_BUDGET stops the whole
operation with ResponseTooLarge, before any other resolver runs. The spending also bounds the CPU of completing an
answer, since each field completed spends at least FIELD_OVERHEAD.
"""
from collections.abc import Iterator

from graphql import located_error
from graphql.execution.incremental.incremental_executor import IncrementalExecutor

from service.errors import ResponseTooLarge
from service.graphql.limits import RESPONSE_BUDGET

# The quotes, colon and comma around a field name in JSON.
FIELD_OVERHEAD = 4
# What a number, boolean or enum value spends: as long as the longest float JSON writes (-1.7976931348623157e+308).
SCALAR_LENGTH = 24


def too_large(budget):
    return ResponseTooLarge(
        f"the answer would hold more than {budget:,} characters of field names and values, the most one answer may "
        "hold: ask for fewer objects with `first` (and page on with `after`), select fewer fields, and do not select "
        "a field under several aliases")


class BudgetedExecutor(IncrementalExecutor):
    """graphql-core's default executor, stopping the operation once the answer spends more than `budget`."""

    budget = RESPONSE_BUDGET

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.spent = 0

    def execute_field(self, parent_type, source, field_details_list, path, position_context):
        self.spent += len(path.key) + FIELD_OVERHEAD
        if self.spent > self.budget:
            # Before the resolver runs: no more objects are read once the budget is spent.
            raise located_error(too_large(self.budget), [details.node for details in field_details_list], path.as_list())
        return super().execute_field(parent_type, source, field_details_list, path, position_context)

    def complete_leaf_value(self, return_type, result):
        completed = super().complete_leaf_value(return_type, result)
        self.spent += len(completed) if completed.__class__ is str else SCALAR_LENGTH
        if self.spent > self.budget:
            raise too_large(self.budget)
        return completed

    def complete_list_value(self, return_type, field_details_list, info, path, result, position_context):
        if isinstance(result, Iterator):  # a page read as it is consumed (service.storage): stop reading with the answer
            result = self._while_within_budget(result)
        return super().complete_list_value(return_type, field_details_list, info, path, result, position_context)

    def _while_within_budget(self, items):
        # graphql-core drains a list's iterator when an item fails; over the budget, it is left unread.
        for item in items:
            yield item
            if self.spent > self.budget:
                return

    def handle_field_error(self, raw_error, return_type, field_details_list, path):
        # An answer over budget is refused whole: the error goes up to the operation, however nullable the field.
        if isinstance(getattr(raw_error, "original_error", raw_error), ResponseTooLarge):
            raise located_error(raw_error, [details.node for details in field_details_list], path.as_list())
        super().handle_field_error(raw_error, return_type, field_details_list, path)
