"""What a GraphQL operation calls, for the request journal of test mode (CONTRACT 12): each root field with the
object ids it names.

The ids are read from the field's arguments, whether written in the document or passed as variables: the `id`
argument (`process(id: "weld_1")`), and the `id` of each member of the `input` argument that the input type defines
(`processCreate(input: {process: {id: "weld_1", ...}})`). Nothing else of the arguments is read: the journal keeps
no bodies.
"""
from graphql import FragmentDefinitionNode, ObjectValueNode, VariableNode, get_named_type, is_input_object_type
from graphql.utilities import value_from_ast_untyped

from service.web.graphql.limits import fields_of_root

# An id longer than any valid one (50 characters) is kept this long, so a huge string costs the journal nothing.
MAX_ID_LENGTH = 200


def root_calls(schema, document, operation, variables):
    """[(root field name, [ids])] of `operation` in `document`, in the order the fields are written."""
    fragments = {definition.name.value: definition for definition in document.definitions
                 if isinstance(definition, FragmentDefinitionNode)}
    root_type = schema.get_root_type(operation.operation)
    calls = []
    for field in fields_of_root(operation.selection_set, fragments):
        definition = root_type.fields.get(field.name.value) if root_type else None
        arguments = {argument.name.value: argument.value for argument in field.arguments or ()}
        ids = []
        if "id" in arguments:
            ids.append(_plain(arguments["id"], variables))
        if "input" in arguments and definition is not None and "input" in definition.args:
            input_type = get_named_type(definition.args["input"].type)
            if is_input_object_type(input_type):
                ids.extend(_member_ids(arguments["input"], input_type.fields, variables))
        calls.append((field.name.value, [value[:MAX_ID_LENGTH] for value in ids if isinstance(value, str)]))
    return calls


def _member_ids(node, member_names, variables):
    """The `id` of each member of an input object (a literal or a variable) that the input type defines."""
    if isinstance(node, VariableNode):
        value = variables.get(node.name.value)
        members = [value.get(name) for name in member_names] if isinstance(value, dict) else []
        return [member.get("id") for member in members if isinstance(member, dict)]
    if not isinstance(node, ObjectValueNode):
        return []
    ids = []
    for member in node.fields:
        if member.name.value not in member_names:
            continue
        if isinstance(member.value, ObjectValueNode):
            ids.extend(_plain(field.value, variables) for field in member.value.fields if field.name.value == "id")
        elif isinstance(member.value, VariableNode) and isinstance(value := variables.get(member.value.name.value), dict):
            ids.append(value.get("id"))
    return ids


def _plain(node, variables):
    """A small argument value (a string literal or a variable) as Python."""
    if isinstance(node, VariableNode):
        return variables.get(node.name.value)
    return value_from_ast_untyped(node)
