"""Test-model tooling for litecl: build, convert and extract small .tflite models (never committed)."""
