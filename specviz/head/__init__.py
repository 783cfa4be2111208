"""The draft heads trained for the bundled model: the networks only (model.py: v1 and the files of
both; v2.py: v2, which fuses three target features and attends over its own drafted positions).

proposers/head.py drafts with them; their training, which runs the engine, is specviz/training/head_train.py
(v1) and specviz/training/head2_train.py (v2).
"""
