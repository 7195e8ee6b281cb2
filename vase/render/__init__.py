"""Headless rendering (moderngl over EGL) of GLB models into canonical views and orbit frames."""

from vase.render.renderer import (
    VIEW_DIRECTIONS,
    Renderer,
    RenderSettings,
    load_glb,
    render_dataset,
    rendered_settings,
)

__all__ = ["VIEW_DIRECTIONS", "RenderSettings", "Renderer", "load_glb", "render_dataset", "rendered_settings"]
