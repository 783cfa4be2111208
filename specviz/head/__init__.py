"""The draft head trained for the bundled model: the network only (model.py).

proposers/head.py drafts with it; its training, which runs the engine, is specviz/training/head_train.py.
"""
