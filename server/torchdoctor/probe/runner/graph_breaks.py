"""Pass: graph breaks (optional, last: importing dynamo is slow)."""

from __future__ import annotations

import contextlib
import sys
import time
from typing import Any

from .session import Session


def explain_pass(session: Session) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        import torch._dynamo as dynamo

        dynamo.reset()
        with contextlib.redirect_stdout(sys.stderr):
            explained = dynamo.explain(session.model)(*session.inputs.args, **session.inputs.kwargs)
    except Exception as exc:  # noqa: BLE001 - explain failing must not lose the report
        return {
            "graph_count": None,
            "graph_break_count": None,
            "breaks": [],
            "seconds": time.perf_counter() - started,
            "error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
        }
    breaks = []
    for reason in explained.break_reasons:
        where = None
        for frame in reversed(list(getattr(reason, "user_stack", []) or [])):
            if session.user.is_user_file(frame.filename):
                where = (frame.filename, frame.lineno)
                break
        breaks.append(
            {
                "reason": str(getattr(reason, "reason", reason)).strip().splitlines()[0],
                "file": where[0] if where else None,
                "line": where[1] if where else None,
            }
        )
    dynamo.reset()
    return {
        "graph_count": explained.graph_count,
        "graph_break_count": explained.graph_break_count,
        "breaks": breaks,
        "seconds": time.perf_counter() - started,
        "error": None,
    }
