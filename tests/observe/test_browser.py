"""Real Chromium against the UI while a real pipeline runs in this process (shared Spark)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakefeed.observe.server import start_server
from lakefeed.observe.tail import LiveMonitor

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TOKEN = "ui-test-token-4d1f"
PIPELINE = Path(__file__).with_name("live_pipeline.py")
#: waits on the pipeline: its first batch needs Python workers, slow to start on a busy machine
FIRST_BATCH_S = 420
PIPELINE_WAIT = 240_000  # ms, for what the page should show once batches flow


@pytest.fixture
def browser() -> Iterator:
    if not CHROMIUM.exists():
        pytest.skip("Debian chromium is not installed (./dev setup installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def live_pipeline(spark, lakehouse) -> Iterator:
    """The test pipeline running continuously in a background thread until the test ends."""
    from lakefeed import load_pipeline
    from lakefeed.runtime.runner import PipelineRunner, RunOptions

    pipeline = load_pipeline([PIPELINE], name="live_iot")
    # restarts ride out transient worker start-up failures on a busy machine; the failing
    # flow's expectation error is permanent, so it fails at once
    options = RunOptions(
        mode="continuous",
        trigger_interval="1 second",
        max_restarts=8,
        restart_backoff=0.5,
        stop_timeout=5,  # the test ends here: no need to let a running batch finish
    )
    runner = PipelineRunner(pipeline, lakehouse, spark, options)
    crashed: list[BaseException] = []

    def run() -> None:
        # Python data sources (format "delta") resolve through the JVM thread's active session,
        # which a new Python thread (a new py4j JVM thread) does not have.
        spark._jvm.SparkSession.setActiveSession(spark._jsparkSession)
        try:
            runner.run()
        except BaseException as error:  # reported by the test, not lost in the thread
            crashed.append(error)

    thread = threading.Thread(target=run, name="live-pipeline", daemon=True)
    thread.start()
    try:
        first_batch(lakehouse, "readings", thread)
        yield lakehouse
    finally:
        runner.request_stop("test finished")
        thread.join(120)
    assert not thread.is_alive(), "the pipeline did not stop"
    assert not crashed, f"the pipeline run crashed: {crashed[0]!r}"


def first_batch(lakehouse, flow: str, thread: threading.Thread) -> None:
    """Wait for the flow's first committed batch (before Chromium adds to the machine's load)."""
    live = LiveMonitor(lakehouse.event_log_path, min_interval=0)
    deadline = time.monotonic() + FIRST_BATCH_S
    while time.monotonic() < deadline and thread.is_alive():
        pipeline = live.refresh().pipelines.get("live_iot")
        status = pipeline.flows.get(flow) if pipeline else None
        if status is not None and status.batches:
            return
        if status is not None and status.state == "failed":
            pytest.fail(f"{flow} failed before its first batch: {status.error}")
        time.sleep(1)
    pytest.fail(f"no batch of {flow} within {FIRST_BATCH_S} s")


def cell(page, flow: str, field: str) -> str:
    return page.locator(f'#flows tr[data-flow="{flow}"] td[data-field="{field}"]').inner_text()


def test_ui_follows_a_running_pipeline(live_pipeline, browser, artifacts):
    server = start_server(live_pipeline, port=0, token=TOKEN)
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(server.url + f"?token={TOKEN}&table=readings&time=event_time&measure=temperature")

        # the graph: the tables with their states, and (after a batch) the source they read
        running = '.node[data-name="readings"][data-state="running"]'
        page.wait_for_selector(running, timeout=PIPELINE_WAIT)
        page.wait_for_selector('.node[data-kind="source"]', timeout=PIPELINE_WAIT)
        assert page.locator('.node[data-name="battery_check"]').count() == 1

        # the failed flow shows its error in the graph, the flow table and a banner
        page.wait_for_selector('.flow-error[data-flow="battery_check"]', timeout=PIPELINE_WAIT)
        banner = page.locator('.flow-error[data-flow="battery_check"]').inner_text()
        assert "battery_above_100" in banner
        assert page.locator('.node[data-name="battery_check"]').get_attribute("data-state") == (
            "failed"
        )

        # figures move between two reads while batches commit
        first = cell(page, "readings", "batch")
        page.wait_for_function(
            """([flow, before]) => {
                const td = document.querySelector(
                    `#flows tr[data-flow="${flow}"] td[data-field="batch"]`);
                return td && td.textContent !== before;
            }""",
            arg=["readings", first],
            timeout=PIPELINE_WAIT,
        )
        assert cell(page, "readings", "input_rps") != "–"
        assert page.locator('#flow-charts .chart-card[data-chart="rates"] canvas').count() == 1

        # expectation counts for the quarantining table
        page.wait_for_selector('#quality tr[data-table="readings"][data-rule="temp_in_range"]')

        # a click on the stateful flow reads its state while it runs (a batch writing the
        # checkpoint at that moment gives the documented retry message instead)
        page.click('#flows tr[data-flow="readings"]')
        page.wait_for_selector(
            "#flow-state .operator, #state-error:not([hidden])", timeout=PIPELINE_WAIT
        )
        if page.locator("#state-error").is_hidden():
            assert page.locator("#flow-state .operator").count() == 1
            assert "keys" in page.locator("#flow-state").inner_text()
        else:
            assert "cannot be read now" in page.locator("#state-error").inner_text()

        # the live table view: average temperature per 10 seconds, growing as batches commit
        page.select_option("#chart-bucket", "10")
        page.wait_for_function(
            "() => Number(document.querySelector('#table-chart').dataset.points || 0) > 1",
            timeout=PIPELINE_WAIT,
        )
        assert page.locator("#chart-measure").input_value() == "temperature"
        assert page.locator("#table-rows tbody tr").count() > 0

        time.sleep(2)  # one more refresh so the screenshot shows moving charts
        page.screenshot(path=str(artifacts / "ui-main.png"), full_page=True)
        assert errors == []
    finally:
        server.stop()


def test_token_is_enforced_in_the_browser(lakehouse, browser):
    server = start_server(lakehouse, port=0, token=TOKEN)
    try:
        page = browser.new_page()
        response = page.goto(server.url)
        assert response is not None and response.status == 401
        assert "token required" in page.inner_text("body")
        assert page.goto(server.url + "?token=wrong").status == 401
        assert page.goto(server.url + f"?token={TOKEN}").status == 200
        # the page's own API calls now pass with the cookie the token set
        page.wait_for_selector("#updated:has-text('updated')", timeout=20_000)
        assert page.locator("#problem").is_hidden() or "token" not in page.inner_text("#problem")
    finally:
        server.stop()
