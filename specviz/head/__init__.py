"""The draft heads trained for the bundled model: the networks only (model.py: v1 and the files of
both; v2.py: v2, which fuses three target features and attends over its own drafted positions).

proposers/head.py drafts with v1, the shipped head; v2 is not shipped and drafts only in its own
offline evaluation. Their training is specviz/training/head_train.py (v1) and
specviz/training/head2_train.py (v2).
"""
