"""The one way to OpenAI-compatible APIs (OpenAI, vLLM, Ollama, llama.cpp): where the endpoint
is and how to sign for it (`gateway`), and when and how long to wait before asking again
(`retry`). The chat model and the embedder build on it; the official SDK is left out on
purpose, so that the streaming path stays on one shared httpx client with no layer between."""
