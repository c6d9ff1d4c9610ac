"""The preview pages in a browser (test_pages_browser.py, test_pages_accessibility.py): a server seeded with what
the pages must show well (the docs' complete example with real media, markup in names, a product of long names whose
dependencies span columns, stations with long ids) and signing in as a person does."""
import re

import requests
from playwright.sync_api import expect

from support.example import CLIP, IMAGE, example_bodies
from support.servers import BROWSER_WAIT_MS
from support.tokens import HEADERS, TOKEN

HOSTILE = "<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\">"
# A product whose names are longer than a node's line, and whose printed parts feed processes two and three columns
# on (dependencies that pass over the processes between).
MICROSCOPE = "openflexure"
MICROSCOPE_PROCESSES = {
    "of_print": "Print the parts in PLA",
    "of_actuator": "OpenFlexure actuator assembly and calibration, all three axes",
    "of_optics": "OpenFlexure optics module assembly with the camera board",
    "of_body": "OpenFlexure main body with feet and actuators fitted",
    "of_final": "OpenFlexure microscope final inspection and packaging",
}
MICROSCOPE_DEPENDENCIES = [("of_print", "of_actuator", 1), ("of_actuator", "of_body", 3), ("of_body", "of_final", 1),
                           ("of_optics", "of_final", 1), ("of_print", "of_optics", 1), ("of_print", "of_final", 2)]
# Station ids long enough to wrap in the list on a tablet: they may break after an underscore only.
LONG_STATION_IDS = ("assembly_cell_north_gearbox_housing_fixture", "press_line_4_station_torque_check")


def upload(url, data, destination, name):
    response = requests.post(f"{url}/uploads", headers=HEADERS, timeout=30, data={"destinationId": destination},
                             files={"file": (name, data)})
    assert response.status_code == 201, response.text
    return response.json()["path"]


def graphql(url, body):
    response = requests.post(f"{url}/graph/v2", headers=HEADERS, json=body, timeout=30)
    assert response.status_code == 200 and "errors" not in response.json(), response.text
    return response.json()


def create(url, kind, value):
    """`kind`Create (process, product, station) of one input."""
    name = kind.title()
    graphql(url, {"query": f"mutation($v: {name}Input!) {{ {kind}Create(input: {{{kind}: $v}}) }}",
                  "variables": {"v": value}})


def seed(url):
    """Everything the pages show in these tests; returns the video's path."""
    image = upload(url, IMAGE, "stepImage", "gearbox housing.png")
    video = upload(url, CLIP.read_bytes(), "stepVideo", "clip.mp4")
    for body in example_bodies(image, video):
        graphql(url, body)
    create(url, "process", {"id": "hostile_names", "name": HOSTILE, "description": HOSTILE, "steps": [
        {"id": "s_1", "name": HOSTILE, "instructionText": {"text": HOSTILE}, "notes": [{"text": HOSTILE}],
         "actions": [{"id": "a_1", "description": {"text": HOSTILE}}]}]})
    for identifier, name in MICROSCOPE_PROCESSES.items():
        create(url, "process", {"id": identifier, "name": name, "steps": [{"id": "step_1"}]})
    create(url, "product", {"id": MICROSCOPE, "name": "OpenFlexure microscope", "finalProcessId": "of_final",
                            "dependencies": [{"upstreamProcessId": up, "processId": down, "quantity": quantity}
                                             for up, down, quantity in MICROSCOPE_DEPENDENCIES]})
    for identifier in LONG_STATION_IDS:
        create(url, "station", {"id": identifier, "name": f"Station {identifier.replace('_', ' ')} by line 4"})
    return video


def sign_in(page, path="/view/processes"):
    """What a person does: open a page, land on the login, paste the token, submit, come back."""
    page.goto(path)
    expect(page).to_have_url(re.compile(r"/view/login\?next="), timeout=BROWSER_WAIT_MS)
    page.get_by_label("API token").fill(TOKEN)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(re.compile(re.escape(path) + "$"), timeout=BROWSER_WAIT_MS)
