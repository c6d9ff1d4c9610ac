"""Stations: id and name, created or replaced whole."""
from service.interface.kinds import STATIONS
from service.domain.validation import Problems
from service.storage.contract import NOBODY


def upsert_station(repo, org, data, *, if_revision=None, dry_run=False, restored=False, by=NOBODY):
    """Check a StationInput dict and store it whole, as a change `by` made (an Attribution); return what the store did
    (service.storage.contract.Saved)."""
    check_station(data)
    return repo.documents.save(org, STATIONS, data["id"], {"id": data["id"], "name": data["name"]}, restored=restored,
                               if_revision=if_revision, dry_run=dry_run, by=by)


def check_station(station):
    """Raise InvalidInput listing every rule the station breaks."""
    problems = Problems()
    problems.check_values("station", station)
    problems.check_id("station.id", station.get("id"))
    problems.check_name("station.name", station.get("name"))
    problems.raise_if_any()
