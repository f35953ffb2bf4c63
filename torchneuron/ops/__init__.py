"""Ops layer: Python-level registrations with a reason to exist: the float64 policy, autocast
op lists, and the one module of op lists (op_lists.py) everything else reads."""
