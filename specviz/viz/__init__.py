"""Plotly figures and HTML panels built from traces only (no model, no gradio).

Every piece of prompt or model text is escaped here, for HTML and for plotly labels alike.
"""
from specviz.viz.dists import pq_figure, residual_figure
from specviz.viz.metrics import metrics_html
from specviz.viz.narrate import narrate
from specviz.viz.panels import cache_html, legend_html, match_html, seam_html, text_html
from specviz.viz.runs import acceptance_figure, instructive_cycle, teaches_everything, timeline_figure
from specviz.viz.tree_figure import tree_figure

__all__ = ["tree_figure", "pq_figure", "residual_figure", "narrate", "cache_html", "text_html",
           "legend_html", "metrics_html", "timeline_figure", "acceptance_figure", "instructive_cycle",
           "teaches_everything", "match_html", "seam_html"]
