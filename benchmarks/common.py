"""What every memsys benchmark shares: the machine it ran on, percentiles, a memsys to drive, output.

Each benchmark prints a table, and saves ``{"benchmark", "machine", "config", "results"}`` as JSON in
``--out`` (default ``benchmarks/results/``).
"""

from __future__ import annotations

import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = ROOT / "benchmarks" / "results"


def machine() -> dict:
    """The machine the figures come from."""
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory_gib = None
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        memory_gib = round(pages / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": memory_gib,
        "os": platform.platform(),
        "python": platform.python_version(),
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def percentiles(values: Sequence[float]) -> dict[str, float]:
    """p50/p95/p99 (nearest-rank on the sorted sample) and the mean, rounded to 0.01."""
    if not values:
        return {"p50": float("nan"), "p95": float("nan"), "p99": float("nan"), "mean": float("nan"), "n": 0}
    ordered = sorted(values)

    def rank(q: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]

    return {
        "p50": round(statistics.median(ordered), 2),
        "p95": round(rank(0.95), 2),
        "p99": round(rank(0.99), 2),
        "mean": round(statistics.fmean(ordered), 2),
        "n": len(ordered),
    }


def save(name: str, config: dict, results: object, out_dir: Path | None = None, extra: dict | None = None) -> Path:
    """Write ``{name}.json`` in ``out_dir``; ``extra`` adds (or overrides) top-level keys, e.g. timings."""
    out_dir = Path(out_dir or RESULTS_DIR)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.json"
    payload = {"benchmark": name, "machine": machine(), "config": config, "results": results, **(extra or {})}
    path.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
    return path


def copy_database(source: Path, into: Path) -> Path:
    """A copy of a kept folder's database (the embedded server's ``pg`` folder) in ``into``, so that the kept one is
    never changed; the copy's folder."""
    target = into / "pg"
    subprocess.run(["cp", "-a", str(source / "pg"), str(target)], check=True)  # noqa: S603, S607
    (target / "postmaster.pid").unlink(missing_ok=True)
    return target


def print_table(rows: list[dict], columns: Sequence[str]) -> None:
    widths = {c: max(len(c), *(len(_fmt(r.get(c))) for r in rows)) for c in columns} if rows else {}
    print("  ".join(c.ljust(widths[c]) for c in columns))
    for row in rows:
        print("  ".join(_fmt(row.get(c)).ljust(widths[c]) for c in columns))


Series = dict[str, tuple[Sequence[float], Sequence[float]]]


def line_plot(path: Path, series: Series, *, title: str, xlabel: str, ylabel: str, log2_x: bool = False) -> Path:
    """A PNG of one line per named series (matplotlib, no display needed)."""
    return panel_plot(path, {title: series}, xlabel=xlabel, ylabel=ylabel, log2_x=log2_x)


def panel_plot(
    path: Path, panels: dict[str, Series], *, xlabel: str, ylabel: str, log2_x: bool = False, columns: int = 2
) -> Path:
    """A PNG of one or more titled panels side by side, each with one line per named series; the legend
    is drawn once, under the panels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = min(columns, len(panels))
    rows = -(-len(panels) // columns)
    figure, grid = plt.subplots(
        rows, columns, figsize=(max(8.0, 5.5 * columns), 3.6 * rows + 1.2), dpi=72, squeeze=False
    )
    for axes, (title, series) in zip(grid.flat, panels.items(), strict=False):
        for label, (xs, ys) in series.items():
            style = "--" if label.startswith("raw-") else ":" if "(before" in label else "-"
            axes.plot(xs, ys, style, marker="o", linewidth=1.4, markersize=3, label=label)
        if log2_x:
            axes.set_xscale("log", base=2)
            ticks = list(next(iter(series.values()))[0])
            axes.set_xticks(ticks, [str(x) for x in ticks])
        axes.set_title(title, fontsize=10)
        axes.set_xlabel(xlabel, fontsize=8)
        axes.set_ylabel(ylabel, fontsize=8)
        axes.set_ylim(0, 1)
        axes.grid(True, alpha=0.3)
    for axes in list(grid.flat)[len(panels) :]:
        axes.set_visible(False)
    handles, labels = grid.flat[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="lower center", ncol=3, fontsize=8, frameon=False)
    figure.tight_layout(rect=(0, 0.22 / rows if rows > 1 else 0.2, 1, 1))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)
    return path


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"
    return "" if value is None else str(value)


async def post_json(client: httpx.AsyncClient, path: str, body: dict) -> dict:
    """POST ``body`` to memsys; its JSON answer, or RuntimeError with the status and the start of the body."""
    response = await client.post(path, json=body)
    if response.status_code != 200:
        raise RuntimeError(f"POST {path} -> {response.status_code}: {response.text[:500]}")
    return response.json()


async def wait_until_formed(client: httpx.AsyncClient, poll_s: float = 2.0) -> None:
    """Until every message stored is formed into memories (``/health``'s ``messages_waiting`` is 0): flush waits
    at most ``MEMSYS_FLUSH_TIMEOUT_SECONDS``, and a benchmark must not ask while formation still runs."""
    import asyncio

    while (await client.get("/health")).json()["result"]["formation"]["messages_waiting"]:
        await asyncio.sleep(poll_s)


def stop(process: subprocess.Popen, timeout_s: float = 30) -> None:
    """SIGTERM, then SIGKILL if it has not exited within ``timeout_s``."""
    process.terminate()
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()


def wait_until_answering(process: subprocess.Popen, url: str, timeout_s: float, what: str) -> None:
    """Until GET ``url`` answers 200; RuntimeError if ``process`` exits first or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not answer within {timeout_s:g} s")
        time.sleep(0.3)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def memsys_server(
    base_url: str | None = None,
    env: dict[str, str] | None = None,
    root: Path = ROOT,
    data_dir: Path | None = None,
    log: Path | None = None,
) -> Iterator[str]:
    """Yield the base URL of a memsys to drive: ``base_url`` as given, or a ``memsys serve`` of our own (the
    code in ``root``) on a fresh embedded database in ``data_dir`` or a temporary directory (stopped, and a
    temporary directory deleted, afterwards). ``log``: a file for its output instead of ours."""
    if base_url:
        yield base_url.rstrip("/")
        return
    with tempfile.TemporaryDirectory(prefix="memsys-bench-") as temporary:
        data = data_dir or Path(temporary)
        port = free_port()
        # The benchmarks' LLM stand-ins (and a local vLLM) listen on loopback: let llm_config reach them.
        child_env = {
            **os.environ,
            "MEMSYS_DATA_DIR": str(data),
            "MEMSYS_LOG_LEVEL": "WARNING",
            "MEMSYS_LLM_ALLOW_PRIVATE_URLS": "true",
            **(env or {}),
        }
        child_env.pop("MEMSYS_DATABASE_URL", None) if "MEMSYS_DATABASE_URL" not in (env or {}) else None
        output = open(log, "ab") if log else None  # noqa: SIM115 (closed in finally)
        process = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
            env=child_env,
            cwd=root,
            stdout=output,
            stderr=subprocess.STDOUT if output else None,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            wait_until_answering(process, url + "/health", 120, "memsys serve")
            yield url
        finally:
            stop(process)
            from app.db.embedded import stop_embedded

            stop_embedded(data)  # the server must not outlive its data directory
            if output:
                output.close()
