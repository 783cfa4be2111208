"""The Decode tab: one run, cycle by cycle, with its lessons, Explain this cycle, and Export and Replay."""
