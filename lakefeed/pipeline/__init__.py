"""Declarative pipelines: decorators and SQL files define flows; the graph is inferred."""
