// The front program: what `scripts/build-release` installs as `securefoundation` (docs/CLI.md,
// "Installed programs"). A plain `encrypt` or `decrypt` command line runs here, in a program of
// the age modules alone (Age, Cipher, Shredder, swift-crypto, Foundation), which starts in about
// the time `age` does; every other command line, including `--help`, `--version`, any usage
// error of encrypt and decrypt, and the age plugin name, replaces this process with the full
// program (FullProgram.swift), which reads it with the argument parser as it always does.
import AgeCommandLine

if let request = AgeFastPath.request(for: Array(CommandLine.arguments.dropFirst())) {
    AgeFastPath.run(request, report: AgeFastPath.report)
}
FullProgram.handOff()
