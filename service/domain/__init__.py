"""Processes, products and stations: validation rules, derivations and upserts.

Pure Python on top of service.storage; no web framework here, so every rule can be tested directly.
"""
