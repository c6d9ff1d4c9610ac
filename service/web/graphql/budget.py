"""A budget on the size of one answer, spent while graphql-core builds it rather than measured once it is built.

The query limits (service.web.graphql.limits) count the fields and objects a query names, not what they repeat: one 8 MB
text selected under 100 aliases was an 839 MB answer, and the worker grew to 1.9 GB building it. Here every field of the
answer spends the length of its name (alias) and a few characters of JSON around it, every leaf value its length (a
string's characters, a JSON value's encoded length, a fixed width for other scalars), and the fields are counted; the
field that goes over RESPONSE_BUDGET characters or FIELD_BUDGET fields stops the whole operation with ResponseTooLarge,
before any other resolver runs.
"""
from collections.abc import Iterator

import orjson
from graphql import ExecutionResult, located_error
from graphql.execution.incremental.incremental_executor import IncrementalExecutor

from service.errors import ResponseTooLarge
from service.web.graphql.limits import FIELD_BUDGET, RESPONSE_BUDGET

# The quotes, colon and comma around a field name in JSON.
FIELD_OVERHEAD = 4
# What a number, boolean or enum value spends: as long as the longest float JSON writes (-1.7976931348623157e+308).
SCALAR_LENGTH = 24


def too_large(what):
    return ResponseTooLarge(
        f"the answer would hold more than {what}, the most one answer may hold: ask for fewer objects with `first` "
        "(and page on with `after`), select fewer fields, and do not select a field under several aliases")


class BudgetedExecutor(IncrementalExecutor):
    """graphql-core's default executor, stopping the operation once the answer spends more than `budget` characters
    or `field_budget` fields."""

    budget = RESPONSE_BUDGET
    field_budget = FIELD_BUDGET

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.spent = self.fields = 0

    def execute_field(self, parent_type, source, field_details_list, path, position_context):
        self.spent += len(path.key) + FIELD_OVERHEAD
        self.fields += 1
        if self._over_budget():
            # Before the resolver runs: no more objects are read once the budget is spent.
            raise located_error(self._over(), [details.node for details in field_details_list], path.as_list())
        return super().execute_field(parent_type, source, field_details_list, path, position_context)

    def complete_leaf_value(self, return_type, result):
        completed = super().complete_leaf_value(return_type, result)
        if completed.__class__ is str:
            self.spent += len(completed)
        elif isinstance(completed, (dict, list)):  # a JSON scalar (an object's stored `input`): its written length
            self.spent += len(orjson.dumps(completed))
        else:
            self.spent += SCALAR_LENGTH
        if self._over_budget():
            raise self._over()
        return completed

    def build_response(self, data):
        response = super().build_response(data)
        # graphql-core's executor is in a reference cycle (the helpers it keeps hold its bound methods), so what it
        # refers to waits for the cycle collector. Its variables are the request's whole input (thousands of objects
        # for a large process): let go of them now, and reference counting frees them with the request, rather than
        # a collection walking them later (0.5 ms a request of collector time for processCreate's 60 KB input). Not
        # while deferred or streamed parts, which read them, are still to come.
        if isinstance(response, ExecutionResult):
            self.variable_values = None
        return response

    def _over_budget(self):
        return self.spent > self.budget or self.fields > self.field_budget

    def _over(self):
        if self.fields > self.field_budget:
            return too_large(f"{self.field_budget:,} fields")
        return too_large(f"{self.budget:,} characters of field names and values")

    def complete_list_value(self, return_type, field_details_list, info, path, result, position_context):
        if isinstance(result, Iterator):  # a page read as it is consumed (service.storage): stop reading with the answer
            result = self._while_within_budget(result)
        return super().complete_list_value(return_type, field_details_list, info, path, result, position_context)

    def _while_within_budget(self, items):
        # graphql-core drains a list's iterator when an item fails; over the budget, it is left unread.
        for item in items:
            yield item
            if self._over_budget():
                return

    def handle_field_error(self, raw_error, return_type, field_details_list, path):
        # An answer over budget is refused whole: the error goes up to the operation, however nullable the field.
        if isinstance(getattr(raw_error, "original_error", raw_error), ResponseTooLarge):
            raise located_error(raw_error, [details.node for details in field_details_list], path.as_list())
        super().handle_field_error(raw_error, return_type, field_details_list, path)
