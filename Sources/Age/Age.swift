// The Age module. See docs/ARCHITECTURE.md.
