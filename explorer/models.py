"""The models the app offers, at the path scripts know (`explorer.models.smollm2_gguf`); they live in
`explorer.loading.catalog`."""

from explorer.loading.catalog import *  # noqa: F403
