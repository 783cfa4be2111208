"""What a draft is, shared by every proposer and the engine: the draft tree with each node's source
(`tree.py`), and temperature, top-p and the one seeded generator every draw uses (`sampling.py`).

It ranks below the proposers, which return draft trees and sample with these rules, and below
decoding, whose engine builds proposers. Imports nothing of specviz but models.
"""
