import AgeCommandLine
import Foundation
import SecureFoundation

extension Tour {
    /// The unlock agent: started on a private socket (in a thread here; `agent start` runs it as
    /// its own process), unlocked once, serving the keys of a manager that never unlocks.
    mutating func agentStep(passcode: SecretBytes) throws {
        say("Unlock agent: a manager that never unlocks reads a secure item through the agent, until the agent locks")
        let directory = root + "/config/agent"
        try SecureFile.ensurePrivateDirectory(directory)
        let provider = FileDeviceKeyProvider(path: deviceKeyPath)
        let server = try AgentServer(manager: CryptoManager(directory: dataDirectory, deviceKeyProvider: provider, policy: .interactive),
                                     socketPath: directory + "/agent.sock")
        try server.bind()
        let finished = DispatchSemaphore(value: 0)
        let thread = Thread {
            try? server.run()
            finished.signal()
        }
        thread.start()
        defer {
            server.stop()
            _ = finished.wait(timeout: .now() + 10)
        }
        let client = AgentClient(socketPath: directory + "/agent.sock", timeout: 30)
        let locked = try CryptoManager(directory: dataDirectory, deviceKeyProvider: provider, policy: .interactive, unlockedKeySource: client)
        let keychain = try Keychain(manager: locked)
        func isLocked(_ error: any Error) -> Bool {
            if case KeychainError.interactionNotAllowed(_, .locked) = error { return true }
            return false
        }
        let before = try expectFailure("reading the secure item before the agent is unlocked",
                                       { _ = try keychain.securePasswordData(forService: "api.example.com", account: "deploy-bot") }, check: isLocked)
        note("agent started, locked: \(before)")
        _ = try client.unlock(passcode: passcode)
        let token = try keychain.securePasswordData(forService: "api.example.com", account: "deploy-bot")
        defer { token.wipe() }
        try expect(token == SecretBytes(utf8: "api-token-7f3a"), "the secure item read through the agent differs")
        try expect(!locked.isUnlocked, "the manager unlocked itself instead of asking the agent")
        proves("the agent ran the KDF once; this manager never saw the passcode or the application key, only the whenUnlocked class key")
        let ageRun = try ageThroughAgent(socket: directory + "/agent.sock")
        try client.lock()
        _ = try expectFailure("reading the secure item after `agent lock`",
                              { _ = try keychain.securePasswordData(forService: "api.example.com", account: "deploy-bot") }, check: isLocked)
        try keychain.close()
        proves("after `agent lock` the whenUnlocked key is refused again (SO_PEERCRED same uid, socket 0600 in a 0700 directory)")
        if let ageRun {
            let refused = try ageRun()
            try expect(refused.status != 0 && refused.output.isEmpty && refused.error.contains("is locked, so the vault's complete files stay closed"),
                       "age opened the complete file through a locked agent: \(refused.error)")
            proves("after `agent lock` the real age is refused too: \(refused.error.split(separator: "\n").first ?? "")")
        }
    }

    /// The real `age` (when installed) opens the complete file of the protected-files step
    /// through the agent with `age -d -j securefoundation`: the class identity stays in the agent.
    /// Returns a function that runs the same command again (for after the lock).
    func ageThroughAgent(socket: String) throws -> (() throws -> (status: Int32, output: [UInt8], error: String))? {
        guard let age = which("age") else {
            note("age is not installed: skipping `age -d -j securefoundation` (Debian: apt-get install age)")
            return nil
        }
        let bin = root + "/config/bin"
        try SecureFile.ensurePrivateDirectory(bin)
        try AgentAgePlugin.installLink(in: bin, target: CLI.executablePath())
        let order = filesDirectory + "/inbox/order-42.json"
        let environment = ["PATH": bin + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"),
                           "SECUREFOUNDATION_AGENT_SOCKET": socket]
        let run = { try runTool(age, ["-d", "-j", AgentAgePlugin.name, order], environment: environment) }
        let opened = try run()
        try expect(opened.status == 0 && String(decoding: opened.output, as: UTF8.self).contains("espresso machine"),
                   "age -d -j securefoundation did not open the complete file through the agent: \(opened.error)")
        proves("`age -d -j securefoundation inbox/order-42.json` (the real age, through age-plugin-securefoundation) read the complete file; the agent unwrapped its key and kept the class identity")
        return run
    }
}
