"""The user's personal memory store for local chat (SQLite), recall, and its portable export format.

Not built yet: the walking skeleton contributes traces only. Nothing in here may ever leave the machine.
"""
