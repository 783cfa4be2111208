"""The Side by side tab: two configurations, A and B, on one prompt, cycle by cycle."""
