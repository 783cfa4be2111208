"""Measurement layer: the bench against transformers' generate, Compare's timed configurations,
theory against measurement, and the batch-size effect. May import models and decoding."""
