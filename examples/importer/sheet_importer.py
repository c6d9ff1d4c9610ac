"""Import legacy work sheets into the work-instruction service.

A sheet is one YAML or JSON file describing one process as the legacy system exported it:

    id: weld_frame
    title: Weld the frame
    station: {id: cell_3, name: Welding cell 3}
    steps:
      - title: Clamp the rails
        text: Clamp both rails to the fixture.
        picture: pictures/clamp.png

`import_sheets(folder, client)` uploads every picture once (however many steps show it), creates each station once,
then each process, and returns what it did. `client` is a service.client.Client.
"""
import json
from pathlib import Path

import yaml

SUFFIXES = {".yaml": yaml.safe_load, ".yml": yaml.safe_load, ".json": json.loads}


def read_sheets(folder):
    """Every sheet of a folder, in file-name order."""
    return [SUFFIXES[path.suffix](path.read_text(encoding="utf-8"))
            for path in sorted(Path(folder).iterdir()) if path.suffix in SUFFIXES]


def to_process(sheet, media_paths):
    """The service's process for a sheet; `media_paths` maps each picture file to its media path."""
    steps = []
    for number, step in enumerate(sheet["steps"], 1):
        converted = {"id": f"{sheet['id']}_step_{number}", "name": step["title"],
                     "instructionText": {"text": step.get("text", "")}}
        if step.get("picture"):
            converted["primaryImage"] = {"path": media_paths[step["picture"]]}
        steps.append(converted)
    return {"id": sheet["id"], "name": sheet["title"], "steps": steps}


def import_sheets(folder, client):
    """Import every sheet of `folder`; return {"pictures": {file: media path}, "stations": [...], "processes": [...]}."""
    folder = Path(folder)
    sheets = read_sheets(folder)
    pictures = {}
    for sheet in sheets:
        for step in sheet["steps"]:
            picture = step.get("picture")
            if picture and picture not in pictures:
                pictures[picture] = client.upload(folder / picture)
    stations = {}
    for sheet in sheets:
        station = sheet.get("station")
        if station and station["id"] not in stations:
            client.create_station({"id": station["id"], "name": station["name"]})
            stations[station["id"]] = station
    processes = []
    for sheet in sheets:
        client.create_process(to_process(sheet, pictures))
        processes.append(sheet["id"])
    return {"pictures": pictures, "stations": list(stations), "processes": processes}
