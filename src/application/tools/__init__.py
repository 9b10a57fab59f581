"""The tools the agent loop may offer a model, and the registry that offers them."""
