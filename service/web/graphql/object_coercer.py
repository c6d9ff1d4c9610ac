"""The coercion function of one input object type, generated as Python source from its fields (service.web.graphql.
coercion compiles the fields' own functions): one straight run of tests per field, no loop over a table of fields,
and a String field's checks inline rather than a call per string. A processCreate's input holds about 900 objects and
1,200 strings; without the loop over each object's field table and the call per string, its coercion takes 0.41 ms
instead of 0.59. (graphql-jit compiles queries and their variables' coercion to JavaScript source the same way.)

The source is built only from the schema, once per input type: field names are GraphQL names, quoted with repr, and
every other value the function needs is a name in its namespace, never text.
"""
from typing import Any, Callable, NamedTuple, Optional

from graphql import GraphQLInputObjectType
from graphql.pyutils import Undefined

from service.interface import is_unicode


# The test of a String value (`member`): a str of at most `most` characters (its field's limit), holding characters
# only (no lone surrogate), as check_values requires. Inlined in an object's coercion; the body of text_coercer.
TEXT_TEST = "member.__class__ is str and len(member) <= {most:d} and (member.isascii() or is_unicode(member))"


class Refused(Exception):
    """The value is not one this path coerces; run the request the ordinary way."""


class ObjectField(NamedTuple):
    name: str
    out_name: str
    coerce: Callable  # the coercion of a value that is not null
    non_null: bool  # a null is refused
    required: bool  # leaving the field out is refused
    default: Any  # the value of a field left out (Undefined: none)
    most: Optional[int]  # a String field: the most characters it holds (checked inline); None: another type


def object_coercer(type_name, fields, out_type):
    """The coercion of a value of the input object type `type_name` with `fields` (ObjectField): what graphql-core's
    coerce_input_value answers for it, its explicit null members left out, or Refused."""
    namespace = {"Refused": Refused, "Undefined": Undefined, "is_unicode": is_unicode, "out_type": out_type}
    lines = [f"def coerce_{type_name}(value):",
             "    if value is None or value is Undefined:",
             "        return None",
             "    if not isinstance(value, dict):",
             "        raise Refused",
             "    coerced, found = {}, 0"]
    for index, field in enumerate(fields):
        lines += _field_lines(index, field, namespace)
    lines += ["    if found != len(value):",
              "        raise Refused  # a field the type does not have",
              "    return coerced" if out_type is GraphQLInputObjectType.out_type else "    return out_type(coerced)"]
    exec("\n".join(lines), namespace)  # noqa: S102 (source made from the schema alone, see the module's doc)
    return namespace[f"coerce_{type_name}"]


def text_coercer(most):
    """The coercion of a String value that is not an input object's field (a list's item): the value when it passes
    TEXT_TEST, else Refused."""
    namespace = {"Refused": Refused, "is_unicode": is_unicode}
    exec(f"def coerce_text(member):\n    if {TEXT_TEST.format(most=most)}:\n        return member\n    raise Refused",
         namespace)  # noqa: S102 (an integer is all that varies)
    return namespace["coerce_text"]


def _field_lines(index, field, namespace):
    key, out = repr(field.name), repr(field.out_name)
    lines = [f"    if {key} in value:",
             "        found += 1",
             f"        member = value[{key}]",
             "        if member is None or member is Undefined:",
             # An explicit null is refused for a non-null field, else left out as if the field were omitted.
             "            raise Refused" if field.non_null else "            pass"]
    if field.most is not None:
        lines += [f"        elif {TEXT_TEST.format(most=field.most)}:",
                  f"            coerced[{out}] = member",
                  "        else:",
                  "            raise Refused"]
    else:
        namespace[f"coerce_{index}"] = field.coerce
        lines += ["        else:",
                  f"            member = coerce_{index}(member)",
                  "            if member is not None:",
                  f"                coerced[{out}] = member"]
    if field.required:
        lines += ["    else:",
                  "        raise Refused"]
    elif field.default is not Undefined:
        namespace[f"default_{index}"] = field.default
        lines += ["    else:",
                  f"        coerced[{out}] = default_{index}"]
    return lines
