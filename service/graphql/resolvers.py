"""Resolvers: take the repository and org from the context, call one domain function."""
from ariadne import MutationType, ObjectType, QueryType

from service.domain.processes import upsert_process
from service.domain.products import upsert_product
from service.domain.reads import PROCESSES, PRODUCTS, STATIONS, get_object, list_objects
from service.domain.stations import upsert_station

query = QueryType()
mutation = MutationType()
step = ObjectType("Step")


def _upsert(function, key):
    def resolve(_, info, input):
        _, created = function(info.context["repo"], info.context["org"], input[key])
        return "CREATED" if created else "UPDATED"

    return resolve


def _get(kind):
    def resolve(_, info, id):
        return get_object(info.context["repo"], info.context["org"], kind, id)

    return resolve


def _list(kind):
    def resolve(_, info, first, after=None):
        return list_objects(info.context["repo"], info.context["org"], kind, first, after)

    return resolve


mutation.set_field("processCreate", _upsert(upsert_process, "process"))
mutation.set_field("productCreate", _upsert(upsert_product, "product"))
mutation.set_field("stationCreate", _upsert(upsert_station, "station"))
for single, plural, kind in (("process", "processes", PROCESSES), ("product", "products", PRODUCTS),
                             ("station", "stations", STATIONS)):
    query.set_field(single, _get(kind))
    query.set_field(plural, _list(kind))


@step.field("torqueGroups")
def resolve_torque_groups(stored_step, _info):
    """Stored groups hold action ids; hand back the actions themselves."""
    by_id = {action["id"]: action for action in stored_step.get("actions") or []}
    return [{"tool": group["tool"], "actions": [by_id[i] for i in group["actionIds"]]}
            for group in stored_step.get("torqueGroups") or []]


BINDABLES = [query, mutation, step]
