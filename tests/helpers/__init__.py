"""Test-only helpers shared across test modules: a loopback HTTP proxy and throwaway TLS certificates."""
