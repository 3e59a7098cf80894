"""The dashboard in a real browser: Debian's headless Chromium, driven by
Playwright (no browser download). `tests/ui.rs` starts the daemon over a
seeded catalog and runs this with its address; any failed check exits 1.

Usage: suite.py BASE_URL OUT_DIR CHROMIUM PLAN_NAME
"""

import csv
import io
import json
import sys
from urllib.parse import parse_qs, urlparse

from playwright.sync_api import sync_playwright

# Chromium as root, with no network beyond loopback: without these it keeps
# trying to reach Google's hosts and logs the refusals.
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


class Failed(Exception):
    pass


def check(ok, message):
    if not ok:
        raise Failed(message)


def wait_until(page, expression, seconds=30):
    """Polls `expression` until it holds. Not page.wait_for_function: its
    polls evaluate the expression inside the page, which the dashboard's
    Content-Security-Policy (no 'unsafe-eval') refuses whenever the first
    look is false."""
    for _ in range(seconds * 10):
        if page.evaluate(expression):
            return
        page.wait_for_timeout(100)
    check(False, f"still false after {seconds} s: {expression}")


def canvas_has_data(page, selector):
    """Whether the chart under `selector` drew: a canvas with some pixel set."""
    return page.evaluate(
        """(selector) => {
            const canvas = document.querySelector(selector + ' canvas');
            if (!canvas || canvas.width === 0 || canvas.height === 0) return false;
            const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
            for (let i = 3; i < data.length; i += 4) { if (data[i] !== 0) return true; }
            return false;
        }""",
        selector,
    )


def table_rows(page):
    return page.locator("#prices tbody tr").count()


def main():
    base, out, chromium, plan_name = sys.argv[1:5]
    report = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900}, accept_downloads=True)
        problems = []
        page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        page.on("response", lambda r: problems.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
        # A download ends its request early; that is not a failure.
        page.on("requestfailed", lambda r: None if "format=" in r.url else problems.append(f"request failed: {r.url}"))

        def visit(path, shot):
            page.goto(base + path)
            page.wait_for_load_state("networkidle")
            page.screenshot(path=f"{out}/{shot}.png", full_page=True)
            check(not problems, f"{path}: {problems}")

        # The overview links to every other page.
        visit("/", "overview")
        for link in ["/ui/prices", "/ui/spot", "/ui/plans/latest", "/ui/jobs", "/ui/spend", "/ui/usage", "/ui/commitments", "/ui/alerts"]:
            check(page.locator(f"header nav a[href='{link}']").count() == 1, f"no link to {link}")
        check(page.locator(".card").count() >= 1, "no price cards")

        # Prices: a filter changes the URL and the rows; back restores both.
        visit("/ui/prices", "prices")
        all_rows = table_rows(page)
        check(all_rows >= 4, f"{all_rows} rows")
        page.fill("input[name=gpu]", "H100")
        page.click("form.filters button[type=submit]")
        page.wait_for_load_state("networkidle")
        query = parse_qs(urlparse(page.url).query)
        check(query.get("gpu") == ["H100"], f"the filter is not in the URL: {page.url}")
        filtered = table_rows(page)
        check(0 < filtered < all_rows, f"{filtered} rows after filtering, {all_rows} before")
        page.click("#prices thead a >> text=Kind")
        page.wait_for_load_state("networkidle")
        check("sort=price_kind" in page.url, f"sorting is not in the URL: {page.url}")
        page.go_back()
        page.go_back()
        page.wait_for_load_state("networkidle")
        check("gpu=" not in page.url and table_rows(page) == all_rows, f"back did not restore: {page.url}")

        # The CSV export holds the rows shown.
        with page.expect_download() as download:
            page.click("p.export a >> text=CSV")
        text = open(download.value.path(), encoding="utf-8").read()
        exported = list(csv.reader(io.StringIO(text)))
        check(len(exported) - 1 == all_rows, f"CSV has {len(exported) - 1} rows, the table {all_rows}")
        download.value.save_as(f"{out}/prices.csv")

        visit("/ui/spot?instance=p5.48xlarge&region=us-east-1&range=7d", "spot")
        check(canvas_has_data(page, "#spot-chart"), "the spot chart did not draw")

        visit("/ui/plans/latest?name=" + plan_name, "plan")
        check(canvas_has_data(page, "#plan-chart"), "the plan chart did not draw")

        # A new plan from pasted demand, through the API's write rules.
        page.fill("#plan-form input[name=name]", "from-browser")
        page.fill("#plan-form input[name=gpu]", "H100")
        page.fill("#plan-form textarea[name=demand]", "\n".join(["8"] * 12 + ["16"] * 12))
        page.click("#plan-form button[type=submit]")
        page.wait_for_url("**/ui/plans/latest?name=from-browser")
        page.wait_for_load_state("networkidle")
        check(canvas_has_data(page, "#plan-chart"), "the new plan's chart did not draw")
        check(not problems, f"plan form: {problems}")

        # A job: the form goes to POST /v1/jobs and the answer is drawn in
        # the page (the plan's rows and the cost against finish time).
        visit("/ui/jobs", "jobs")
        page.fill("#job-form input[name=work]", "40")
        page.fill("#job-form input[name=deadline_hours]", "24")
        page.click("#job-form button[type=submit]")
        page.wait_for_selector("#job-answer:not([hidden])")
        page.wait_for_load_state("networkidle")
        summary = page.inner_text("#job-summary")
        check(summary.startswith("Optimal: $"), f"job summary: {summary}")
        check(page.locator("#job-plan tbody tr").count() >= 1, "the job's plan has no rows")
        check(canvas_has_data(page, "#job-frontier-chart"), "the job's frontier did not draw")
        page.screenshot(path=f"{out}/jobs-answer.png", full_page=True)
        # A budget no plan meets is answered, naming what binds.
        page.fill("#job-form input[name=budget_usd]", "0.01")
        page.click("#job-form button[type=submit]")
        # Until the answer comes (or an error replaces "Planning…" in the status).
        wait_until(page, "document.getElementById('job-summary').textContent.startsWith('Infeasible') || "
                         "(document.getElementById('job-status').textContent.length > 1 && "
                         "!document.getElementById('job-status').textContent.startsWith('Planning'))")
        summary = page.inner_text("#job-summary")
        check(summary.startswith("Infeasible (budget): the cheapest plan by the deadline costs $"),
              f"job summary: {summary}; status: {page.inner_text('#job-status')}")
        check(not problems, f"job form: {problems}")

        visit("/ui/alerts", "alerts")
        check(page.locator("text=cheap-h100").count() >= 1, "the rule is not listed")

        # Spend: the chart draws, the CSV holds the table's rows, and the
        # window's links move the URL; back restores it.
        visit("/ui/spend", "spend")
        check(canvas_has_data(page, "#spend-chart"), "the spend chart did not draw")
        spend_rows = page.locator("#spend tbody tr").count()
        check(spend_rows >= 3, f"{spend_rows} spend rows")
        with page.expect_download() as download:
            page.click("p.export a >> text=CSV")
        spend_csv = list(csv.reader(io.StringIO(open(download.value.path(), encoding="utf-8").read())))
        check(len(spend_csv) - 1 == spend_rows, f"spend CSV has {len(spend_csv) - 1} rows, the table {spend_rows}")
        start_url = page.url
        page.click("p.ranges a >> text=by month")
        page.wait_for_load_state("networkidle")
        check("by=month" in page.url, f"by month is not in the URL: {page.url}")
        check(canvas_has_data(page, "#spend-chart"), "the monthly spend chart did not draw")
        page.click("p.ranges a >> text=earlier")
        page.wait_for_load_state("networkidle")
        check("since=2026-09" in page.url, f"earlier did not move the window: {page.url}")
        page.go_back()
        page.go_back()
        page.wait_for_load_state("networkidle")
        check(page.url == start_url and page.locator("#spend tbody tr").count() == spend_rows, f"back did not restore: {page.url}")
        check(not problems, f"spend: {problems}")

        visit("/ui/usage", "usage")
        check(canvas_has_data(page, "#usage-chart"), "the usage chart did not draw")
        page.click("#usage tbody a >> text=ml")
        page.wait_for_load_state("networkidle")
        check("team=ml" in page.url and page.locator("#usage tbody tr").count() == 1, f"the team link: {page.url}")

        visit("/ui/commitments", "commitments")
        check(canvas_has_data(page, "#commitments-chart"), "the utilization chart did not draw")
        check(page.locator("#commitments tbody tr").count() == 1, "the reservation is not listed")

        # Narrow window: a long error or id wraps instead of widening the page.
        page.set_viewport_size({"width": 700, "height": 900})
        visit("/", "overview-narrow")
        wide = page.evaluate("document.documentElement.scrollWidth")
        check(wide <= 720, f"the overview is {wide}px wide in a 700px window")

        report = {"pages": 10, "rows": all_rows, "filtered_rows": filtered, "csv_rows": len(exported) - 1,
                  "spend_rows": spend_rows}
        browser.close()
    print(json.dumps(report))


if __name__ == "__main__":
    try:
        main()
    except Failed as e:
        print(f"browser suite failed: {e}", file=sys.stderr)
        sys.exit(1)
