"""The draft head trained for the bundled model: the network (model.py) and its training (train.py).

Part of the decoding layer: proposers/head.py drafts with it.
"""
