import Foundation

/// What each tampering must lead to, from the trust table of docs/SECURITY.md. A case not
/// named here must leave every command as on the untampered home (`baseline`).
///
/// `accepted` is the one list of the known residuals: cases the table marks accepted (or Open),
/// whose behaviour today is asserted as it is. When a fix lands (a rollback anchor in CONFIG, a
/// key table with generations, a revocation commitment), its cases move from `accepted` to a
/// refusal in `overrides`. `defects` are cases where the matrix found behaviour that
/// contradicts the table; they are asserted as they are until fixed.
enum Expectations {
    static func key(_ target: String, _ mutation: Mutation) -> String { "HOME/\(target) \(mutation.rawValue)" }

    /// Exit statuses on the untampered home.
    static let baseline: [Command: Int32] = [
        .alwaysItem: 0, .noneFile: 0, .lockedFile: 36, .writeWhileLocked: 0, .devices: 0, .readTarget: 36,
        .unlock: 0, .readItem: 0, .readFile: 0, .share: 0, .resume: 0,
    ]

    /// The untampered status of `command` for `target` (a `none` class file reads while locked).
    static func baseline(_ command: Command, target: String) -> Int32 {
        command == .readTarget && (target as NSString).lastPathComponent.hasPrefix("none") ? 0 : baseline[command]!
    }

    static func expected(_ key: String, _ command: Command, target: String) -> Int32 {
        overrides[key]?[command] ?? baseline(command, target: target)
    }

    /// Heavy commands run for these cases whatever the sample says.
    static let alwaysRunHeavy: [String: [Command]] = [
        "HOME/ RB": [.unlock], "HOME/ C": [.unlock],
        "HOME/vault.state D": [.unlock], "HOME/vault.state T": [.unlock], "HOME/vault.state R": [.unlock],
        "HOME/vault.state RB": [.unlock], "HOME/vault.state C": [.unlock], "HOME/vault.state S": [.unlock],
        "HOME/vault.state F": [.unlock],
        "HOME/attempts D": [.unlock], "HOME/attempts R": [.unlock], "HOME/attempts S": [.unlock], "HOME/attempts F": [.unlock],
        "HOME/protected-files.keys RB": [.readFile], "HOME/keychain.sqlite RB": [.readItem],
    ]

    /// Extra commands for some cases: a name, the arguments, the status they must give.
    struct Probe: Sendable {
        let name: String
        let arguments: @Sendable (Matrix) -> [String]
        let status: Int32
    }

    static let probes: [String: [Probe]] = [
        // Accepted: the older passcode opens an older vault.state.
        "HOME/ RB": [olderPasscode], "HOME/vault.state RB": [olderPasscode],
        // Accepted as that vault: the attacker's passcode opens the attacker's vault.state.
        "HOME/ C": [attackerPasscode], "HOME/vault.state C": [attackerPasscode],
    ]
    static let olderPasscode = Probe(name: "unlock with the passcode of the older copy", arguments: { ["vault", "unlock", "--passcode-file", $0.passcode1File] }, status: 0)
    static let attackerPasscode = Probe(name: "unlock with the attacker's passcode", arguments: { ["vault", "unlock", "--passcode-file", $0.scenario.attacker.pin] }, status: 0)

    /// Words the error of a refusing command must contain.
    static let keywords: [String: [Command: String]] = [:]

    /// Statuses that differ from the baseline.
    static let overrides: [String: [Command: Int32]] = [:]

    /// Known residuals: accepted today (the table says so), with the reason.
    static let accepted: [String: String] = [:]

    /// Behaviour that contradicts the trust table (found by the matrix).
    static let defects: [String: String] = [:]

    static var mentioned: Set<String> {
        Set(alwaysRunHeavy.keys).union(probes.keys).union(keywords.keys).union(overrides.keys).union(accepted.keys).union(defects.keys)
    }
}
