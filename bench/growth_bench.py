"""How time grows with the work (run by hand, not a test).

In-process (Flask test client, a real data directory, every document fsynced), each figure the median of
`--repeat` measurements:
- processCreate of a process of 10, 100 and 1000 steps (bench/payload.py, 5 actions a step);
- reading one page (`processes(first: 100)`, with steps, actions and BOM) with 100, 1,000 and 10,000 processes
  stored;
- start-up: a fresh Python process that imports the service, runs create_app() and answers its first request
  (the same page), with 100, 1,000 and 10,000 processes stored.
Prints each figure, its ratio to the figure of the next smaller size and the ratio of the sizes; a figure whose ratio exceeds the
size ratio by more than the noise allowance is reported as SUPER-LINEAR. That a page opens only its own
documents is asserted in tests/storage/test_storage_pages.py, not timed here.

    .venv/bin/python bench/growth_bench.py [--repeat 5]
"""
import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from payload import MUTATION, process  # noqa: E402 (bench/ is not a package)

from service import create_app  # noqa: E402
from service.domain.input_form import normalised  # noqa: E402
from service.domain.processes import with_defaults  # noqa: E402
from service.interface.kinds import PROCESSES  # noqa: E402
from service.storage import get_repository  # noqa: E402

TOKEN = "bench-token-0001"
HEADERS = {"x-service-api-org": TOKEN}
PAGE_QUERY = "{ processes(first: 100) { id name steps { id actions { id kind torque } } billOfMaterials { quantity } } }"
# Timings on a shared machine wobble; a ratio this much above the size ratio is growth, not noise.
NOISE = 1.5
STARTUP = """
import sys, time
start = time.perf_counter()
from service import create_app
app = create_app({"DATA_DIR": sys.argv[1], "API_TOKENS": "default:%s"})
response = app.test_client().post("/graph/v2", json={"query": %r}, headers={"x-service-api-org": "%s"})
assert response.status_code == 200 and len(response.get_json()["data"]["processes"]) == 100, response.data[:300]
print(time.perf_counter() - start)
""" % (TOKEN, PAGE_QUERY, TOKEN)


def app_for(data_dir):
    return create_app({"DATA_DIR": str(data_dir), "API_TOKENS": f"default:{TOKEN}"})


def median_seconds(function, repeat):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def process_create(temp, repeat):
    """{steps: seconds} for processCreate of processes of 10, 100 and 1000 steps (updates of one id)."""
    client = app_for(temp / "create").test_client()
    figures = {}
    for steps in (10, 100, 1000):
        body = orjson.dumps({"query": MUTATION, "variables": {"input": {"process": process(f"grow_{steps}", steps)}}})

        def create():
            response = client.post("/graph/v2", data=body, content_type="application/json", headers=HEADERS)
            assert response.status_code == 200 and "errors" not in response.get_json(), response.data[:300]

        create()  # the first stores it; the timed ones update it, as the GraphQL benchmark does
        figures[steps] = median_seconds(create, repeat)
    return figures


def store_processes(data_dir, count):
    """Store `count` processes of 2 steps, written as upsert writes them (without one fsync each, to save time)."""
    repo = get_repository(app_for(data_dir))
    template = repo.documents.save("default", PROCESSES, "template",
                                   normalised(with_defaults(process("template", 2)))).document
    directory = repo.documents._directory("default", PROCESSES)
    text = orjson.dumps(template)
    for number in range(count):
        identifier = f"proc_{number:06d}"
        (directory / f"{identifier}.json").write_bytes(text.replace(b'"template"', f'"{identifier}"'.encode(), 1))
    (directory / "template.json").unlink()
    shutil.rmtree(directory / ".history")


def page_and_startup(temp, repeat):
    """({stored: page seconds}, {stored: start-up seconds})."""
    pages, startups = {}, {}
    for stored in (100, 1000, 10000):
        data_dir = temp / f"stored-{stored}"
        store_processes(data_dir, stored)
        client = app_for(data_dir).test_client()

        def read_page():
            response = client.post("/graph/v2", json={"query": PAGE_QUERY}, headers=HEADERS)
            assert response.status_code == 200 and len(response.get_json()["data"]["processes"]) == 100

        read_page()
        pages[stored] = median_seconds(read_page, repeat)
        startups[stored] = statistics.median(
            float(subprocess.run([sys.executable, "-c", STARTUP, str(data_dir)], check=True, capture_output=True,
                                 text=True).stdout) for _ in range(repeat))
    return pages, startups


def show(title, unit, figures):
    """Print figures with ratios to the previous size; flag growth faster than linear in the size."""
    sizes = sorted(figures)
    print(title)
    for previous, size in zip([None, *sizes], sizes):
        line = f"  {size:>6} {unit}: {figures[size] * 1000:9.1f} ms"
        if previous is not None:
            ratio, size_ratio = figures[size] / figures[previous], size / previous
            verdict = "SUPER-LINEAR" if ratio > size_ratio * NOISE else "ok"
            line += f"   x{ratio:6.2f} for x{size_ratio:g} {unit}   {verdict}"
        print(line)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5, help="measurements per figure (the median is shown)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="wis-bench-") as temp:
        temp = Path(temp)
        show("processCreate (its input: the steps)", "steps", process_create(temp, args.repeat))
        pages, startups = page_and_startup(temp, args.repeat)
        show("one page of 100 processes (its input, the page, is fixed: it opens 100 documents whatever is stored; "
             "what grows with the number stored is listing the names)", "stored", pages)
        show("start-up + first page (lists the names once)", "stored", startups)


if __name__ == "__main__":
    main()
