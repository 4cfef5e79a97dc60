"""What a page's session holds on the server beyond its small gr.States, and when it goes: its results
(a circuit, a patching sweep: `explorer.app.session_results`, in the workspace's budget) and its
downloads (`explorer.app.downloads`).

- A result's gr.State (`result_state`) holds its key alone, and expires `RESULT_SECONDS` after it was
  set, its result dropped with it: so for a client that never opens Gradio's heartbeat (an API client,
  which Gradio never sees leave) as for a page left open.
- A page closed or reloaded (its heartbeat ended: `demo.unload`) drops its results and its downloads
  at once (`end_when_closed`).
- A handler reading a result the page shows and the server no longer keeps says so (`on_screen`).
"""

from __future__ import annotations

import gradio as gr

from explorer.app import session_results
from explorer.app.downloads import Downloads
from explorer.app.visitors import visitor
from explorer.app.workspace import Workspace

RESULT_SECONDS = 3600  # a result's key lasts this long after it was set (as Gradio keeps a closed page's)


def result_state(workspace: Workspace) -> gr.State:
    """A gr.State for a result's key (None until one is found), expiring with its result."""
    return gr.State(None, time_to_live=RESULT_SECONDS, delete_callback=Forget(workspace))


class Forget:
    """A result's key expired: its result dropped from the workspace. Gradio deep-copies a page's
    components for each session it opens; this callback is shared as it is, never copied, since what
    it reaches (the workspace, its models and runs) is the server's one."""

    def __init__(self, workspace: Workspace):
        self.workspace = workspace

    def __call__(self, key) -> None:
        session_results.forget(self.workspace, key)

    def __copy__(self) -> Forget:
        return self

    def __deepcopy__(self, memo) -> Forget:
        return self


def keep(workspace: Workspace, request, kind: str, value) -> session_results.ResultKey:
    """`value` kept as the requesting session's result of `kind`; the key for its gr.State."""
    session = visitor(request, workspace.policy.proxies).session
    return session_results.keep(workspace, session, kind, value)


def on_screen(workspace: Workspace, key, shown: bool, what: str, again: str):
    """The result `key` names: None when none was found (the page shows none: not `shown`); a ValueError
    naming `what` was dropped, and saying what to do (`again`), when the page shows one no longer kept."""
    found = session_results.result(workspace, key)
    if found is None and (key is not None or shown):
        raise ValueError(
            f"{what} on screen is no longer kept: this app keeps it for {RESULT_SECONDS // 60} minutes "
            f"at most, and less when it needs the memory for other visitors' work. {again}"
        )
    return found


def end_when_closed(demo: gr.Blocks, workspace: Workspace, downloads: Downloads) -> None:
    """A page closed (its heartbeat ended): its session's results and downloads go at once."""

    def closed(request: gr.Request):
        session = visitor(request, workspace.policy.proxies).session
        if session:
            session_results.end_session(workspace, session)
            downloads.end_session(session)

    demo.unload(closed)
