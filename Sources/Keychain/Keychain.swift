// The Keychain module. See docs/ARCHITECTURE.md.
