"""Chat models and the live chat streams."""
