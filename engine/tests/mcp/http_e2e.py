"""End-to-end test of `recall mcp --http` (Streamable HTTP) with the official
MCP Python SDK (mcp==2.3.0): its `streamable_http_client` and `ClientSession`.

Run by engine/tests/mcp.rs when the engine is built with the `http` feature
(`cargo test -p recall --features http --test mcp`) as
    python http_e2e.py --bin target/.../recall --work DIR
Each scenario prints `ok <name>`; the first failure raises and exits non-zero.
"""

import argparse
import asyncio
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from contextlib import AsyncExitStack

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, os.path.dirname(__file__))
from e2e import TOOLS, Server, ToolCalls, wait_for  # noqa: E402  (the stdio client of the other test)


class HttpServer:
    """`recall mcp --http 127.0.0.1:0`: the port is read from its stderr,
    which is kept (at RUST_LOG=info) so the test can see what it logged."""

    def __init__(self, bin_path, data, extra=()):
        self.p = subprocess.Popen(
            [bin_path, "mcp", "--data", data, "--tenant", "acme", "--read", "org",
             "--write-bank", "org", "--agent", "http-e2e", "--bank-mode", "org=direct",
             "--http", "127.0.0.1:0", *extra],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True, env={**os.environ, "RUST_LOG": "info"})
        self.lines, self.url = [], None
        found = threading.Event()

        def read():
            for line in self.p.stderr:
                self.lines.append(line)
                m = re.search(r"serving (http://\S+)", line)
                if m and not found.is_set():
                    self.url = m.group(1)
                    found.set()
            found.set()

        threading.Thread(target=read, daemon=True).start()
        assert found.wait(120) and self.url, "".join(self.lines)

    def logged(self, text):
        return any(text in line for line in self.lines)

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        return self.p.wait(timeout=60)


class Client(ToolCalls):
    """One MCP session on the HTTP server."""

    def __init__(self, url):
        self.url = url
        self.stack = AsyncExitStack()

    async def __aenter__(self):
        read, write = await self.stack.enter_async_context(streamable_http_client(self.url))
        self.session = await self.stack.enter_async_context(ClientSession(read, write))
        await self.session.initialize()
        return self

    async def __aexit__(self, *exc):
        await self.stack.aclose()


class Records(logging.Handler):
    """What the SDK's client logged (it logs a refused session DELETE)."""

    def __init__(self):
        super().__init__()
        self.records = []

    def emit(self, record):
        self.records.append(record)


CLIENT_LOG = Records()
logging.getLogger("mcp").addHandler(CLIENT_LOG)


def status_of(url, data=None, headers=None):
    req = urllib.request.Request(url, data=data, headers=headers or {}, method="POST" if data else "GET")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    data = os.path.join(a.work, "http")
    server = HttpServer(a.bin, data)

    # Two sessions at once on one server: each its own recall session, each
    # sees the other's writes.
    async with Client(server.url) as one, Client(server.url) as two:
        tools = await one.session.list_tools()
        assert {t.name for t in tools.tools} == TOOLS, tools
        x = await one.call("remember", content="The staging database is reset every Sunday at 02:00.",
                           kind="fact", elements=["Staging"])
        y = await two.call("remember", content="Feature flags are named team.feature.variant in lower case.",
                           kind="convention")
        assert x["outcome"] == y["outcome"] == "stored", (x, y)

        async def two_sees_x():
            r = await two.call("recall", query="when is staging reset", k=3)
            return r["hits"] and r["hits"][0]["id"] == x["id"]

        t = await wait_for(two_sees_x)
        r = await one.call("recall", q="how to name feature flags", limit=2)
        assert r["hits"][0]["id"] == y["id"], r
        used = await one.call("mark_used", ids=[y["id"]])
        assert used["cited"] == [y["id"]], used
        print(f"ok http_two_sessions_see_each_other ({t:.3f}s)")

        # Bad input: errors, and the server keeps serving.
        await one.fails("remember", content=7)
        await one.fails("recall", query="x", k=-3)
        msg = await one.fails("remember", content="Other tenant's plan", tenant="globex")
        assert "fixed by the server" in msg, msg
        again = await two.call("recall", query="staging reset", k=1)
        assert again["hits"][0]["id"] == x["id"], again
        print("ok http_bad_input_answered")

    # Each client deleted its session on leaving: both were ended.
    ended = lambda: sum("its session is ended" in line for line in server.lines)  # noqa: E731
    deadline = time.monotonic() + 10
    while ended() < 2 and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert ended() == 2, "".join(server.lines)
    assert not any("Session termination failed" in r.getMessage() for r in CLIENT_LOG.records), \
        [r.getMessage() for r in CLIENT_LOG.records]
    got = None
    async with Client(server.url) as three:
        got = await three.call("get", id=y["id"])
    assert got["citations"] == 1, got
    print("ok http_session_ended_when_client_left")

    # Only /mcp is served; a web page's request (it carries an Origin) is refused.
    base = server.url.rsplit("/mcp", 1)[0]
    assert status_of(base + "/other") == 404
    body = b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "Origin": "http://evil.example"}
    assert status_of(server.url, body, headers) == 403
    print("ok http_only_the_endpoint_and_no_web_pages")

    # A stdio window on the same data directory forwards to the HTTP server,
    # and the HTTP clients see its writes.
    async with Server(a.bin, data) as window, Client(server.url) as four:
        z = await window.call("remember", content="Log lines must not contain customer e-mail addresses.",
                              kind="convention")

        async def four_sees_z():
            r = await four.call("recall", query="what must log lines not contain", k=2)
            return r["hits"] and r["hits"][0]["id"] == z["id"]

        await wait_for(four_sees_z)
        print("ok stdio_window_forwards_to_http_server")

        # SIGTERM: the server ends its sessions, hands the store over and
        # exits 0; the stdio window takes the store over and loses nothing.
        assert server.stop() == 0, "".join(server.lines)
        for m in (x, y, z):
            assert (await window.call("get", id=m["id"]))["id"] == m["id"]
        w = await window.call("remember", content="The CI cache is keyed by the lockfile hash.", kind="fact")
        print("ok http_server_stops_and_hands_over")

    async with Server(a.bin, data) as s:
        for m in (x, y, z, w):
            assert (await s.call("get", id=m["id"]))["id"] == m["id"]
    print("ok all_there_after_restart")

    # Loopback only unless asked.
    bad = subprocess.run([a.bin, "mcp", "--data", os.path.join(a.work, "never"), "--tenant", "acme",
                          "--http", "0.0.0.0:0"], stdin=subprocess.DEVNULL, capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode != 0 and "not a loopback address" in bad.stderr, bad
    assert not os.path.exists(os.path.join(a.work, "never")), "nothing may be created"
    print("ok non_loopback_refused")


if __name__ == "__main__":
    asyncio.run(main())
