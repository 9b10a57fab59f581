"""The parts of an answer's agent loop: the prompt, the progress buffer, tool calls."""
