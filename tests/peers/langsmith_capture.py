"""A loopback stand-in for LangSmith's ingest API: the real langsmith client posts runs to it.

It answers ``GET /info`` (asking for the JSON batch endpoint) and takes
``POST /runs/batch`` (``{"post": [...], "patch": [...]}``), ``POST /runs`` and
``PATCH /runs/{id}``, merging each run's creation and its update the way
LangSmith stores them, so the captured runs are what an export of the project
would list.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agentscope.sim.server import free_port

INFO = {
    "version": "0.10.0",
    "batch_ingest_config": {
        "use_multipart_endpoint": False,
        "size_limit": 100,
        "size_limit_bytes": 20_971_520,
        "scale_up_qsize_trigger": 1000,
        "scale_up_nthreads_limit": 16,
        "scale_down_nempty_trigger": 4,
    },
}


class LangSmithCapture:
    def __init__(self) -> None:
        self.runs: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()
        self.port = free_port()
        app = Starlette(
            routes=[
                Route("/info", self._info),
                Route("/runs/batch", self._batch, methods=["POST"]),
                Route("/runs", self._create, methods=["POST"]),
                Route("/runs/{run_id}", self._update, methods=["PATCH"]),
            ]
        )
        self._server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        )
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> LangSmithCapture:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started and time.monotonic() < deadline:
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)

    def _merge(self, run: dict[str, Any]) -> None:
        with self.lock:
            self.runs.setdefault(str(run["id"]), {}).update({k: v for k, v in run.items() if v is not None})

    async def _info(self, request: Request) -> JSONResponse:
        return JSONResponse(INFO)

    async def _batch(self, request: Request) -> JSONResponse:
        body = orjson.loads(await request.body())
        for run in [*body.get("post", []), *body.get("patch", [])]:
            self._merge(run)
        return JSONResponse({})

    async def _create(self, request: Request) -> JSONResponse:
        self._merge(orjson.loads(await request.body()))
        return JSONResponse({})

    async def _update(self, request: Request) -> JSONResponse:
        self._merge({**orjson.loads(await request.body()), "id": request.path_params["run_id"]})
        return JSONResponse({})

    def export(self, path: Path) -> Path:
        """The captured runs as a JSON-lines export, one Run object a line."""
        with self.lock:
            path.write_bytes(b"".join(orjson.dumps(run) + b"\n" for run in self.runs.values()))
        return path
