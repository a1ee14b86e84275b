"""`recall mcp` latency, measured with the official MCP Python SDK (mcp==2.3.0).

    python bench/mcp/latency.py --bin target/debug/recall --size 100000 [--data DIR]

Builds (or reuses) a store of SIZE memories, then reports:
- start: spawning `recall mcp` to its first `recall` answer (what an agent
  window waits for), and one `recall recall` CLI call for comparison;
- warm: `recall` tool round trips from one client, and from 4 clients at
  once on the same data directory (one owner, three forwarding), each split
  into the query embedding (the model's time, reported by the server in
  `took_ms.embed`) and the rest.
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
import time

from mcp import ClientSession, StdioServerParameters, stdio_client

WORDS = (
    "cache deploy token header queue retry backoff schema index migration lock "
    "timeout gateway batch export import billing invoice refund webhook cron "
    "replica shard vacuum checkpoint ledger session cookie tenant quota limit "
    "release branch review flag rollout canary metric alert pager budget trace"
).split()
KINDS = ["pitfall", "convention", "note", "fact", "preference", "episode"]


def build_store(bin_path, data, size, dim=384, seed=7):
    marker = os.path.join(data, f".bench-size-{size}")
    if os.path.exists(marker):
        return
    rng = random.Random(seed)
    path = os.path.join(tempfile.mkdtemp(), "import.jsonl")
    with open(path, "w") as f:
        for i in range(size):
            words = " ".join(rng.choice(WORDS) for _ in range(12))
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
    return [" ".join(rng.choice(WORDS) for _ in range(5)) for _ in range(n)]


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


async def one_client(bin_path, data, n, ready=None, go=None):
    rows = []
    async with stdio_client(server(bin_path, data)) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            for q in queries(5, seed=99):  # warm-up
                await s.call_tool("recall", {"query": q, "k": 8})
            if ready is not None:
                ready.set()
                await go.wait()
            for q in queries(n, seed=hash(id(rows)) & 0xFFFF):
                t = time.perf_counter()
                res = await s.call_tool("recall", {"query": q, "k": 8})
                rt = (time.perf_counter() - t) * 1e3
                assert not res.is_error, res
                took = res.structured_content["took_ms"]
                rows.append((rt, took["embed"], took["recall"]))
    return rows


async def start_to_first_answer(bin_path, data):
    t = time.perf_counter()
    async with stdio_client(server(bin_path, data)) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            res = await s.call_tool("recall", {"query": "cache token header", "k": 8})
            assert not res.is_error, res
            return (time.perf_counter() - t) * 1e3


def summary(name, rows):
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
    }


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--data")
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--json")
    a = ap.parse_args()
    data = a.data or os.path.join(tempfile.gettempdir(), f"recall-mcp-bench-{a.size}")
    build_store(a.bin, data, a.size)

    starts = [await start_to_first_answer(a.bin, data) for _ in range(3)]
    t = time.perf_counter()
    subprocess.run([a.bin, "--data", data, "recall", "--tenant", "bench", "--read", "org",
                    "cache token header"], check=True, stdout=subprocess.DEVNULL)
    cli = (time.perf_counter() - t) * 1e3

    single = await one_client(a.bin, data, a.calls)
    ready = [asyncio.Event() for _ in range(4)]
    go = asyncio.Event()
    tasks = []
    for i in range(4):
        tasks.append(asyncio.create_task(one_client(a.bin, data, a.calls // 2, ready[i], go)))
        await ready[i].wait()  # start one after another: the first owns the store
    go.set()
    four = [row for rows in await asyncio.gather(*tasks) for row in rows]

    out = {
        "size": a.size,
        "start_to_first_answer_ms": starts,
        "cli_recall_ms": cli,
        "runs": [summary("1 client", single), summary("4 clients", four)],
    }
    print(f"| store | start to first answer (3 runs) | one `recall recall` CLI call |")
    print(f"|---|---|---|")
    print(f"| {a.size:,} | {', '.join(f'{s:.0f}' for s in starts)} ms | {cli:.0f} ms |")
    print()
    print("| clients | calls | round trip p50 / p99 | without embedding p50 / p99 | embedding p50 / p99 | engine recall p50 |")
    print("|---|---|---|---|---|---|")
    for r in out["runs"]:
        print(f"| {r['run']} | {r['calls']} | {r['round_trip_p50']:.2f} / {r['round_trip_p99']:.2f} ms "
              f"| {r['without_embedding_p50']:.2f} / {r['without_embedding_p99']:.2f} ms "
              f"| {r['embedding_p50']:.2f} / {r['embedding_p99']:.2f} ms | {r['engine_recall_p50']:.2f} ms |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    asyncio.run(main())
