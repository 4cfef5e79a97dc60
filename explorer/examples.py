"""The app's example prompts, at the path scripts know (`explorer.examples.COPY`); they live in
`explorer.app.examples`."""

from explorer.app.examples import *  # noqa: F403
