"""The README's complete example, run as written against the real server: each request body it shows gets the answer
it shows. The README is the only API document users have, so it must stay true."""
import json
import re
from pathlib import Path

import pytest
import requests

from service.domain.uploads import media_name
from support.tokens import HEADERS

README = Path(__file__).resolve().parents[1] / "README.md"
EXAMPLE_BLOCK = re.compile(r"<!-- example (request|answer): ([\w-]+) -->\n```json\n(.*?)\n```", re.S)
# The media path the README shows; the real one has another random prefix.
SHOWN_IMAGE = re.compile(r"/api/v1/images/[0-9a-f]{16}-gearbox_housing\.png")


def readme_examples():
    """[(name, request body, answer)] in the order the README gives them."""
    found = {}
    for kind, name, text in EXAMPLE_BLOCK.findall(README.read_text()):
        found.setdefault(name, {})[kind] = text
    assert found, "the README has no marked example blocks"
    for name, pair in found.items():
        assert set(pair) == {"request", "answer"}, f"example {name} lacks its request or its answer"
    return [(name, pair["request"], pair["answer"]) for name, pair in found.items()]


@pytest.fixture(scope="module")
def server(tmp_path_factory, backend, start_module_gunicorn):
    return start_module_gunicorn(tmp_path_factory.mktemp("readme") / "data", workers=1, backend=backend)


def test_the_readme_example_answers_as_shown(server):
    headers = HEADERS
    # Step 1 of the example: the curl upload of "gearbox housing.png".
    png = b"\x89PNG\r\n\x1a\n" + bytes(2048)
    upload = requests.post(f"{server.url}/uploads", headers=headers, data={"destinationId": "stepImage"},
                           files={"file": ("gearbox housing.png", png)}, timeout=30)
    assert upload.status_code == 201
    image_path = upload.json()["path"]
    assert SHOWN_IMAGE.fullmatch(image_path)
    assert image_path.endswith(media_name("gearbox housing.png", "png", "0" * 16).removeprefix("0" * 16))

    examples = readme_examples()
    assert [name for name, _, _ in examples] == [
        "process-create", "process-read", "process-create-2", "product-create", "product-read", "process-refused"]
    for name, request_text, answer_text in examples:
        body = json.loads(SHOWN_IMAGE.sub(image_path, request_text))
        answer = requests.post(f"{server.url}/graph/v2", headers=headers, json=body, timeout=30)
        assert answer.status_code == 200, (name, answer.text)
        assert answer.json() == json.loads(SHOWN_IMAGE.sub(image_path, answer_text)), name

    # Nothing of the refused process was stored.
    refused = requests.post(f"{server.url}/graph/v2", headers=headers, timeout=30,
                            json={"query": '{ processes { id } }'}).json()
    assert refused == {"data": {"processes": [{"id": "gearbox_assembly"}, {"id": "gearbox_test"}]}}
