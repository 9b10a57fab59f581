"""Splitting extracted text into passages."""
