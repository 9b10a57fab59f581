"""Entities, value objects and business rules. Imports nothing but the standard library."""
