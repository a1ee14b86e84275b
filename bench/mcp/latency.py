"""`recall mcp` latency, measured with the official MCP Python SDK (mcp==2.3.0).

    python bench/mcp/latency.py --bin target/debug/recall --size 100000 [--data DIR] [--http]

Builds (or reuses) a store of SIZE memories, then reports:
- start: spawning `recall mcp` to its first `recall` answer (what an agent
  window waits for), and one `recall recall` CLI call for comparison;
- warm: `recall` tool round trips from one client, and from 4 clients at
  once on the same data directory (one owner, three forwarding), each split
  into the query embedding (the model's time, reported by the server in
  `took_ms.embed`) and the rest; with `--http`, also one client over
  Streamable HTTP (`recall mcp --http`, a binary built with the `http`
  feature). Each run also reports calls/s and how busy the machine's cores
  were (every process: server, clients, model).
The store's vectors are random unit vectors (the scan's cost does not depend
on what they mean); the texts are drawn from a fixed vocabulary so BM25 has
real postings. Queries are embedded by the real model.
"""

import argparse
import asyncio
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from mcp import ClientSession, StdioServerParameters, stdio_client

def vocabulary(n=30_000, seed=3):
    """Pseudo-words drawn Zipf-like (s = 1.1), as words are in real text: a
    few very common, most rare, so BM25 postings have realistic lengths."""
    rng = random.Random(seed)
    syllables = ["ka", "lo", "mi", "ren", "tu", "sol", "vi", "dar", "en", "qui", "zo", "pa", "ber", "nix"]
    words = sorted({"".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))) for _ in range(n * 2)})[:n]
    rng.shuffle(words)
    weights = [1 / (r + 1) ** 1.1 for r in range(len(words))]
    return words, weights


WORDS, WEIGHTS = vocabulary()


def text(rng, n):
    return " ".join(rng.choices(WORDS, WEIGHTS, k=n))


KINDS = ["pitfall", "convention", "note", "fact", "preference", "episode"]


def build_store(bin_path, data, size, dim=384, seed=7):
    marker = os.path.join(data, f".bench-size-{size}")
    if os.path.exists(marker):
        return
    rng = random.Random(seed)
    path = os.path.join(tempfile.mkdtemp(), "import.jsonl")
    with open(path, "w") as f:
        for i in range(size):
            words = text(rng, 12)
            v = [rng.gauss(0, 1) for _ in range(dim)]
            n = math.sqrt(sum(x * x for x in v))
            f.write(json.dumps({
                "bank": "org", "kind": rng.choice(KINDS),
                "content": f"Memory {i}: {words}.",
                "vector": [round(x / n, 5) for x in v],
            }) + "\n")
    t = time.monotonic()
    subprocess.run([bin_path, "--data", data, "import", "--tenant", "bench", path],
                   check=True, stdout=subprocess.DEVNULL)
    print(f"built a {size}-memory store in {time.monotonic() - t:.1f}s", file=sys.stderr)
    os.remove(path)
    open(marker, "w").close()


def server(bin_path, data):
    return StdioServerParameters(
        command=bin_path,
        args=["--data", data, "mcp", "--tenant", "bench", "--read", "org"],
        env={"RUST_LOG": "warn"},
    )


def queries(n, seed=11):
    rng = random.Random(seed)
    return [text(rng, 5) for _ in range(n)]


def cpu_ticks():
    """(busy, total) jiffies of all cores from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


class Timed:
    """The timed calls of a run (servers started and warmed up before):
    their wall time and the machine's CPU use meanwhile (all cores, every
    process). A run whose cores are all busy is limited by the CPU, not by
    a lock."""

    def __enter__(self):
        self.ticks, self.started = cpu_ticks(), time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.started
        end = cpu_ticks()
        self.busy = (end[0] - self.ticks[0]) / max(1, end[1] - self.ticks[1])


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


async def one_client(bin_path, data, n, timed):
    rows = []
    async with stdio_client(server(bin_path, data)) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            for q in queries(5, seed=99):  # warm-up
                await s.call_tool("recall", {"query": q, "k": 8})
            with timed:
                await sdk_calls(s, n, rows, seed=hash(id(rows)) & 0xFFFF)
    return rows


async def sdk_calls(s, n, rows, seed):
    """`n` timed `recall` calls through an SDK client session."""
    for q in queries(n, seed=seed):
        t = time.perf_counter()
        res = await s.call_tool("recall", {"query": q, "k": 8})
        rt = (time.perf_counter() - t) * 1e3
        assert not res.is_error, res
        took = res.structured_content["took_ms"]
        rows.append((rt, took["embed"], took["recall"], took["render"]))


async def http_client(bin_path, data, n, timed):
    """The SDK's Streamable HTTP client against `recall mcp --http` (a binary
    built with the `http` feature)."""
    import re
    from mcp.client.streamable_http import streamable_http_client

    p = subprocess.Popen(
        [bin_path, "--data", data, "mcp", "--tenant", "bench", "--read", "org", "--http", "127.0.0.1:0"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "RUST_LOG": "warn"})
    url = None
    for line in p.stderr:
        m = re.search(r"serving (http://\S+)", line)
        if m:
            url = m.group(1)
            break
    assert url, "the server did not start"
    threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
    rows = []
    try:
        async with streamable_http_client(url) as (r, w):
            async with ClientSession(r, w) as s:
                await s.initialize()
                for q in queries(5, seed=99):
                    await s.call_tool("recall", {"query": q, "k": 8})
                with timed:
                    await sdk_calls(s, n, rows, seed=77)
    finally:
        p.terminate()
        p.wait(timeout=60)
    return rows


class Raw:
    """A bare JSON-RPC client on the server's pipes: what the server itself
    adds to a call, without a client library's own cost."""

    def __init__(self, bin_path, data):
        self.p = subprocess.Popen(
            [bin_path, "--data", data, "mcp", "--tenant", "bench", "--read", "org"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, bufsize=1)
        self.n = 0
        self.rpc("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                "clientInfo": {"name": "bench", "version": "0"}})
        self.p.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")

    def rpc(self, method, params):
        self.n += 1
        self.p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params}) + "\n")
        self.p.stdin.flush()
        while True:
            msg = json.loads(self.p.stdout.readline())
            if msg.get("id") == self.n:
                return msg

    def recall(self, q):
        t = time.perf_counter()
        msg = self.rpc("tools/call", {"name": "recall", "arguments": {"query": q, "k": 8}})
        rt = (time.perf_counter() - t) * 1e3
        took = msg["result"]["structuredContent"]["took_ms"]
        return rt, took["embed"], took["recall"], took["render"]

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=60)


def raw_clients(bin_path, data, clients, n, timed):
    """`clients` raw clients started one after another (the first owns the
    store), then all calling at once."""
    rows, lock, go = [], threading.Lock(), threading.Event()
    conns = []
    for _ in range(clients):
        c = Raw(bin_path, data)
        for q in queries(5, seed=99):
            c.recall(q)
        conns.append(c)

    def work(i, c):
        go.wait()
        mine = [c.recall(q) for q in queries(n, seed=1000 + i)]
        with lock:
            rows.extend(mine)

    threads = [threading.Thread(target=work, args=(i, c)) for i, c in enumerate(conns)]
    for t in threads:
        t.start()
    with timed:
        go.set()
        for t in threads:
            t.join()
    for c in reversed(conns):
        c.close()
    return rows


async def start_to_first_answer(bin_path, data):
    t = time.perf_counter()
    async with stdio_client(server(bin_path, data)) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            res = await s.call_tool("recall", {"query": queries(1)[0], "k": 8})
            assert not res.is_error, res
            return (time.perf_counter() - t) * 1e3


def summary(name, rows, timed):
    rt = [r[0] for r in rows]
    emb = [r[1] for r in rows]
    rest = [r[0] - r[1] for r in rows]
    eng = [r[2] for r in rows]
    return {
        "run": name, "calls": len(rows),
        "round_trip_p50": pct(rt, 50), "round_trip_p99": pct(rt, 99),
        "without_embedding_p50": pct(rest, 50), "without_embedding_p99": pct(rest, 99),
        "embedding_p50": pct(emb, 50), "embedding_p99": pct(emb, 99),
        "engine_recall_p50": pct(eng, 50),
        "render_p50": pct([r[3] for r in rows], 50),
        "calls_per_s": len(rows) / timed.seconds,
        "cpu_busy": timed.busy,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--data")
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--json")
    ap.add_argument("--http", action="store_true",
                    help="also time the SDK's Streamable HTTP client (the binary needs the `http` feature)")
    a = ap.parse_args()
    data = a.data or os.path.join(tempfile.gettempdir(), f"recall-mcp-bench-{a.size}")
    build_store(a.bin, data, a.size)

    starts = [asyncio.run(start_to_first_answer(a.bin, data)) for _ in range(3)]
    t = time.perf_counter()
    subprocess.run([a.bin, "--data", data, "recall", "--tenant", "bench", "--read", "org",
                    queries(1)[0]], check=True, stdout=subprocess.DEVNULL)
    cli = (time.perf_counter() - t) * 1e3

    runs = []
    for name, run in [
        ("1 client, MCP Python SDK", lambda t: asyncio.run(one_client(a.bin, data, a.calls, t))),
        ("1 client, bare JSON-RPC", lambda t: raw_clients(a.bin, data, 1, a.calls, t)),
        ("4 clients at once, bare JSON-RPC", lambda t: raw_clients(a.bin, data, 4, a.calls // 2, t)),
    ] + ([("1 client, MCP Python SDK over Streamable HTTP",
           lambda t: asyncio.run(http_client(a.bin, data, a.calls, t)))] if a.http else []):
        timed = Timed()
        rows = run(timed)
        runs.append(summary(name, rows, timed))

    out = {
        "size": a.size,
        "start_to_first_answer_ms": starts,
        "cli_recall_ms": cli,
        "runs": runs,
    }
    print(f"| store | start to first answer (3 runs) | one `recall recall` CLI call |")
    print(f"|---|---|---|")
    print(f"| {a.size:,} | {', '.join(f'{s:.0f}' for s in starts)} ms | {cli:.0f} ms |")
    print()
    print("| clients | calls | round trip p50 / p99 | without embedding p50 / p99 | embedding p50 / p99 | engine recall p50 | calls/s | CPU busy |")
    print("|---|---|---|---|---|---|---|---|")
    for r in out["runs"]:
        print(f"| {r['run']} | {r['calls']} | {r['round_trip_p50']:.2f} / {r['round_trip_p99']:.2f} ms "
              f"| {r['without_embedding_p50']:.2f} / {r['without_embedding_p99']:.2f} ms "
              f"| {r['embedding_p50']:.2f} / {r['embedding_p99']:.2f} ms | {r['engine_recall_p50']:.2f} ms "
              f"| {r['calls_per_s']:.0f} | {r['cpu_busy']:.0%} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
