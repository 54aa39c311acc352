"""What crosses a boundary between perfkit's parts, declared once.

Header names and formats, span attribute keys, result schema names, and the
events of model APIs' streams. The recorder, the mock, the load drivers and
the bench all import it, so it imports nothing of theirs and loads nothing
heavy (stdlib and orjson).
"""
