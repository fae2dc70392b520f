import Foundation
import Testing
import TestSupport

/// The homes the matrix tampers with, built once per run through the command line:
///
/// - the victim ("alpha"): a vault with a passcode and two security questions, its device key in
///   a file with a provider record in `CONFIG/vaults/`, keychain items of the six
///   accessibilities, protected files of the eight classes in `HOME/documents/`, a share group
///   it created with one member enrolled (bravo) and one enrolled then revoked (charlie), an
///   unlock agent, a device-key rotation interrupted by `kill -9` and resumed, a passcode
///   change, a class-key rotation, a key-pair rotation and a received file;
/// - bravo and charlie, the group's other devices;
/// - the attacker's home, made with a passcode and keys the attacker knows (for C), and the age
///   identities of its eight classes.
///
/// Snapshots: `m0` (before the device-key rotation), `mid` (the rotation interrupted, with its
/// journal), `m1` (after it), `final` (after the passcode change and the rotations): the older
/// copies are `m1` for `final` and `m0` for `mid`.
final class Scenario: @unchecked Sendable {
    static let classes = ["complete", "completeUnlessOpen", "completeUntilFirstUserAuthentication", "none"].flatMap { [$0, $0 + "ThisDeviceOnly"] }
    static let items = ["whenUnlocked", "afterFirstUnlock", "always"].flatMap { [$0, $0 + "ThisDeviceOnly"] }
    static let passcode1 = "tamper-passcode-one-5c1e"
    static let passcode2 = "tamper-passcode-two-9b7d"
    static let answers = ["tamper-answer-blue-31", "tamper-answer-paris-77"]
    static let attackerPasscode = "attacker-knows-this-0000"
    static let shared = "tamper-secret-shared-file-4e2a"

    static func itemSecret(_ accessibility: String) -> String { "tamper-secret-item-\(accessibility)-end" }
    static func fileSecret(_ name: String) -> String { name == "photo.bin" ? shared : "tamper-secret-file-\(name)-end" }

    /// What must never appear in the output of a command that was given no secret: the passcodes,
    /// the answers, the secrets of every class that needs the vault unlocked.
    static var lockedSecrets: [String] {
        [passcode1, passcode2, shared] + answers
            + items.filter { !$0.hasPrefix("always") }.map(itemSecret)
            + classes.filter { !$0.hasPrefix("none") }.map(fileSecret)
    }

    /// Every secret the scenario stored: what a refusing command must not print.
    static var allSecrets: [String] {
        lockedSecrets + items.filter { $0.hasPrefix("always") }.map(itemSecret) + classes.filter { $0.hasPrefix("none") }.map(fileSecret)
    }

    let directory: TemporaryDirectory
    var root: String { directory.path }
    var runtime: String { root + "/run" }
    let victim: Machine
    let bravo: Machine
    let charlie: Machine
    let attacker: Machine
    var passcode2File: String { victim.root + "/secrets/pin2" }
    var passcode1File: String { victim.pin }
    var documents: String { victim.home + "/documents" }
    /// Identities the attacker holds: its own eight classes and the victim's `none` class (whose
    /// key is `always.key`, in the home).
    var identities: [String] = []
    /// `RUNTIME` while the agent ran (relative entries).
    var runtimeEntries: [String] = []
    /// The file bravo sends.
    var sharedFile: String { bravo.root + "/photo.bin" }
    /// How long the build took.
    var buildSeconds = 0.0

    func snapshot(_ name: String) -> String { root + "/snap/" + name }

    init() throws {
        directory = try TemporaryDirectory.short(prefix: "sf-tamper")
        let runtime = directory.path + "/run"
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        victim = try Machine(root: directory.path + "/alpha", name: "alpha", passcode: Self.passcode1, runtime: runtime)
        bravo = try Machine(root: directory.path + "/bravo", name: "bravo", passcode: "bravo-passcode-11", runtime: runtime)
        charlie = try Machine(root: directory.path + "/charlie", name: "charlie", passcode: "charlie-passcode-22", runtime: runtime)
        attacker = try Machine(root: directory.path + "/attacker", name: "attacker", passcode: Self.attackerPasscode, runtime: runtime)
        try Lab.write(passcode2File, Array(Self.passcode2.utf8))
        try FileManager.default.createDirectory(atPath: root + "/snap", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let started = ContinuousClock.now
        try build()
        buildSeconds = Double((ContinuousClock.now - started).components.seconds)
    }

    private func home(_ machine: Machine, named name: String, questions: Bool) throws {
        let answers = machine.root + "/secrets/answers"
        try Lab.write(answers, Array((Self.answers.joined(separator: "\n") + "\n").utf8))
        try machine.must(["vault", "init", "--passcode-file", machine.pin, "--device-key-provider", "file"]
            + (questions ? ["--question", "Favourite colour?", "--question", "City of birth?", "--answers-file", answers] : []))
        try FileManager.default.createDirectory(atPath: machine.home + "/documents", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try machine.must(["agent", "start"], agent: true)
        try machine.must(["agent", "unlock", "--passcode-file", machine.pin], deviceKey: false, agent: true)
        for item in Self.items {
            let secret = machine === victim ? Self.itemSecret(item) : "attacker-item-\(item)"
            try machine.must(["keychain", "add-generic-password", "-s", "svc", "-a", item, "-w", "-", "--accessibility", item],
                             stdin: Array(secret.utf8), agent: true)
        }
        for name in Self.classes {
            let secret = machine === victim ? Self.fileSecret(name) : "attacker-file-\(name)"
            try machine.must(["protect", "write", "--class", name, "-o", machine.home + "/documents/" + name], stdin: Array(secret.utf8), agent: true)
        }
        try machine.must(["share", "init", "--new-group", "--name", name], agent: true)
    }

    private func enrol(_ peer: Machine, as name: String) throws {
        try peer.must(["vault", "init", "--passcode-file", peer.pin])
        let invitation = victim.root + "/invite-\(name).json"
        try victim.must(["share", "invite", "-o", invitation], agent: true)
        let copied = peer.root + "/invite.json"
        try Lab.copy(invitation, to: copied)
        let request = peer.root + "/request.json"
        try peer.must(["share", "join", copied, "--name", name, "-o", request, "--passcode-file", peer.pin])
        let certificate = victim.root + "/\(name).pem"
        try victim.must(["share", "approve", request, "-o", certificate], agent: true)
        try peer.must(["share", "join", "--certificate", certificate, "--passcode-file", peer.pin])
        Lab.remove(invitation)
        Lab.remove(certificate)
    }

    private func save(_ name: String, config: Bool) throws {
        try FileManager.default.createDirectory(atPath: snapshot(name), withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try Lab.copy(victim.home, to: snapshot(name) + "/home")
        if config { try Lab.copy(victim.config, to: snapshot(name) + "/config") }
    }

    private func build() throws {
        // The attacker's home and identities.
        try home(attacker, named: "mallory", questions: true)
        let identityDirectory = attacker.root + "/identities"
        try FileManager.default.createDirectory(atPath: identityDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        for name in Self.classes {
            try attacker.must(["protect", "export-identity", "--class", name, "-o", identityDirectory + "/" + name], agent: true)
            identities.append(identityDirectory + "/" + name)
        }
        try attacker.must(["agent", "stop"], deviceKey: false, agent: true)

        // The victim, with an agent while it is built.
        try home(victim, named: "alpha", questions: true)
        try enrol(bravo, as: "bravo")
        try enrol(charlie, as: "charlie")
        let runtimeDirectory = runtime + "/securefoundation"
        runtimeEntries = Lab.entries(under: runtimeDirectory)
        try victim.must(["agent", "stop"], deviceKey: false, agent: true)
        try save("m0", config: false)

        // A device-key rotation killed in the middle (its journal and staged key in CONFIG), then resumed.
        let killed = try victim.run(["vault", "rotate-device-key", "--passcode-file", passcode1File],
                                    extra: ["SECUREFOUNDATION_TEST_KILL_AT": "keychain batch:1"])
        #expect(killed.status == 128 + SIGKILL, "rotate-device-key was not killed: \(killed.status) \(killed.stderr)")
        try save("mid", config: true)
        try victim.must(["vault", "rotate-device-key", "--resume", "--passcode-file", passcode1File])
        try save("m1", config: false)

        // What changes between the older copies and the final home.
        try victim.must(["vault", "change-passcode", "--passcode-file", passcode1File, "--new-passcode-file", passcode2File])
        try victim.must(["vault", "rotate-class-keys", "--passcode-file", passcode2File])
        try victim.must(["protect", "rotate-keys", documents, "--passcode-file", passcode2File])
        try victim.must(["share", "revoke", "charlie"])
        try Lab.write(sharedFile, Array(Self.shared.utf8))
        let received = try receive(at: victim, passcodeFile: passcode2File)
        #expect(received.send == 0 && received.serve == 0, "the first share failed: \(received)")
        try save("final", config: true)

        // The victim's `none` identity: anyone who reads always.key can compute it.
        let victimNone = identityDirectory + "/victim-none"
        try victim.must(["protect", "export-identity", "--class", "none", "-o", victimNone])
        identities.append(victimNone)
    }

    /// The victim serves (with the passcode), bravo sends `sharedFile`: the exit statuses of
    /// both (serve nil: it stopped before listening) and the serve's output.
    func receive(at victim: Machine, passcodeFile: String) throws -> (serve: Int32?, send: Int32, output: String) {
        guard let started = try victim.serve(passcodeFile: passcodeFile) else { return (nil, -1, "") }
        let (server, port) = started
        let sent = try bravo.run(["share", "send", sharedFile, "--to", "127.0.0.1:\(port)", "--device", "alpha",
                                  "--timeout", "60", "--passcode-file", bravo.pin])
        if sent.status != 0 { server.kill() }
        let served = try server.wait(timeout: .seconds(120))
        return (served.signalled ? 128 + served.status : served.status, sent.status, served.text + served.errorText + sent.all)
    }
}
