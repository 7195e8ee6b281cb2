"""Datasets: the synthetic generator, the on-disk layout reader and the Lightning data module."""

from vase.data.dataset import VIEWS, VaseDataset, VaseExample, load_annotations, load_views, view_path

__all__ = ["VIEWS", "VaseDataset", "VaseExample", "load_annotations", "load_views", "view_path"]
