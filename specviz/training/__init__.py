"""Training layer: code that builds the project's assets rather than running them; it sits above
the engine because it evaluates what it trained with it. head_train.py trains the draft head
(specviz/head/model.py) for the bundled model: `python -m specviz.training.head_train`; its data,
training and evaluation are head_data.py, head_fit.py and head_eval.py.
"""
