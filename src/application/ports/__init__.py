"""One Protocol per file; each docstring is the contract every adapter keeps."""
