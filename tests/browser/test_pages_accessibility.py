"""Every preview page through axe-core (npm, tests/js) in headless Chromium against real gunicorn, at a tablet's and a
desktop's width: no serious or critical violation of the WCAG rules axe checks. On the file backend only: a page's
HTML is the same on both (one template a page, filled from the domain's reads; tests/web/pages read them on both).
The pages run no script of their own (their CSP allows none), so the test's browser context bypasses the CSP to
inject axe."""
import pytest

from support.pages import MICROSCOPE, seed, sign_in

pytestmark = pytest.mark.file_backend_only("the pages' markup does not depend on the backend")

WIDTHS = (768, 1440)
PAGES = ("/", "/view/processes", "/view/processes/gearbox_assembly",
         "/view/processes/gearbox_assembly/history", "/view/products", "/view/products/gb_200",
         f"/view/products/{MICROSCOPE}", "/view/stations")
SERIOUS = ("serious", "critical")
# axe's violations, each with the first few elements it found them on.
VIOLATIONS = """async () => (await axe.run(document, {resultTypes: ['violations']})).violations.map(found => ({
    id: found.id, impact: found.impact, help: found.help,
    targets: found.nodes.slice(0, 3).map(node => node.target.join(' '))}))"""


@pytest.fixture(scope="module")
def server(tmp_path_factory, backend, start_module_gunicorn):
    started = start_module_gunicorn(tmp_path_factory.mktemp("accessibility-data"), workers=2, backend=backend)
    seed(started.url)
    return started


def violations(page, axe, path):
    page.goto(path)
    page.add_script_tag(path=axe)
    return page.evaluate(VIOLATIONS)


@pytest.mark.parametrize("width", WIDTHS)
def test_every_page_has_no_serious_accessibility_violation(server, browser, js_packages, width):
    axe = js_packages / "node_modules" / "axe-core" / "axe.min.js"
    context = browser.new_context(viewport={"width": width, "height": 900}, base_url=server.url, bypass_csp=True)
    try:
        page = context.new_page()
        found = {"/view/login": violations(page, axe, "/view/login")}
        sign_in(page)
        found.update((path, violations(page, axe, path)) for path in PAGES)
    finally:
        context.close()
    serious = {path: [each for each in listed if each["impact"] in SERIOUS] for path, listed in found.items()}
    assert serious == {path: [] for path in found}
