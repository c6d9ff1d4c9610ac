"""The docs' complete example (docs/api.md, "A complete example": a process with media, a second process and a
product), as the page shows it and with real media a browser can show: the page's image is the 8-byte PNG signature,
which no browser decodes, and it has no video."""
import json
import re

from support.media import real_png
from support.paths import DATA, REPOSITORY

API_PAGE = REPOSITORY / "docs" / "api.md"
# The image path the page's requests use; the service makes another name for each upload.
PAGE_IMAGE_PATH = "/api/v1/images/3f9a0c1d2e4b5a69-gearbox_housing.png"
CLIP = DATA / "media" / "clip.mp4"
IMAGE = real_png(320, 200, (70, 130, 180))
# The objects of the example, in the order they are created.
REQUESTS = ("process-create", "process-create-2", "product-create")
STATION = {"query": "mutation($input: StationCreateInput!) { stationCreate(input: $input) }",
           "variables": {"input": {"station": {"id": "st_1", "name": "Press 1"}}}}


def example_request(name):
    """The body of the page's `<!-- example request: NAME -->` block."""
    text = API_PAGE.read_text()
    found = re.search(r"<!-- example request: %s -->\s*```json\n(.*?)^```" % re.escape(name), text, re.S | re.M)
    assert found, f"{API_PAGE} has no example request {name!r}"
    return json.loads(found.group(1))


def example_bodies(image_path, video_path):
    """The GraphQL bodies that create the example's station, processes and product, with `image_path` in place of
    the page's image and `video_path` as the video of the assembly's second step (the page has none)."""
    bodies = [STATION]
    for name in REQUESTS:
        body = json.loads(json.dumps(example_request(name)).replace(PAGE_IMAGE_PATH, image_path))
        if name == "process-create":
            body["variables"]["input"]["process"]["steps"][1]["video"] = {"path": video_path, "title": "Sealing"}
        bodies.append(body)
    return bodies


def example_processes():
    """The example's processes as the page creates them: [(id, name, [step names in order])]."""
    found = []
    for name in REQUESTS[:2]:
        process = example_request(name)["variables"]["input"]["process"]
        found.append((process["id"], process["name"], [step["name"] for step in process["steps"]]))
    return found


def example_product():
    return example_request("product-create")["variables"]["input"]["product"]
