import AgeCommandLine
import ArgumentParser
import Foundation
import SecureFoundation

/// `securefoundation agent plugin-identity`: the `AGE-PLUGIN-SECUREFOUNDATION-1…` identity with
/// which the real `age` opens protected files through this agent.
struct AgentPluginIdentityCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "plugin-identity",
        abstract: "Print the age plugin identity that opens this vault's protected files through the agent.",
        discussion: """
        `age -d -i IDENTITY_FILE FILE` (or `age -d -j securefoundation FILE` for the default data \
        directory and any class) runs age-plugin-securefoundation, which asks the unlock agent \
        to unwrap the file key; the class identity never leaves the agent, and its class rules \
        hold (complete and completeUnlessOpen files open only while it is unlocked). The \
        identity holds no secret: it names the data directory and, with --class, the only \
        class it opens. Install the plugin first with `securefoundation agent install-plugin`.

        Examples:
          securefoundation agent plugin-identity --class complete > sf-complete.txt
          age -d -i sf-complete.txt notes.age
          age -d -j securefoundation notes.age
        """)

    @Option(name: .customLong("home"), help: ArgumentHelp("The vault's data directory (default: as the vault commands).", valueName: "dir"))
    var home: String?

    @Option(name: .customLong("class"), help: ArgumentHelp("Open only files of this class (default: any class).", valueName: "class"), completion: CompletionValues.fileProtectionClasses)
    var protection: String?

    func run() throws {
        try CLI.run {
            var cls: FileProtectionClass?
            if let protection {
                guard let value = FileProtectionClass(name: protection) else {
                    throw ProtectedFileError.invalidArgument("unknown class \(protection.debugDescription); one of \(FileProtectionClass.allValues.map(\.name).joined(separator: ", "))")
                }
                cls = value
            }
            let resolvedHome = VaultPaths.absolute(home ?? VaultPaths.defaultDirectory())
            let identity = try AgentAgePlugin.Identity(home: resolvedHome, protection: cls).encoded()
            try VaultCLI.say("# securefoundation age plugin identity: data directory \(resolvedHome), class \(cls?.name ?? "any")\n\(identity)")
        }
    }
}

/// `securefoundation agent install-plugin`: puts `age-plugin-securefoundation` (a link to the
/// front program, or to this program without one) where `age` finds it.
struct AgentInstallPluginCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "install-plugin",
        abstract: "Install age-plugin-securefoundation (a symbolic link to the securefoundation you ran) beside it, or in --dir.",
        discussion: """
        `age` runs plugins found on $PATH; securefoundation acts as age-plugin-securefoundation when \
        started under that name. The link names the `securefoundation` you ran (for an installed one, \
        the front program, which runs the plugin without starting the full program; CLI.md in the \
        documentation) and is made in its directory unless --dir names another one (which must be on \
        $PATH for age to find it). An existing link to it is kept, a link to the full program is \
        replaced by one to the front program; anything else at that path is refused.

        Examples:
          securefoundation agent install-plugin
          securefoundation agent install-plugin --dir ~/.local/bin
        """)

    @Option(name: .customLong("dir"), help: ArgumentHelp("Where to put the link (default: the directory of the securefoundation you ran).", valueName: "dir"))
    var directory: String?

    /// What the plugin link in `directory` points to, when it is a symbolic link to the front
    /// program that started this one (the same file); nil otherwise.
    static func existingLinkToFrontProgram(in directory: String) -> String? {
        let link = directory + "/" + AgentAgePlugin.programName
        guard let front = CLI.frontProgramPath,
              let info = try? FileCalls.linkStatus(link), info.kind == .symbolicLink,
              let linked = try? FileCalls.status(atPath: link), let frontFile = try? FileCalls.status(atPath: front),
              linked.device == frontFile.device, linked.inode == frontFile.inode,
              let destination = try? FileManager.default.destinationOfSymbolicLink(atPath: link) else { return nil }
        return destination
    }

    func run() throws {
        try CLI.run {
            // The link names the front program when it handed this command on (it runs the
            // plugin itself, without starting this program), else this program; it goes beside
            // the command the user ran (the front program's directory, on the PATH).
            let target = CLI.frontProgramPath ?? CLI.executablePath()
            let dir = VaultPaths.absolute(directory ?? (CLI.invokedProgramPath() as NSString).deletingLastPathComponent)
            // A link to the front program (by another path) is kept; a link to this program, made
            // before the front program ran the plugin, is replaced by one to the front program.
            if let kept = Self.existingLinkToFrontProgram(in: dir) {
                try VaultCLI.say("\(dir)/\(AgentAgePlugin.programName) -> \(kept)")
                return
            }
            let link = try AgentAgePlugin.installLink(in: dir, target: target, replacing: CLI.frontProgramPath == nil ? nil : CLI.executablePath())
            try VaultCLI.say("\(link) -> \(target)")
        }
    }
}
