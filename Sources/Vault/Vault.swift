// The Vault module. See docs/ARCHITECTURE.md.
