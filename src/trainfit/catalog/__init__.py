"""Catalog data (GPUs, instances, prices, models, efficiencies), loaded lazily and memoised."""

from .gpus import all_gpus, get_gpu
from .instances import all_instances, get_instance, instances_for_gpu, prices_for
from .models import all_models, get_model, resolve_model
from .sources import all_sources

__all__ = ["all_gpus", "get_gpu", "all_instances", "get_instance", "instances_for_gpu", "prices_for",
           "all_models", "get_model", "resolve_model", "all_sources"]
