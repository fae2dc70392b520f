import AgeCommandLine
import ArgumentParser
import Foundation
import SecureFoundation

/// `securefoundation keychain …`: the item verbs of macOS `security`, on the application keychain.
struct KeychainCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keychain",
        abstract: "Add, find, delete and list keychain items (the verbs of macOS `security`).",
        discussion: """
        The keychain is the SQLite database HOME/keychain.sqlite, where HOME is --home, \
        else $SECUREFOUNDATION_HOME, else $XDG_DATA_HOME/securefoundation, else \
        ~/.local/share/securefoundation. Service and account names and passwords are stored \
        encrypted (KEYCHAIN.md in the documentation).

        Items of the whenUnlocked and afterFirstUnlock classes need the vault unlocked: give its \
        passcode with --passcode-file. Items of the always class need only the device key.

        Exit status (CLI.md in the documentation): 0 success, 44 item not found (as `security`), 45 duplicate \
        item, 36 class key unavailable (vault locked), 3 wrong passcode, 4 too many attempts \
        (wait), 5 no vault, 2 damaged keychain, 74 a file cannot be read or written, 64 usage, \
        1 any other error.

        Examples:
          securefoundation keychain add-generic-password -s mail -a alice -w - \\
              --accessibility always < pw.txt
          securefoundation keychain find-generic-password -s mail -a alice -w
        """,
        subcommands: [AddGenericPassword.self, FindGenericPassword.self, DeleteGenericPassword.self, DumpKeychain.self]
    )
}

/// Where the keychain is (the vault's `HomeOptions`) and how to unlock its keys.
struct KeychainStoreOptions: ParsableArguments {
    @OptionGroup var home: HomeOptions

    @Option(name: .customLong("passcode-file"), help: "Unlock the vault with the passcode in this file (`-` for stdin), for whenUnlocked and afterFirstUnlock items.")
    var passcodeFile: String?

    /// Opens the crypto manager (unlocking it when a passcode file is given) and its keychain.
    /// Without a passcode file it stays locked: always items open, and a running agent that
    /// holds the vault unlocked serves the other classes' keys.
    /// - Parameter readOnly: The command only reads or deletes: in a data directory that holds
    ///   neither a vault nor a keychain, nothing is created (no directory, lock, keychain or
    ///   device key) and the command fails with ``VaultError/notSetUp`` (exit 5).
    func open(readOnly: Bool = false) throws -> Keychain {
        if readOnly {
            // Only for a home that is missing or a real directory without either file (lstat: a
            // symbolic link or another file where the home should be goes on to be refused as
            // it always was).
            let directory = home.directory
            func missing(_ path: String) -> Bool {
                do { _ = try FileCalls.linkStatus(path); return false } catch { return error.code == ENOENT }
            }
            let isDirectory = (try? FileCalls.linkStatus(directory))?.kind == .directory
            let empty = isDirectory && missing(directory + "/vault.state") && missing(directory + "/keychain.sqlite")
            if missing(directory) || empty {
                throw (try? FileCalls.linkStatus(directory + "/erased")) != nil ? VaultError.erased : VaultError.notSetUp
            }
        }
        let manager = try home.manager()
        try VaultCLI.unlock(manager, passcodeFile: passcodeFile, withoutFile: .stayLocked)
        return try Keychain(manager: manager)
    }
}

extension KeychainCommand {
    /// `add-generic-password … -w` with `-w` last means "prompt for the password", as in macOS
    /// `security`; ArgumentParser would take it for an option missing its value, so it is dropped
    /// (without -w the command prompts).
    static func droppingTrailingPasswordFlag(_ arguments: [String]) -> [String] {
        guard arguments.last == "-w",
              let keychain = arguments.firstIndex(of: "keychain"),
              arguments.index(after: keychain) < arguments.endIndex,
              arguments[arguments.index(after: keychain)] == "add-generic-password"
        else { return arguments }
        return Array(arguments.dropLast())
    }

    /// Parses an accessibility name.
    static func accessibility(_ name: String) throws -> Accessibility {
        guard let value = Accessibility(name: name) else {
            throw ValidationError("unknown accessibility \(name); use whenUnlocked, afterFirstUnlock or always, optionally with ThisDeviceOnly (for example alwaysThisDeviceOnly)")
        }
        return value
    }

    /// Text of a date as `security` prints it: "20261122043800Z".
    static func timestamp(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMddHHmmss'Z'"
        return formatter.string(from: date)
    }

    /// Quotes a name for listings, escaping quotes, backslashes and control characters.
    static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F: out += String(format: "\\%03o", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// One item's attributes for `--json` (docs/CLI.md, "JSON output"): never its password.
    struct ItemJSON: Encodable {
        var itemClass: String
        var accessibility: String
        var available: Bool
        var unavailableReason: String?
        var service: String?
        var account: String?
        var server: String?
        var networkProtocol: String?
        var port: Int?
        var path: String?
        var label: String?
        var comment: String?
        var created: Date?
        var modified: Date?

        enum CodingKeys: String, CodingKey {
            case itemClass = "class", accessibility, available, unavailableReason, service, account, server
            case networkProtocol = "protocol", port, path, label, comment, created, modified
        }

        init(_ summary: ItemSummary) {
            itemClass = summary.itemClass == .genericPassword ? "genp" : "inet"
            accessibility = summary.accessibility.name
            guard let attributes = summary.attributes else {
                available = false
                unavailableReason = summary.unavailable.map { CLI.describe($0) } ?? "class key unavailable"
                return
            }
            available = true
            let key = attributes.key
            account = key.account
            if key.itemClass == .genericPassword {
                service = key.service
            } else {
                server = key.server ?? ""
                networkProtocol = key.networkProtocol
                port = key.port
                path = key.path
            }
            label = attributes.label
            comment = attributes.comment
            created = attributes.creationDate
            modified = attributes.modificationDate
        }
    }

    /// The attribute listing of one item, in the style of `security`.
    static func describe(_ summary: ItemSummary, path: String) -> String {
        var lines = ["keychain: \(quoted(path))"]
        lines.append("class: \(summary.itemClass == .genericPassword ? "\"genp\"" : "\"inet\"")")
        lines.append("attributes:")
        lines.append("    \"pdmn\"<string>=\(quoted(summary.accessibility.name))")
        guard let attributes = summary.attributes else {
            lines.append("    (names unavailable: \(summary.unavailable.map { CLI.describe($0) } ?? "class key unavailable"))")
            return lines.joined(separator: "\n")
        }
        let key = attributes.key
        lines.append("    \"acct\"<blob>=\(quoted(key.account))")
        if key.itemClass == .genericPassword {
            lines.append("    \"svce\"<blob>=\(quoted(key.service))")
        } else {
            lines.append("    \"srvr\"<blob>=\(quoted(key.server ?? ""))")
            if let networkProtocol = key.networkProtocol { lines.append("    \"ptcl\"<string>=\(quoted(networkProtocol))") }
            if let port = key.port { lines.append("    \"port\"<uint32>=\(port)") }
            if let path = key.path { lines.append("    \"path\"<blob>=\(quoted(path))") }
        }
        lines.append("    \"labl\"<blob>=\(attributes.label.map(quoted) ?? "<NULL>")")
        lines.append("    \"icmt\"<blob>=\(attributes.comment.map(quoted) ?? "<NULL>")")
        lines.append("    \"cdat\"<timedate>=\(quoted(timestamp(attributes.creationDate)))")
        lines.append("    \"mdat\"<timedate>=\(quoted(timestamp(attributes.modificationDate)))")
        return lines.joined(separator: "\n")
    }
}

struct AddGenericPassword: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add-generic-password",
        abstract: "Add a generic password item.",
        usage: """
        securefoundation keychain add-generic-password -s SERVICE -a ACCOUNT
            [-w PASSWORD] [-U] [options]
        """,
        discussion: """
        Without -U an existing item with the same service and account is an error (exit 45); \
        with -U the item is added or replaced in one write, so concurrent -U never fails. \
        The password comes from -w, from standard input with `-w -`, or else from the terminal \
        (also when -w is the last argument, as in macOS `security`).

        Examples:
          securefoundation keychain add-generic-password -s mail -a alice -w - \\
              --accessibility always < pw.txt
          securefoundation keychain add-generic-password -U -s api -a token -w - \\
              --passcode-file passcode.txt < token.txt
        """
    )

    @Option(name: .customShort("s"), help: ArgumentHelp("The service name.", valueName: "service"))
    var service: String

    @Option(name: .customShort("a"), help: ArgumentHelp("The account name.", valueName: "account"))
    var account: String

    @Option(name: .customShort("w"), help: ArgumentHelp("The password; `-` reads it from standard input (one trailing newline dropped); -w as the last argument prompts for it, as in macOS `security`. Avoid giving real passwords on the command line, where other users can see them.", valueName: "password"))
    var password: String?

    @Flag(name: .customShort("U"), help: "Update the item if it exists.")
    var update = false

    @Option(name: .customShort("l"), help: ArgumentHelp("A label.", valueName: "label"))
    var label: String?

    @Option(name: .customShort("j"), help: ArgumentHelp("A comment.", valueName: "comment"))
    var comment: String?

    @Option(name: .customLong("accessibility"), help: "whenUnlocked (default), afterFirstUnlock or always, optionally followed by ThisDeviceOnly.", completion: CompletionValues.accessibilities)
    var accessibilityName: String = "whenUnlocked"

    @OptionGroup var store: KeychainStoreOptions

    func run() throws {
        try CLI.run {
            let accessibility = try KeychainCommand.accessibility(accessibilityName)
            let secret: SecretBytes
            switch password {
            case "-"?: secret = try SecretSource.file("-").read()
            case let text?: secret = SecretBytes(utf8: text)
            case nil: secret = try Terminal.readSecret(prompt: "password data for new item: ")
            }
            defer { secret.wipe() }
            let keychain = try store.open()
            let key = ItemKey.generic(service: service, account: account)
            if update {
                // One upsert: another process adding the item meanwhile cannot make it a duplicate.
                try keychain.addOrUpdate(secret, for: key, accessibility: accessibility, label: label, comment: comment)
            } else {
                try keychain.add(secret, for: key, accessibility: accessibility, label: label, comment: comment)
            }
            try keychain.flush()
        }
    }
}

struct FindGenericPassword: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "find-generic-password",
        abstract: "Find a generic password item and print its attributes, or only its password with -w.",
        usage: """
        securefoundation keychain find-generic-password [-s SERVICE] [-a ACCOUNT]
            [-w] [--json] [options]
        """,
        discussion: """
        Prints the first item matching the given service and/or account. Exit 44 when none does.

        Examples:
          securefoundation keychain find-generic-password -s mail -a alice
          securefoundation keychain find-generic-password -s mail -a alice -w \\
              --passcode-file passcode.txt
          securefoundation keychain find-generic-password -s api -a token -w \\
              --minimum-accessibility whenUnlocked --passcode-file passcode.txt
        """
    )

    @Option(name: .customShort("s"), help: ArgumentHelp("The service name.", valueName: "service"))
    var service: String?

    @Option(name: .customShort("a"), help: ArgumentHelp("The account name.", valueName: "account"))
    var account: String?

    @Flag(name: .customShort("w"), help: "Print only the password (followed by a newline); with --json, the attributes and the password.")
    var passwordOnly = false

    @Flag(name: .customLong("json"), help: "Print the item as JSON (CLI.md in the documentation, \"JSON output\"): its attributes, the password only with -w.")
    var json = false

    @Option(name: .customLong("minimum-accessibility"), help: ArgumentHelp(
        "Refuse (exit 1) an item stored under a weaker class than this one (whenUnlocked > afterFirstUnlock > always; ThisDeviceOnly also requires a device-bound item).",
        valueName: "accessibility"), completion: CompletionValues.accessibilities)
    var minimumAccessibility: String?

    @OptionGroup var store: KeychainStoreOptions

    func run() throws {
        try CLI.run {
            let minimum = try minimumAccessibility.map { try KeychainCommand.accessibility($0) }
            let keychain = try store.open(readOnly: true)
            let query = KeychainQuery(service: service, account: account, minimumAccessibility: minimum, limit: .one,
                                      returning: json && passwordOnly ? [.attributes, .data] : passwordOnly ? .data : .attributes)
            guard let match = try keychain.copyMatching(query).first else {
                throw KeychainError.itemNotFound(query.itemClass.description)
            }
            if json {
                guard let attributes = match.attributes else { throw KeychainError.itemNotFound("item attributes") }
                let summary = ItemSummary(attributes: attributes, itemClass: attributes.key.itemClass,
                                          accessibility: attributes.accessibility, unavailable: nil)
                let object = FoundItemJSON(keychain: keychain.path, item: KeychainCommand.ItemJSON(summary))
                if passwordOnly {
                    guard let data = match.data else { throw KeychainError.itemNotFound("password data") }
                    defer { data.wipe() }
                    try JSONOutput.write(object, adding: "password", secret: data)
                } else {
                    try JSONOutput.write(object)
                }
            } else if passwordOnly {
                guard let data = match.data else { throw KeychainError.itemNotFound("password data") }
                defer { data.wipe() }
                try data.withUnsafeBytes { try CLI.writeStdout($0) }
                try CLI.writeStdout(Array("\n".utf8))
            } else if let attributes = match.attributes {
                let summary = ItemSummary(attributes: attributes, itemClass: attributes.key.itemClass,
                                          accessibility: attributes.accessibility, unavailable: nil)
                try CLI.writeStdout(Array((KeychainCommand.describe(summary, path: keychain.path) + "\n").utf8))
            }
        }
    }
}

/// `find-generic-password --json`; with `-w` a `"password"` member follows `"keychain"`.
struct FoundItemJSON: Encodable {
    var version = JSONOutput.schemaVersion
    var keychain: String
    var item: KeychainCommand.ItemJSON

    enum CodingKeys: String, CodingKey { case item, keychain, version }
}

struct DeleteGenericPassword: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete-generic-password",
        abstract: "Delete a generic password item.",
        usage: """
        securefoundation keychain delete-generic-password -s SERVICE -a ACCOUNT
            [options]
        """,
        discussion: """
        Deletes the item with this service and account (exit 44 when there is none). No class key \
        is needed to delete.

        Example:
          securefoundation keychain delete-generic-password -s mail -a alice
        """
    )

    @Option(name: .customShort("s"), help: ArgumentHelp("The service name.", valueName: "service"))
    var service: String

    @Option(name: .customShort("a"), help: ArgumentHelp("The account name.", valueName: "account"))
    var account: String

    @OptionGroup var store: KeychainStoreOptions

    func run() throws {
        try CLI.run {
            let keychain = try store.open(readOnly: true)
            try keychain.deletePassword(forService: service, account: account)
            try keychain.flush()
            CLI.warn("password has been deleted.")
        }
    }
}

struct DumpKeychain: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dump-keychain",
        abstract: "List every item's attributes, without secrets.",
        usage: "securefoundation keychain dump-keychain [options] [--json]",
        discussion: """
        Items whose names are sealed under a class key that is unavailable (vault locked) are \
        listed with their class and accessibility only; give --passcode-file to see them.

        Damaged items (a row changed in the file: a column of the wrong type, a failed integrity \
        check) do not stop the listing: the other items are listed on stdout, each damaged one \
        is named on stderr by its item id with what is wrong, and the exit status is 2.

        Example:
          securefoundation keychain dump-keychain --passcode-file passcode.txt
        """
    )

    @Flag(name: .customLong("json"), help: "Print the listing as JSON (CLI.md in the documentation, \"JSON output\"), damaged items included.")
    var json = false

    @OptionGroup var store: KeychainStoreOptions

    /// `dump-keychain --json`.
    struct ListingJSON: Encodable {
        struct Damaged: Encodable {
            var itemID: String
            var itemClass: String?
            var accessibility: String?
            var error: String

            enum CodingKeys: String, CodingKey { case itemID, itemClass = "class", accessibility, error }
        }

        var version = JSONOutput.schemaVersion
        var keychain: String
        var items: [KeychainCommand.ItemJSON]
        var damaged: [Damaged]
    }

    func run() throws {
        try CLI.run {
            let keychain = try store.open(readOnly: true)
            let listing = try keychain.listing()
            if json {
                try JSONOutput.write(ListingJSON(
                    keychain: keychain.path, items: listing.items.map(KeychainCommand.ItemJSON.init),
                    damaged: listing.damaged.map {
                        .init(itemID: $0.itemID, itemClass: $0.itemClass.map { $0 == .genericPassword ? "genp" : "inet" },
                              accessibility: $0.accessibility?.name, error: CLI.describe($0.error))
                    }))
                if !listing.damaged.isEmpty { throw KeychainError.damagedItems(listing.damaged) }
                return
            }
            let text = listing.items.map { KeychainCommand.describe($0, path: keychain.path) + "\n" }.joined()
            try CLI.writeStdout(Array(text.utf8))
            guard !listing.damaged.isEmpty else { return }
            for item in listing.damaged {
                let kind = [item.itemClass?.description, item.accessibility?.name].compactMap { $0 }.joined(separator: ", ")
                CLI.warn("damaged item \(item.itemID)\(kind.isEmpty ? "" : " (\(kind))"): \(CLI.describe(item.error))")
            }
            throw KeychainError.damagedItems(listing.damaged)
        }
    }
}
