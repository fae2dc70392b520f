// The snippets of README.md and docs/*.md, one file each in Generated/ (not committed), are
// written by scripts/check-doc-snippets; a snippet of statements becomes the body of a
// function that is compiled, never called.
