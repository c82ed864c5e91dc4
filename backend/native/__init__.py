"""C sources of litecl's native TFLite delegate (shipped as package data; ``litecl export``
copies them next to the generated plan.c, backend/export.py)."""
