"""What the app shows, from a Run or a Generation: the arrays each view needs, pulled from the engine and
handed to the figure builders (`explorer.figures`), one module per tab. Nothing here draws by hand or
knows Gradio; the app only wires these to its components.

    attention     a head stage by stage, every head of a layer, the zoom window, the faithfulness check
    rope          the model's angles and wavelengths, one query and key turned pair by pair
    gqa           the query-head -> kv-head diagram, the KV cache's size
    overview      every head scored on the prompt, the next-token distribution
    interventions an ablated run beside the plain one, a patching sweep
    generation    a generation's steps
    flow          the information-flow graph to one position's output, attention rollout beside it
    pooled        a layer's views past the view budget, block by block (used by `attention`)
    weighting     softmax maps weighted by what each key writes (‖α·v·W_O‖, rows normalised)
    export        a layer's tensors as .npz, a head's map as .csv
    lens          the logit lens over positions × layers, a target’s rank, direct logit attribution,
                  the heads looking at a token
    qk            why a head looks there: a score split into its sources, a row's key drivers, the
                  composition of every pair of heads
    circuits      a circuit on a dataset of pairs: node scores, EAP-IG's edges, the faithfulness curve
    attribution_graph  a positional attribution graph over its prompt (`graph_figure`)
"""

from explorer.figures import MapStyle
from explorer.views.attention import (
    EAGER_TOLERANCE,
    VIEW_MAP_BYTES,
    all_heads,
    default_zoom,
    faithfulness,
    head_figures,
    head_similarity,
    layer_figures,
    maps_fit,
    pipeline,
    pipeline_exact,
    pipeline_parts,
    prepare_layer,
    zoom,
)
from explorer.views.attribution_graph import graph_figure
from explorer.views.flow import DEFAULT_THRESHOLD, flow
from explorer.views.gqa import gqa_diagram, kv_cache, kv_cache_bytes_per_token, kv_cache_contexts
from explorer.views.interventions import (
    ABLATION_TOP_TOKENS,
    RANKED_HEADS,
    RankedHead,
    ablation_next_token_ids,
    ablation_next_tokens,
    knockout_summary,
    patching,
    ranked_heads,
)
from explorer.views.labels import clamp_position, head_name, kv_heads, layer_head_name
from explorer.views.lens import (
    LENS_WINDOW,
    attribution,
    default_target,
    heads_looking_at,
    lens_grid,
    lens_window,
    target_rank,
)
from explorer.views.overview import (
    TOP_HEAD_LISTS,
    TOP_NEXT_TOKENS,
    TopHead,
    head_lists,
    head_profile,
    next_tokens,
    overview,
    top_heads,
)
from explorer.views.qk import composition, source_test, testable_sources, what_drives_row, why_score
from explorer.views.rope import (
    default_positions,
    rope_angles,
    rope_rotation,
    rope_score_split,
    rope_wavelengths,
)

__all__ = [
    "ABLATION_TOP_TOKENS",
    "DEFAULT_THRESHOLD",
    "EAGER_TOLERANCE",
    "LENS_WINDOW",
    "RANKED_HEADS",
    "TOP_HEAD_LISTS",
    "TOP_NEXT_TOKENS",
    "VIEW_MAP_BYTES",
    "MapStyle",
    "RankedHead",
    "TopHead",
    "ablation_next_token_ids",
    "ablation_next_tokens",
    "all_heads",
    "attribution",
    "clamp_position",
    "composition",
    "default_positions",
    "default_target",
    "default_zoom",
    "faithfulness",
    "flow",
    "gqa_diagram",
    "graph_figure",
    "head_figures",
    "head_lists",
    "head_name",
    "head_profile",
    "head_similarity",
    "heads_looking_at",
    "knockout_summary",
    "kv_cache",
    "kv_cache_bytes_per_token",
    "kv_cache_contexts",
    "kv_heads",
    "layer_figures",
    "layer_head_name",
    "lens_grid",
    "lens_window",
    "maps_fit",
    "next_tokens",
    "overview",
    "patching",
    "pipeline",
    "pipeline_exact",
    "pipeline_parts",
    "prepare_layer",
    "ranked_heads",
    "rope_angles",
    "rope_rotation",
    "rope_score_split",
    "rope_wavelengths",
    "source_test",
    "target_rank",
    "testable_sources",
    "top_heads",
    "what_drives_row",
    "why_score",
    "zoom",
]
