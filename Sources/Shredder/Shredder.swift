// The Shredder module. See docs/ARCHITECTURE.md.
