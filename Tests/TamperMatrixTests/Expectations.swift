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
        // Refused: the rollback anchor beside the device key holds a newer generation.
        "HOME/ RB": [olderPasscodeRefused], "HOME/vault.state RB": [olderPasscodeRefused],
        // Refused: the attacker's vault.state names another device key (its check value).
        "HOME/ C": [attackerPasscodeRefused], "HOME/vault.state C": [attackerPasscodeRefused],
    ]
    static let olderPasscodeRefused = Probe(name: "unlock with the passcode of the older copy (refused: rolled back)",
                                            arguments: { ["vault", "unlock", "--passcode-file", $0.passcode1File] }, status: 2)
    static let attackerPasscodeRefused = Probe(name: "unlock with the attacker's passcode (refused: another device key)",
                                               arguments: { ["vault", "unlock", "--passcode-file", $0.scenario.attacker.pin] }, status: 1)
    static let olderPasscode = Probe(name: "unlock with the passcode of the older copy", arguments: { ["vault", "unlock", "--passcode-file", $0.passcode1File] }, status: 0)
    static let attackerPasscode = Probe(name: "unlock with the attacker's passcode", arguments: { ["vault", "unlock", "--passcode-file", $0.scenario.attacker.pin] }, status: 0)

    /// Words the error of a refusing command must contain.
    static let keywords: [String: [Command: String]] = [
        "HOME/ R": [.alwaysItem: "not a directory"],
        "HOME/ S": [.alwaysItem: "a symlink is not accepted"],
        "HOME/ C": [.alwaysItem: "not this vault's", .unlock: "wrong passcode"],
        "HOME/vault.state D": [.unlock: "no vault"],
        "HOME/vault.state S": [.unlock: "not a regular file"],
        "HOME/vault.state RB": [.unlock: "wrong passcode"],
        "HOME/attempts R": [.unlock: "damaged"],
        "HOME/attempts S": [.unlock: "not a regular file"],
        "HOME/always.key D": [.alwaysItem: "integrity check", .noneFile: "key table is unusable"],
        "HOME/always.key S": [.alwaysItem: "not a regular file"],
        "HOME/keychain.sqlite C": [.alwaysItem: "blind-index key"],
        "HOME/keychain.sqlite F": [.alwaysItem: "class binding"],
        "HOME/keychain.sqlite S": [.alwaysItem: "not a regular file"],
        "HOME/protected-files.keys F": [.noneFile: "key table is unusable", .writeWhileLocked: "does not verify for this vault"],
        "HOME/protected-files.keys C": [.noneFile: "key table is unusable", .writeWhileLocked: "was rolled back"],
        "HOME/protected-files.keys RB": [.writeWhileLocked: "was rolled back"],
        "HOME/protected-files.keys S": [.writeWhileLocked: "not a regular file"],
        "HOME/documents/none C": [.readTarget: "not wrapped to this vault"],
        "HOME/documents/complete S": [.readTarget: "symbolic link"],
    ]

    /// Statuses that differ from the baseline (100: `share list --devices` does not list charlie
    /// as revoked; 101: exit 0 with another value than the untampered one; 255: `share serve`
    /// stopped before listening). 2 damaged, 5 no vault, 36 locked, 44 not found, 74 refused
    /// (insecure or missing file): docs/CLI.md.
    static let overrides: [String: [Command: Int32]] = [
        // A keychain read in a home with neither a vault nor a keychain creates nothing: 5.
        "HOME/ D": [.alwaysItem: 5, .devices: 44, .lockedFile: 5, .noneFile: 5, .unlock: 5, .writeWhileLocked: 5],
        "HOME/ T": [.alwaysItem: 5, .devices: 44, .lockedFile: 5, .noneFile: 5, .writeWhileLocked: 5],
        "HOME/ R": [.alwaysItem: 74, .devices: 74, .lockedFile: 74, .noneFile: 74, .writeWhileLocked: 74],
        "HOME/ RB": [.devices: 2, .lockedFile: 2, .noneFile: 2, .unlock: 3, .writeWhileLocked: 2],
        "HOME/ C": [.alwaysItem: 1, .devices: 1, .noneFile: 101, .unlock: 3, .writeWhileLocked: 36],
        "HOME/ S": [.alwaysItem: 74, .devices: 74, .lockedFile: 74, .noneFile: 74, .writeWhileLocked: 74],
        "HOME/ F": [.alwaysItem: 5, .devices: 44, .lockedFile: 5, .noneFile: 5, .writeWhileLocked: 5],
        "HOME/always.key D": [.alwaysItem: 2, .devices: 1, .noneFile: 2],
        "HOME/always.key T": [.alwaysItem: 2, .devices: 1, .noneFile: 2],
        "HOME/always.key R": [.alwaysItem: 2, .devices: 1, .noneFile: 2],
        "HOME/always.key RB": [.alwaysItem: 2, .devices: 1, .noneFile: 2],
        "HOME/always.key C": [.alwaysItem: 2, .devices: 1, .noneFile: 2],
        "HOME/always.key S": [.alwaysItem: 74, .devices: 1, .noneFile: 74],
        "HOME/always.key F": [.alwaysItem: 2, .devices: 1, .noneFile: 2],
        "HOME/attempts R": [.unlock: 4],
        "HOME/attempts S": [.readFile: 74, .unlock: 74],
        "HOME/documents/ D": [.lockedFile: 74, .noneFile: 74],
        "HOME/documents/ T": [.lockedFile: 74, .noneFile: 74],
        "HOME/documents/ R": [.lockedFile: 74, .noneFile: 74],
        "HOME/documents/ RB": [.noneFile: 2],
        "HOME/documents/ C": [.noneFile: 2],
        "HOME/documents/ S": [.lockedFile: 74, .noneFile: 74],
        "HOME/documents/complete D": [.lockedFile: 74, .readTarget: 74],
        "HOME/documents/complete T": [.lockedFile: 2, .readTarget: 2],
        "HOME/documents/complete R": [.lockedFile: 2, .readTarget: 2],
        "HOME/documents/complete S": [.lockedFile: 74, .readTarget: 74],
        "HOME/documents/complete F": [.lockedFile: 0, .readTarget: 101],
        "HOME/documents/completeThisDeviceOnly D": [.readTarget: 74],
        "HOME/documents/completeThisDeviceOnly T": [.readTarget: 2],
        "HOME/documents/completeThisDeviceOnly R": [.readTarget: 2],
        "HOME/documents/completeThisDeviceOnly S": [.readTarget: 74],
        "HOME/documents/completeThisDeviceOnly F": [.readTarget: 101],
        "HOME/documents/completeUnlessOpen D": [.readTarget: 74],
        "HOME/documents/completeUnlessOpen T": [.readTarget: 2],
        "HOME/documents/completeUnlessOpen R": [.readTarget: 2],
        "HOME/documents/completeUnlessOpen S": [.readTarget: 74],
        "HOME/documents/completeUnlessOpen F": [.readTarget: 101],
        "HOME/documents/completeUnlessOpenThisDeviceOnly D": [.readTarget: 74],
        "HOME/documents/completeUnlessOpenThisDeviceOnly T": [.readTarget: 2],
        "HOME/documents/completeUnlessOpenThisDeviceOnly R": [.readTarget: 2],
        "HOME/documents/completeUnlessOpenThisDeviceOnly S": [.readTarget: 74],
        "HOME/documents/completeUnlessOpenThisDeviceOnly F": [.readTarget: 101],
        "HOME/documents/completeUntilFirstUserAuthentication D": [.readTarget: 74],
        "HOME/documents/completeUntilFirstUserAuthentication T": [.readTarget: 2],
        "HOME/documents/completeUntilFirstUserAuthentication R": [.readTarget: 2],
        "HOME/documents/completeUntilFirstUserAuthentication S": [.readTarget: 74],
        "HOME/documents/completeUntilFirstUserAuthentication F": [.readTarget: 101],
        "HOME/documents/completeUntilFirstUserAuthenticationThisDeviceOnly D": [.readTarget: 74],
        "HOME/documents/completeUntilFirstUserAuthenticationThisDeviceOnly T": [.readTarget: 2],
        "HOME/documents/completeUntilFirstUserAuthenticationThisDeviceOnly R": [.readTarget: 2],
        "HOME/documents/completeUntilFirstUserAuthenticationThisDeviceOnly S": [.readTarget: 74],
        "HOME/documents/completeUntilFirstUserAuthenticationThisDeviceOnly F": [.readTarget: 101],
        "HOME/documents/none D": [.noneFile: 74, .readTarget: 74],
        "HOME/documents/none T": [.noneFile: 2, .readTarget: 2],
        "HOME/documents/none R": [.noneFile: 2, .readTarget: 2],
        "HOME/documents/none RB": [.noneFile: 2, .readTarget: 2],
        "HOME/documents/none C": [.noneFile: 2, .readTarget: 2],
        "HOME/documents/none S": [.noneFile: 74, .readTarget: 74],
        "HOME/documents/none F": [.noneFile: 101, .readTarget: 101],
        "HOME/documents/noneThisDeviceOnly D": [.readTarget: 74],
        "HOME/documents/noneThisDeviceOnly T": [.readTarget: 2],
        "HOME/documents/noneThisDeviceOnly R": [.readTarget: 2],
        "HOME/documents/noneThisDeviceOnly RB": [.readTarget: 2],
        "HOME/documents/noneThisDeviceOnly C": [.readTarget: 2],
        "HOME/documents/noneThisDeviceOnly S": [.readTarget: 74],
        "HOME/documents/noneThisDeviceOnly F": [.readTarget: 101],
        "HOME/keychain.sqlite D": [.alwaysItem: 44, .devices: 44],
        "HOME/keychain.sqlite T": [.alwaysItem: 2, .devices: 2, .share: 255],
        "HOME/keychain.sqlite R": [.alwaysItem: 2, .devices: 1],
        "HOME/keychain.sqlite RB": [.devices: 2],
        "HOME/keychain.sqlite C": [.alwaysItem: 1, .devices: 1],
        "HOME/keychain.sqlite S": [.alwaysItem: 74, .devices: 74],
        "HOME/keychain.sqlite F": [.alwaysItem: 2, .devices: 2],
        "HOME/protected-files.keys D": [.lockedFile: 2, .noneFile: 2, .writeWhileLocked: 2],
        "HOME/protected-files.keys T": [.lockedFile: 2, .noneFile: 2, .writeWhileLocked: 2],
        "HOME/protected-files.keys R": [.lockedFile: 2, .noneFile: 2, .readFile: 2, .writeWhileLocked: 2],
        "HOME/protected-files.keys RB": [.lockedFile: 2, .noneFile: 2, .readFile: 2, .writeWhileLocked: 2],
        "HOME/protected-files.keys C": [.lockedFile: 2, .noneFile: 2, .writeWhileLocked: 2],
        "HOME/protected-files.keys S": [.lockedFile: 74, .noneFile: 74, .writeWhileLocked: 74],
        "HOME/protected-files.keys F": [.noneFile: 2, .writeWhileLocked: 2],
        "HOME/share-inbox/photo.bin D": [.readTarget: 74],
        "HOME/share-inbox/photo.bin T": [.readTarget: 2],
        "HOME/share-inbox/photo.bin R": [.readTarget: 2],
        "HOME/share-inbox/photo.bin RB": [.readTarget: 74],
        "HOME/share-inbox/photo.bin S": [.readTarget: 74],
        "HOME/share-inbox/photo.bin F": [.readTarget: 101],
        "HOME/vault.lock S": [.alwaysItem: 74, .devices: 74, .lockedFile: 74, .noneFile: 74, .writeWhileLocked: 74],
        "HOME/vault.state D": [.lockedFile: 5, .noneFile: 5, .unlock: 5, .writeWhileLocked: 5],
        "HOME/vault.state T": [.alwaysItem: 2, .devices: 2, .lockedFile: 2, .noneFile: 2, .unlock: 2, .writeWhileLocked: 2],
        "HOME/vault.state R": [.alwaysItem: 2, .devices: 2, .lockedFile: 2, .noneFile: 2, .unlock: 2, .writeWhileLocked: 2],
        "HOME/vault.state RB": [.unlock: 3],
        "HOME/vault.state C": [.alwaysItem: 1, .devices: 1, .unlock: 3, .writeWhileLocked: 36],
        "HOME/vault.state S": [.alwaysItem: 74, .devices: 74, .lockedFile: 74, .noneFile: 74, .unlock: 74, .writeWhileLocked: 74],
        "HOME/vault.state F": [.unlock: 2],
    ]

    /// Cases whose effect depends on where the flipped byte of R lands in contents that are random
    /// in each run (a row, or a free part of a page SQLite never reads): each command may give the
    /// status `overrides` names or its baseline.
    /// vault.state R too: a flipped digit of `generation` is read by locked commands (which do
    /// not authenticate the state) as before, and refused at unlock.
    /// protected-files.keys R too: a flipped byte in an entry's MAC is refused (format 3), one
    /// in a field that no MAC covers is not.
    static let baselineOrOverride: Set<String> = ["HOME/keychain.sqlite R", "HOME/vault.state R", "HOME/protected-files.keys R"]

    /// Known residuals: cases the trust table accepts (or lists as Open), asserted as they behave
    /// today. A fix moves its cases from here to a refusal in `overrides`.
    static let accepted: [String: String] = {
        var list: [String: String] = [
            "HOME/always.key C": "a known always key: existing always items stop opening, later always items are sealed under it",
            "HOME/always.key F": "a known always key: existing always items stop opening, later always items are sealed under it",
            "HOME/keychain.sqlite RB": "keychain rollback: rows restored from an older copy open (Open: the keychain's rows are not anchored); the share group's record is anchored, so the revocation of charlie is not undone (devices: 2)",
        ]
        for name in Scenario.classes {
            list["HOME/documents/\(name) F"] = "a none-class file in its place reads as this file (anyone holding the none recipient writes one)"
        }
        list["HOME/share-inbox/photo.bin F"] = "a none-class file in its place is listed and read as received (nothing at rest records the sender)"
        return list
    }()

    /// Behaviour that contradicts the trust table or docs/CLI.md, found by the matrix; asserted
    /// as it is until fixed.
    static let defects: [String: String] = [
        // Fixed since: a truncated always.key (VaultError.corrupted) exited 1 in the keychain
        // ("key unavailable") and 74 in protect read; both now carry the vault's error (2).
        // Fixed since: a home without the keychain (keychain.sqlite D; HOME D, T, F) listed no
        // device with exit 0; it is now notAMember (44), as the table says.
        :
    ]

    static var mentioned: Set<String> {
        Set(alwaysRunHeavy.keys).union(probes.keys).union(keywords.keys).union(overrides.keys).union(accepted.keys).union(defects.keys)
    }
}
