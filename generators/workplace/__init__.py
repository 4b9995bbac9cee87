"""The workplace world (generated from world_spec.yaml by the dataset engine) and its task templates."""

from generators.workplace.tasks import CATEGORIES, TEMPLATES, generate_tasks
from generators.workplace.world import CONTEXT, TODAY, generate_world_tables

__all__ = ["CATEGORIES", "CONTEXT", "TEMPLATES", "TODAY", "generate_tasks", "generate_world_tables"]
