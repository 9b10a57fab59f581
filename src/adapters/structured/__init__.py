"""Structured extraction with chat models."""
