// The front program: what `scripts/build-release` installs as `securefoundation` (docs/CLI.md,
// "Installed programs"). A plain `encrypt` or `decrypt` command line runs here, in a program of
// the age modules alone (Age, Cipher, Shredder, swift-crypto, FoundationEssentials), which starts
// in about the time `age` does. Started as age-plugin-securefoundation (the link `agent
// install-plugin` makes), it is the agent's age plugin (AgentWire), so `age -d -j
// securefoundation` asks the agent without starting the full program. Every other command
// line, including `--help`, `--version` and any usage error of encrypt and decrypt, replaces
// this process with the full program (FullProgram.swift), which reads it with the argument
// parser as it always does.
import AgeCommandLine
import AgentWire
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

if let name = CommandLine.arguments.first, name.split(separator: "/").last.map(String.init) == AgentPlugin.programName {
    exit(AgentPlugin.run(arguments: Array(CommandLine.arguments.dropFirst())))
}

if let request = AgeFastPath.request(for: Array(CommandLine.arguments.dropFirst())) {
    AgeFastPath.run(request, report: AgeFastPath.report)
}
FullProgram.handOff()
