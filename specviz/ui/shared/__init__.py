"""What the tabs share: the run logic Decode and Side by side both drive (run.py), the settings
inputs (inputs.py), the views of a run (views.py), recorded runs on screen (replay.py, recordings.py)
and the one error guard every handler goes through (guard.py)."""
