#!/usr/bin/env python3
"""The dashboard in a real headless browser (SPEC 11).

Starts the built `allot serve` on a temporary data directory and a free loopback port, seeds it
(tokens with `allot tokens create`, telemetry for three tenants, an override that crosses a
guardrail and so becomes a proposal), then drives Debian's Chromium through Selenium and checks:

  * the tenant table shows the seeded tenants, and filtering and sorting work;
  * approving the proposal through the page changes the server's state (the proposal is approved,
    the override is in force, the audit log names the page's token);
  * a silent gateway is forgotten with its "Forget" button (the server's policies are the repository's, with
    `alerts.gateway_lag_s` at 1 s so a gateway that polled once turns silent within the test);
  * the browser console has no errors;
  * the served /openapi.json is a valid OpenAPI 3.1 document (openapi-spec-validator).

Usage: dashboard_test.py --bin PATH/TO/allot [--screenshot FILE]
Needs: chromium and chromium-driver (Debian), selenium and openapi-spec-validator (PyPI); nothing is
downloaded at run time (Selenium Manager is kept offline and pointed at the system binaries).
Prints "N passed, M failed" last; exits non-zero on any failure.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must never fetch a browser or driver.

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"

results = []


def check(name, condition, detail=""):
    results.append((name, bool(condition)))
    print(("PASS " if condition else "FAIL ") + name + ("" if condition else ": " + str(detail)), flush=True)
    return bool(condition)


class Server:
    def __init__(self, binary):
        self.binary = binary
        self.data = tempfile.mkdtemp(prefix="allot-browser-")
        self.process = None
        self.url = None
        # The repository's policies, with a gateway silent after 1 s instead of 30.
        self.policies = os.path.join(self.data, "policies")
        source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "policies")
        shutil.copytree(source, self.policies, ignore=shutil.ignore_patterns("*.md"))
        engine = os.path.join(self.policies, "engine.json")
        with open(engine) as handle:
            settings = json.load(handle)
        settings["alerts"]["gateway_lag_s"] = 1
        with open(engine, "w") as handle:
            json.dump(settings, handle)

    def cli(self, *args):
        out = subprocess.run([self.binary, *args, "--data", self.data], capture_output=True, text=True, timeout=60)
        if out.returncode != 0:
            raise RuntimeError(f"allot {' '.join(args)} failed: {out.stderr}")
        return out.stdout.strip()

    def start(self):
        self.process = subprocess.Popen(
            [self.binary, "serve", "--listen", "127.0.0.1:0", "--data", self.data, "--policies", self.policies,
             "--log-level", "notice"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 30
        while time.time() < deadline:
            line = self.process.stderr.readline()
            if not line:
                if self.process.poll() is not None:
                    raise RuntimeError("allot serve exited with " + str(self.process.returncode))
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if record.get("msg") == "allot listening":
                self.url = "http://" + record["address"]
                return
        raise RuntimeError("allot serve did not start listening within 30 s")

    def request(self, method, path, token, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", "Bearer " + token)
        if body is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
        shutil.rmtree(self.data, ignore_errors=True)


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1500,1100", "--disable-extensions", "--no-first-run"]:
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)


def wait_for(driver, condition, timeout=10, what="condition"):
    """Polls `condition` until it returns a truthy value, which it returns. An element the page re-rendered between
    the condition's find and its read (the tables and the why panel re-render every few seconds) is another try,
    not a failure: a loaded machine lost that race in the why panel (2026-11-30)."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait
    return WebDriverWait(
        driver, timeout, poll_frequency=0.05,
        ignored_exceptions=(NoSuchElementException, StaleElementReferenceException),
    ).until(condition, message="timed out waiting for " + what)


def click(driver, selector, what):
    """Clicks the element `selector` finds, finding it again if a refresh re-rendered it between find and click
    (the page re-renders its tables every few seconds; a loaded machine once lost that race)."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    def attempt(d):
        try:
            d.find_element(By.CSS_SELECTOR, selector).click()
            return True
        except StaleElementReferenceException:
            return False

    wait_for(driver, attempt, what=what)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True, help="the built allot executable")
    parser.add_argument("--screenshot", help="write a PNG of the dashboard here")
    args = parser.parse_args()

    server = Server(os.path.abspath(args.bin))
    driver = None
    try:
        sre = server.cli("tokens", "create", "--role", "sre", "--name", "browser-sre")
        gateway = server.cli("tokens", "create", "--role", "gateway", "--name", "browser-gateway")
        server.start()

        now_ms = int(time.time() * 1000)
        tenants = ["acme", "globex", "initech"]
        events = [{"ts": now_ms - 1000 * i, "gateway": "gw-test-1", "tenant": tenant, "upstream": "openai/gpt-4o",
                   "status": 200, "latency_ms": 300 + i, "prompt_tokens": 500, "completion_tokens": 100}
                  for i, tenant in enumerate(tenants * 3)]
        # A pool the policy does not declare: no capacity to allocate, every tenant unlimited there.
        events.append({"ts": now_ms, "gateway": "gw-test-1", "tenant": "acme", "upstream": "mistral/large",
                       "status": 200, "latency_ms": 300, "prompt_tokens": 500, "completion_tokens": 100})
        status, body = server.request("POST", "/v1/telemetry", gateway, events)
        check("telemetry seeded", status == 200 and body["stored"] == 10, body)
        # premium's guard_min is 0.5% of C: a 10 RPM ceiling crosses it and becomes a proposal.
        status, body = server.request("PUT", "/v1/tenants/example-premium/override", sre,
                                      {"ceiling": {"rpm": 10}, "reason": "abuse report 42", "ttl_s": 3600})
        check("override filed as a proposal", status == 202 and body["status"] == "proposed", body)
        proposal = body["proposal"]["id"]

        # The OpenAPI document as served.
        with urllib.request.urlopen(server.url + "/openapi.json", timeout=10) as response:
            document = json.loads(response.read())
        try:
            from openapi_spec_validator import validate
            validate(document)
            check("openapi.json is valid OpenAPI 3.1", document.get("openapi") == "3.1.0", document.get("openapi"))
        except Exception as error:  # noqa: BLE001 - report any validation failure as a test failure
            check("openapi.json is valid OpenAPI 3.1", False, error)

        from selenium.webdriver.common.by import By

        driver = browser()
        driver.get(server.url + "/")
        wait_for(driver, lambda d: d.find_element(By.ID, "token-input").is_displayed(), what="the token prompt")
        driver.find_element(By.ID, "token-input").send_keys(sre)
        driver.find_element(By.CSS_SELECTOR, "#login-form button[type=submit]").click()

        def rows(d):
            return [row.get_attribute("data-tenant") for row in d.find_elements(By.CSS_SELECTOR, "#tenants tbody tr")]

        wait_for(driver, lambda d: set(tenants) <= set(rows(d)), what="the seeded tenants")
        shown = rows(driver)
        check("tenant table shows the seeded tenants", set(tenants) <= set(shown), shown)
        check("tenant table also shows the policy's tenants", "example-premium" in shown, shown)

        driver.find_element(By.ID, "f-search").send_keys("glob")
        wait_for(driver, lambda d: rows(d) == ["globex"], what="the filtered table")
        check("filtering by id", rows(driver) == ["globex"], rows(driver))
        driver.find_element(By.ID, "f-search").clear()
        driver.execute_script("document.getElementById('f-search').dispatchEvent(new Event('input'))")
        click(driver, "#tenants th[data-sort=id]", "the id column's header")  # ascending already: now descending
        wait_for(driver, lambda d: rows(d)[:1] == [sorted(rows(d))[-1]], what="descending sort")
        check("sorting by a column", rows(driver) == sorted(rows(driver), reverse=True), rows(driver))

        wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, f'button[data-approve="{proposal}"]'),
                 what="the pending proposal")
        driver.find_element(By.ID, "proposal-reason").send_keys("approved from the dashboard")
        click(driver, f'button[data-approve="{proposal}"]', "the Approve button")
        wait_for(driver, lambda d: not d.find_elements(By.CSS_SELECTOR, f'tr[data-proposal="{proposal}"]'),
                 what="the proposal to leave the pending list")

        status, body = server.request("GET", "/v1/proposals?status=approved", sre)
        approved = [p for p in body["proposals"] if p["id"] == proposal]
        check("approving through the page approved the proposal on the server",
              status == 200 and approved and approved[0]["decided_by"] == "browser-sre", body)
        status, body = server.request("GET", "/v1/tenants/example-premium", sre)
        check("the approved override is in force",
              status == 200 and body["override"] and body["override"]["approved"] is True, body.get("override"))
        status, body = server.request("GET", "/v1/audit?action=proposal.approve", sre)
        entry = body["entries"][0] if body["entries"] else {}
        check("the approval is audited with who and why",
              entry.get("actor") == "browser-sre" and entry.get("reason") == "approved from the dashboard", entry)

        # An absolute ceiling on the undeclared pool is published as acme's rate there, with no "why" (the engine did
        # not allocate it): the panel shows its rate and reason (it threw on the missing "why" before).
        def ceiling_applied(_):
            status, body = server.request("PUT", "/v1/tenants/acme/override", sre,
                                          {"upstream": "mistral/large", "ceiling": {"rpm": 50}, "reason": "new model",
                                           "ttl_s": 3600})
            return status == 200 and body["status"] == "applied"
        wait_for(driver, ceiling_applied, what="the loop to track mistral/large")

        def published_there(_):
            status, body = server.request("GET", "/v1/tenants/acme", sre)
            pools = [u for u in body.get("upstreams", []) if u["upstream"] == "mistral/large"]
            return pools and (pools[0].get("allocation") or {}).get("rpm") and pools[0]["allocation"]["rpm"]["rate"] == 50
        wait_for(driver, published_there, what="acme's ceiling on mistral/large to be published")

        click(driver, '#tenants tr[data-tenant="acme"]', "acme's row")
        wait_for(driver, lambda d: d.find_element(By.ID, "why-title").get_attribute("textContent") == "acme",
                 what="the tenant's why panel")

        def why_rows(d):
            for table in d.find_elements(By.CSS_SELECTOR, "#why table"):
                if table.find_element(By.CSS_SELECTOR, "th").text == "mistral/large":
                    return {row.find_elements(By.CSS_SELECTOR, "td")[0].text:
                            [cell.text for cell in row.find_elements(By.CSS_SELECTOR, "td")[1:]]
                            for row in table.find_elements(By.CSS_SELECTOR, "tbody tr")}
            return None
        shown = wait_for(driver, why_rows, what="the why table of mistral/large")
        check("the why panel shows a limit without capacity by its rate and reason",
              shown.get("published") == ["50", "–"] and shown.get("reason") == ["override", "–"]
              and not driver.find_elements(By.CSS_SELECTOR, "#why .error"), shown)
        check("selecting a tenant fills the override form",
              driver.find_element(By.ID, "o-tenant").get_attribute("value") == "acme")
        def tiers_offered(d):
            return [option.get_attribute("value") for option in d.find_elements(By.CSS_SELECTOR, "#o-tier option")]
        offered = wait_for(driver, tiers_offered, what="the override form's tiers")
        status, body = server.request("GET", "/v1/tenants?limit=1", sre)
        check("the override form offers the policy's tiers",
              status == 200 and offered[1:] == body["tiers"] and "premium" in offered, (offered, body.get("tiers")))

        # A gateway that polled once and fell silent: an SRE forgets it from the page.
        status, _ = server.request("GET", "/v1/snapshot?gateway=gw-gone", gateway)
        check("a gateway polled", status == 200, status)

        def forget_button(d):
            d.find_element(By.ID, "refresh").click()
            return d.find_elements(By.CSS_SELECTOR, 'button[data-forget="gw-gone"]')

        wait_for(driver, forget_button, timeout=20, what="the silent gateway's Forget button")
        click(driver, 'button[data-forget="gw-gone"]', "the Forget button")
        wait_for(driver, lambda d: not d.find_elements(By.CSS_SELECTOR, 'tr[data-gateway="gw-gone"]'),
                 what="the gateway to leave the list")
        status, body = server.request("GET", "/v1/gateways", sre)
        check("forgetting through the page forgot the gateway on the server",
              status == 200 and all(g["id"] != "gw-gone" for g in body["gateways"]), body)
        status, body = server.request("GET", "/v1/audit?action=gateway.leave", sre)
        entry = body["entries"][0] if body["entries"] else {}
        check("forgetting is audited with who",
              entry.get("actor") == "browser-sre" and entry.get("subject") == "gw-gone", entry)

        if args.screenshot:
            driver.save_screenshot(args.screenshot)
        errors = [entry for entry in driver.get_log("browser") if entry.get("level") == "SEVERE"]
        check("no console errors", not errors, errors)
    except Exception as error:  # noqa: BLE001 - any crash is a failed check with its reason
        check("the browser test ran to the end", False, repr(error) + " " + getattr(error, "msg", ""))
        if driver is not None and args.screenshot:
            driver.save_screenshot(args.screenshot)
            print([e for e in driver.get_log("browser")])
    finally:
        if driver is not None:
            driver.quit()
        server.stop()

    failed = sum(1 for _, ok in results if not ok)
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
