"""The head scores at the path scripts know (`explorer.heads.head_type_scores`); they live in
`explorer.engine.heads`."""

from explorer.engine.heads import *  # noqa: F403
