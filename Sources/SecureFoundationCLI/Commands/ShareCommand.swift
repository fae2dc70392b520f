import ArgumentParser
import DeviceSharing
import Foundation
import PinnedTLS
import SecureFoundation

/// `securefoundation share …`: files between the machines of one group, over mutual TLS.
struct ShareCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "share",
        abstract: "Share files between your own machines over mutual TLS; received files are protected files.",
        discussion: """
        A group has its own root certificate: every member's certificate is issued by it, and \
        both sides trust that root only (never the system roots). Received files are stored in \
        the inbox (default HOME/share-inbox) as protected files of class completeUnlessOpen: \
        receiving works while the vault is locked, reading needs an unlock. See docs/SHARING.md.

        Set up:
          securefoundation share init --new-group --name laptop --passcode-file pass.txt
          securefoundation share invite -o invite.json --passcode-file pass.txt       (on laptop)
          securefoundation share join invite.json --name desktop -o request.json --passcode-file pass.txt
          securefoundation share approve request.json -o desktop.pem --passcode-file pass.txt   (on laptop)
          securefoundation share join --certificate desktop.pem --passcode-file pass.txt
        or over the network, in one step:
          securefoundation share invite -o invite.json --listen 0.0.0.0:7444 --passcode-file pass.txt   (on laptop)
          securefoundation share join invite.json --name desktop --connect 192.168.1.10:7444 --passcode-file pass.txt

        Use:
          securefoundation share serve --listen 0.0.0.0:7443 --passcode-file pass.txt
          securefoundation share send photo.jpg --to 192.168.1.20:7443 --device desktop --passcode-file pass.txt
          securefoundation share list
          securefoundation share open photo.jpg -o photo.jpg --passcode-file pass.txt

        """ + ShareCLI.exitStatus,
        subcommands: [ShareInitCommand.self, ShareInviteCommand.self, ShareJoinCommand.self, ShareApproveCommand.self,
                      ShareServeCommand.self, ShareSendCommand.self, ShareListCommand.self, ShareOpenCommand.self,
                      ShareRevokeCommand.self]
    )
}

enum ShareCLI {
    static let exitStatus = """
    Exit status: 0 success, 36 vault locked (give --passcode-file), 44 not found or not a member, \
    64 usage, 50 the peer was refused (not of this group, revoked, another device), 51 the \
    receiver did not store the file (digest mismatch, refused name or size), 52 invalid or \
    expired enrolment, 7 no connection, 74 a file cannot be read or written, 2 the revocation \
    list cannot be trusted (the data directory was changed), 1 any other error (docs/CLI.md).
    """

    /// Reports `error` on stderr and returns the exit code of the one table (docs/CLI.md).
    static func fail(_ error: any Error) -> ExitCode { CLI.fail(error) }

    /// "HOST:PORT" or "[IPv6]:PORT".
    static func address(_ text: String, option: String) throws -> (String, Int) {
        var host: Substring, portText: Substring
        if text.hasPrefix("["), let close = text.firstIndex(of: "]") {
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { throw ValidationError("\(option) must be HOST:PORT") }
            portText = rest.dropFirst()
        } else {
            guard let colon = text.lastIndex(of: ":") else { throw ValidationError("\(option) must be HOST:PORT") }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        guard !host.isEmpty, let port = Int(portText), (0...65535).contains(port) else {
            throw ValidationError("\(option) must be HOST:PORT with a port of 0...65535")
        }
        return (String(host), port)
    }

    static func flushStdout() { fflush(nil) }

    /// Whether `--to` names a device (a DNS label) rather than HOST:PORT.
    static func isDeviceName(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 63 && !text.contains(":")
            && text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }
            && !text.allSatisfy { $0.isNumber }
    }

    /// Browses for at most `timeout` seconds and tries each service of this group's tag, in the
    /// order found, until one proves (by its certificate) to be `device` and stores the file.
    /// Services of another tag are skipped; a refusal (another group, another device, revoked,
    /// no connection) moves on to the next one and is said on stderr.
    static func sendToDiscovered(_ path: String, device: String, client: ShareClient, membership: ShareMembership,
                                 timeout: Int, progress: @escaping @Sendable (UInt64, UInt64) -> Void) async throws
        -> (ShareClient.Sent, DiscoveredPeer) {
        let tag = try ShareDiscovery.groupTag(of: membership.root)
        var last: ShareError?
        var tried = 0
        for try await peer in ShareDiscovery.browse(for: .seconds(timeout)) {
            guard peer.group == tag, peer.version == ShareDiscovery.protocolVersion else { continue }
            if let advertised = peer.advertisedDevice, advertised.lowercased() != device.lowercased() { continue }
            tried += 1
            do {
                let sent = try await client.send(path, to: peer, device: device, timeout: .seconds(timeout), progress: progress)
                return (sent, peer)
            } catch {
                CLI.warn("securefoundation: \(peer): \(error); trying the next service")
                last = error
            }
        }
        if let last { throw last }
        throw ShareError.notFound("no service of this group found by DNS-SD within \(timeout) s for the device \(device)"
                                  + (tried == 0 ? "" : " (\(tried) tried)")
                                  + ": is `share serve --advertise` running there, and avahi-daemon here? or give --to HOST:PORT")
    }
}

/// The data directory, the passcode and the inbox.
struct ShareOptions: ParsableArguments {
    @OptionGroup var home: HomeOptions

    @Option(name: .customLong("passcode-file"), help: "Unlock the vault with the passcode in this file (`-` for stdin).")
    var passcodeFile: String?

    /// The crypto manager (unlocked when a passcode file is given), its keychain and the group.
    func open() throws -> (CryptoManager, ShareGroup) {
        let manager = try home.manager()
        try VaultCLI.unlock(manager, passcodeFile: passcodeFile, withoutFile: .stayLocked)
        let keychain = try Keychain(manager: manager)
        let group = ShareGroup(store: IdentityStore(keychain: keychain))
        // A group of an older version gets its record now (docs/SECURITY.md, "Share group
        // items"). A failure (not a member, a tampered record) is reported by the command
        // that reads the group; `share init --replace` still starts a new one.
        try? group.upgradeIfNeeded()
        return (manager, group)
    }

    func inbox(_ given: String?) -> String {
        given ?? home.directory + "/share-inbox"
    }
}

// MARK: init, invite, join, approve

struct ShareInitCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init",
        abstract: "Make this machine a member: a new group (--new-group), or join one with an invitation.",
        discussion: """
        --new-group creates the group's root (its key stays in this keychain, whenUnlocked) and \
        this device's certificate. With --invitation FILE it is `share join FILE`.
        """
    )

    @Flag(name: .customLong("new-group"), help: "Create a new group with this machine as its first member.")
    var newGroup = false

    @Option(name: .customLong("invitation"), help: "Join with this invitation (as `share join`).")
    var invitation: String?

    @Option(name: .customLong("name"), help: "This device's name (letters, digits, hyphens).")
    var name: String

    @Option(name: .customLong("group-name"), help: "The root's common name.")
    var groupName = "SecureFoundation sharing group"

    @Option(name: [.customShort("o"), .customLong("output")], help: "With --invitation: where to write the request (default stdout).")
    var output: String?

    @Flag(name: .customLong("replace"), help: "Replace this machine's group.")
    var replace = false

    @OptionGroup var options: ShareOptions

    func run() throws {
        do {
            if let invitation {
                try ShareJoinCommand.join(invitation: invitation, name: name, output: output, options: options)
                return
            }
            guard newGroup else { throw ValidationError("give --new-group to create a group, or --invitation FILE to join one") }
            let (_, group) = try options.open()
            let membership = try group.create(deviceName: name, groupName: groupName, replace: replace)
            print("group root: \(membership.root.subject)")
            print("root pin: \(try ShareGroup.pin(membership.root))")
            print("device: \(membership.deviceName)")
            print("device pin: \(try ShareGroup.pin(membership.identity.leaf))")
        } catch {
            throw ShareCLI.fail(error)
        }
    }
}

struct ShareInviteCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "invite",
        abstract: "Write a one-time, short-lived invitation for a new device (on the machine holding the group root).",
        discussion: """
        The invitation holds the group root certificate, a one-time secret and an expiry: carry \
        it to the new machine privately (whoever has it can enrol one device until it expires). \
        With --listen HOST:PORT, this machine then waits for the new device to join over the \
        network (`share join INVITATION --name NAME --connect HOST:PORT`): it prints `listening \
        on HOST:PORT`, then `enrolled DEVICE` and exits 0; exit 52 if the invitation expires \
        first or 10 requests were refused.
        """
    )

    @Option(name: .customLong("listen"), help: "Wait for the device to join over the network on HOST:PORT (port 0: any free port).")
    var listen: String?

    @Option(name: [.customShort("o"), .customLong("output")], help: "Where to write the invitation (default stdout).")
    var output: String?

    @Option(name: .customLong("minutes"), help: "How long the invitation is valid (1...1440).")
    var minutes = 60

    @OptionGroup var options: ShareOptions

    func run() async throws {
        do {
            guard (1...1440).contains(minutes) else { throw ValidationError("--minutes must be 1...1440") }
            let address = try listen.map { try ShareCLI.address($0, option: "--listen") }
            if address != nil && output == nil {
                throw ValidationError("with --listen, write the invitation to a file with -o (standard output carries the progress)")
            }
            let (_, group) = try options.open()
            let membership = try address.map { _ in try group.membership() }
            let enrolment = ShareEnrolment(group: group)
            let invitation = try enrolment.invite(validity: TimeInterval(minutes) * 60)
            try CLI.writeOutput(try ShareJSON.encode(invitation), to: output)
            CLI.warn("invitation \(invitation.id), valid for \(minutes) minutes")
            guard let (host, port) = address, let membership else { return }
            let server = try await ShareEnrolmentServer.bind(host: host, port: port, membership: membership, enrolment: enrolment)
            print("listening on \(host):\(server.port) for invitation \(invitation.id)")
            ShareCLI.flushStdout()
            let device = try await server.run(until: Date(timeIntervalSince1970: TimeInterval(invitation.expires)), onEvent: { event in
                if case let .refused(peer, error) = event { CLI.warn("securefoundation: refused \(peer): \(error)") }
            })
            print("enrolled \(device)")
        } catch {
            throw ShareCLI.fail(error)
        }
    }
}

struct ShareJoinCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "join",
        abstract: "Join a group: with an invitation, write a request; with --certificate, store the certificate approved.",
        discussion: """
        Step 1: `share join INVITATION --name DEVICE -o request.json` stores the group root as \
        this machine's only sharing anchor, makes this device's key (kept in the keychain) and \
        writes a request authenticated by the invitation's secret. Give the request to the \
        inviter, who runs `share approve`. Step 2: `share join --certificate FILE` checks the \
        certificate (issued by the root, for this key) and stores the identity. Over the \
        network, in one step: `share join INVITATION --name DEVICE --connect HOST:PORT` while \
        the inviter runs `share invite --listen`; only a machine of the invitation's group is \
        trusted there, and the secret is proven, never sent.
        """
    )

    @Option(name: .customLong("connect"), help: "Join over the network: the inviter's HOST:PORT (`share invite --listen`).")
    var connect: String?

    @Argument(help: "The invitation file.")
    var invitation: String?

    @Option(name: .customLong("name"), help: "This device's name.")
    var name: String?

    @Option(name: .customLong("certificate"), help: "The certificate chain the inviter approved (PEM).")
    var certificate: String?

    @Option(name: [.customShort("o"), .customLong("output")], help: "Where to write the request (default stdout).")
    var output: String?

    @OptionGroup var options: ShareOptions

    func run() async throws {
        do {
            if let connect {
                let (host, port) = try ShareCLI.address(connect, option: "--connect")
                guard let invitation, let name, certificate == nil else {
                    throw ValidationError("--connect needs INVITATION and --name (and no --certificate)")
                }
                let parsed = try ShareJSON.decode(ShareEnrolment.Invitation.self, from: try CLI.readInput(invitation, maxLength: 1 << 20))
                let (_, group) = try options.open()
                let membership = try await ShareEnrolment(group: group).join(invitation: parsed, deviceName: name, host: host, port: port)
                print("device: \(membership.deviceName)")
                print("device pin: \(try ShareGroup.pin(membership.identity.leaf))")
                return
            }
            if let certificate {
                let (_, group) = try options.open()
                let pem = try CLI.readInput(certificate, maxLength: 1 << 20)
                let membership = try ShareEnrolment(group: group).complete(chainPEM: pem)
                print("device: \(membership.deviceName)")
                print("device pin: \(try ShareGroup.pin(membership.identity.leaf))")
                return
            }
            guard let invitation, let name else { throw ValidationError("give INVITATION and --name, or --certificate FILE") }
            try Self.join(invitation: invitation, name: name, output: output, options: options)
        } catch {
            throw ShareCLI.fail(error)
        }
    }

    static func join(invitation path: String, name: String, output: String?, options: ShareOptions) throws {
        let invitation = try ShareJSON.decode(ShareEnrolment.Invitation.self, from: try CLI.readInput(path, maxLength: 1 << 20))
        let (_, group) = try options.open()
        let request = try ShareEnrolment(group: group).join(invitation: invitation, deviceName: name)
        try CLI.writeOutput(try ShareJSON.encode(request), to: output)
        CLI.warn("request written: give it to the inviter (`share approve`), then run `share join --certificate FILE`")
    }
}

struct ShareApproveCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "approve",
        abstract: "Issue the certificate of a device that joined with one of this machine's invitations."
    )

    @Argument(help: "The request file.")
    var request: String

    @Option(name: [.customShort("o"), .customLong("output")], help: "Where to write the certificate chain (default stdout).")
    var output: String?

    @OptionGroup var options: ShareOptions

    func run() throws {
        do {
            let request = try ShareJSON.decode(ShareEnrolment.Request.self, from: try CLI.readInput(self.request, maxLength: 1 << 20))
            let (_, group) = try options.open()
            let pem = try ShareEnrolment(group: group).approve(request: request)
            try CLI.writeOutput(Array(pem.utf8), to: output)
            CLI.warn("approved device \(request.device)")
        } catch {
            throw ShareCLI.fail(error)
        }
    }
}

enum ShareJSON {
    static func encode(_ value: some Encodable) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return Array(try encoder.encode(value)) + [0x0a]
    }

    static func decode<Value: Decodable>(_ type: Value.Type, from bytes: [UInt8]) throws -> Value {
        do { return try JSONDecoder().decode(type, from: Data(bytes)) } catch {
            throw ShareError.invalidEnrolment("the file does not parse: \(error)")
        }
    }
}

// MARK: serve, send

struct ShareServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Receive files from the group's devices over mutual TLS into the inbox.",
        discussion: """
        Loads this device's identity (needs --passcode-file), then locks the vault again (unless \
        --stay-unlocked): files keep arriving as protected files of class completeUnlessOpen, \
        readable only after an unlock. Prints `listening on HOST:PORT` once ready, one line per \
        file received, and refusals on stderr; on a terminal, standard error shows each file's \
        progress while it arrives. With --advertise, the service is announced by DNS-SD \
        (_securefoundation._tcp in local.; TXT v=1 and the group's tag only, the device name \
        only with --advertise-name). A device revoked with `share revoke` is refused \
        from its next connection; on the machine that holds the group root, so is a device not \
        enrolled there.
        """
    )

    @Option(name: .customLong("inbox"), help: "Where received files go (default HOME/share-inbox).")
    var inbox: String?

    @Option(name: .customLong("listen"), help: "HOST:PORT to listen on (port 0: any free port).")
    var listen = "127.0.0.1:7443"

    @Option(name: .customLong("max-size"), help: "The largest file accepted, in bytes.")
    var maxSize: UInt64 = ShareServer.defaultMaxSize

    @Option(name: .customLong("max-transfers"), help: "Stop after this many connections (received or refused).")
    var maxTransfers: Int?

    @Flag(name: .customLong("stay-unlocked"), help: "Keep the vault unlocked while serving.")
    var stayUnlocked = false

    @Flag(name: .customLong("advertise"), help: "Announce the service by DNS-SD (_securefoundation._tcp on local.; needs avahi-daemon on Linux).")
    var advertise = false

    @Flag(name: .customLong("advertise-name"), help: "With --advertise: show this device's name in the announcement (hidden by default).")
    var advertiseName = false

    @OptionGroup var options: ShareOptions

    func run() async throws {
        do {
            let (host, port) = try ShareCLI.address(listen, option: "--listen")
            let (manager, group) = try options.open()
            let membership = try group.membership()
            let files = ProtectedFiles(manager: manager)
            if manager.isUnlocked { _ = try files.prepareClasses() }
            if !stayUnlocked { manager.lock() }
            let server = try await ShareServer.bind(host: host, port: port, membership: membership,
                                                    inbox: options.inbox(inbox), files: files,
                                                    isRevoked: { pin in (try? group.revokedPins().contains(pin)) ?? true },
                                                    isEnrolled: { pin in (try? group.isEnrolled(pin: pin)) ?? false },
                                                    maxSize: maxSize)
            print("listening on \(host):\(server.port) as \(membership.deviceName)")
            ShareCLI.flushStdout()
            var advertisement: ShareAdvertisement?
            if advertise || advertiseName {
                if host == "127.0.0.1" || host == "::1" || host == "localhost" {
                    CLI.warn("securefoundation: advertising a service that listens on \(host) only: other machines cannot reach it; use --listen 0.0.0.0:PORT")
                }
                advertisement = try await ShareDiscovery.advertise(port: server.port, membership: membership, showDeviceName: advertiseName)
                print("advertising \(advertisement?.name ?? "?") as \(ShareDiscovery.serviceType) in \(ShareDiscovery.domain) (\(advertisement?.txt.joined(separator: " ") ?? ""))")
                ShareCLI.flushStdout()
            }
            defer { advertisement?.stop() }
            let count = ShareCounter()
            let limit = maxTransfers
            let line = ProgressLine.enabled ? ReceiveProgressLine() : nil
            let onProgress: (@Sendable (ShareServer.Progress) -> Void)?
            if let line {
                onProgress = { line.report(name: $0.name, device: $0.device, received: $0.received, size: $0.size) }
            } else {
                onProgress = nil
            }
            try await server.run(onEvent: { event in
                line?.clear()
                switch event {
                case let .received(name, size, device):
                    print("received \(name) (\(size) bytes) from \(device)")
                    ShareCLI.flushStdout()
                case let .refused(peer, error):
                    CLI.warn("securefoundation: refused \(peer): \(error)")
                }
                if let limit, count.increment() >= limit {
                    Task { await server.close() }
                }
            }, onProgress: onProgress)
        } catch {
            throw ShareCLI.fail(error)
        }
    }
}

final class ShareCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0
    func increment() -> Int {
        lock.lock()
        defer { lock.unlock() }
        value += 1
        return value
    }
}

struct ShareSendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Send files to a device of the group.",
        discussion: """
        The receiver must present a certificate of this group (and, with --device, of that \
        device) that is not revoked. Needs --passcode-file (this device's key is whenUnlocked). \
        Shows progress on a terminal; prints one line per file stored. With --to DEVICE (no \
        port), the receiver is found by DNS-SD (`share serve --advertise`; avahi-daemon on \
        Linux): each service of this group's tag is tried in turn until one proves by its \
        certificate to be DEVICE; discovery itself is not trusted.
        """
    )

    @Argument(help: "The files to send.")
    var files: [String] = []

    @Option(name: .customLong("to"), help: "The receiver: HOST:PORT, or a device name to find by DNS-SD (`share serve --advertise`).")
    var to: String

    @Option(name: .customLong("watch"), help: ArgumentHelp(
        "Watch this folder: send each regular file once it is complete, and again when its content changes; runs until stopped.",
        valueName: "dir"))
    var watch: String?

    @Option(name: .customLong("settle"), help: "With --watch: seconds a closed file's size and time must stay unchanged before it is sent.")
    var settle: Double = 2

    @Flag(name: .customLong("once"), help: "With --watch: stop once every file present was sent (or failed), nothing being written.")
    var once = false

    @Option(name: .customLong("device"), help: "The receiving device's name, if it must be that one.")
    var device: String?

    @Option(name: .customLong("timeout"), help: "Seconds for connecting, the handshake, the reply, and a receiver that takes no bytes.")
    var timeout = 30

    @OptionGroup var options: ShareOptions

    func run() async throws {
        do {
            if watch != nil {
                guard files.isEmpty else { throw ValidationError("give files or --watch DIR, not both") }
                guard settle >= 0 && settle <= 3600 else { throw ValidationError("--settle must be 0...3600 seconds") }
            } else {
                guard !files.isEmpty else { throw ValidationError("give at least one file, or --watch DIR") }
                guard !once else { throw ValidationError("--once goes with --watch") }
            }
            guard (1...3600).contains(timeout) else { throw ValidationError("--timeout must be 1...3600") }
            let discovered = ShareCLI.isDeviceName(to)
            let address = discovered ? nil : try ShareCLI.address(to, option: "--to")
            if discovered, let device, device.lowercased() != to.lowercased() {
                throw ValidationError("--to names the device \(to), --device \(device): give one")
            }
            let (manager, group) = try options.open()
            let membership = try group.membership()
            let client = try ShareClient(membership: membership,
                                         isRevoked: { pin in (try? group.revokedPins().contains(pin)) ?? true })
            let terminal = isatty(2) == 1
            var found: DiscoveredPeer?
            let timeout = timeout, device = device, to = to
            func sendOne(_ path: String) async throws -> ShareClient.Sent {
                let name = (path as NSString).lastPathComponent
                let progress: @Sendable (UInt64, UInt64) -> Void = { done, total in
                    guard terminal else { return }
                    let percent = total == 0 ? 100 : Int(done * 100 / total)
                    FileHandle.standardError.write(Data("\r\(name): \(percent)% of \(total) bytes".utf8))
                }
                let sent: ShareClient.Sent
                if let address {
                    sent = try await client.send(path, to: address.0, port: address.1, device: device, timeout: .seconds(timeout), progress: progress)
                } else if let peer = found {
                    sent = try await client.send(path, to: peer, device: to, timeout: .seconds(timeout), progress: progress)
                } else {
                    (sent, found) = try await ShareCLI.sendToDiscovered(path, device: to, client: client, membership: membership,
                                                                         timeout: timeout, progress: progress)
                }
                if terminal { FileHandle.standardError.write(Data("\n".utf8)) }
                return sent
            }
            if let watch {
                let stateFile = ShareFolderWatcher.defaultStateFile(home: options.home.directory, directory: watch, receiver: to)
                let watcher = try ShareFolderWatcher(directory: watch, receiver: to, stateFile: stateFile, manager: manager,
                                                     settle: .milliseconds(Int(settle * 1000)))
                let once = once
                var failures = 0
                CLI.warn("securefoundation: watching \(watcher.directory) (\(watcher.seesCloses ? "closed files" : "settle time only")); state \(stateFile)")
                try await watcher.run(send: sendOne, report: { event in
                    switch event {
                    case let .sent(path, sent):
                        print("sent \(path) to \(sent.device) as \(sent.storedName) (\(sent.size) bytes)")
                    case let .unchanged(path):
                        print("unchanged \(path)")
                    case let .failed(path, why):
                        failures += 1
                        print("failed \(path): \(why)")
                    }
                    ShareCLI.flushStdout()
                }, stop: { watcher in
                    once && watcher.isDone(countingFailures: true)
                })
                if failures > 0 { throw ExitCode(1) }
                return
            }
            for path in files {
                let sent = try await sendOne(path)
                print("sent \(path) to \(sent.device) as \(sent.storedName) (\(sent.size) bytes)")
                ShareCLI.flushStdout()
            }
        } catch {
            throw ShareCLI.fail(error)
        }
    }
}

// MARK: list, open, revoke

/// `share list --nearby`: what DNS-SD finds, each service checked by a handshake.
enum ShareNearby {
    static func list(client: ShareClient, membership: ShareMembership, seconds: Int) async throws -> [ShareListCommand.NearbyJSON.Service] {
        let tag = try ShareDiscovery.groupTag(of: membership.root)
        var services: [ShareListCommand.NearbyJSON.Service] = []
        for try await peer in ShareDiscovery.browse(for: .seconds(seconds)) {
            var service = ShareListCommand.NearbyJSON.Service(instance: peer.instance, address: peer.address, port: peer.port,
                                                              state: "unknown", device: nil, pin: nil, detail: nil)
            if peer.group != tag {
                service.detail = "another group's tag"
            } else {
                do {
                    let who = try await client.identify(peer, timeout: .seconds(10))
                    service.device = who.device
                    service.pin = who.pin
                    service.state = who.revoked ? "revoked" : "member"
                } catch {
                    service.detail = "\(error)"
                }
            }
            services.append(service)
        }
        return services.sorted { ($0.instance, $0.port) < ($1.instance, $1.port) }
    }
}

struct ShareListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List the files received, and the group's devices.",
        discussion: """
        One line per received file: its name and its size on disk (encrypted). With \
        --passcode-file, files still of class completeUnlessOpen are first upgraded to complete.
        """
    )

    @Option(name: .customLong("inbox"), help: "The inbox (default HOME/share-inbox).")
    var inbox: String?

    @Flag(name: .customLong("devices"), help: "List the devices enrolled here and the revoked ones instead.")
    var devices = false

    @Flag(name: .customLong("json"), help: "Print the list as JSON (docs/CLI.md, \"JSON output\").")
    var json = false

    @Flag(name: .customLong("nearby"), help: "List the sharing services found by DNS-SD instead, with their state (member, revoked, unknown).")
    var nearby = false

    @Option(name: .customLong("seconds"), help: "With --nearby: how long to browse (1...60).")
    var seconds = 3

    @OptionGroup var options: ShareOptions

    struct NearbyJSON: Encodable {
        struct Service: Encodable {
            var instance: String; var address: String; var port: Int; var state: String
            var device: String?; var pin: String?; var detail: String?
        }
        var version = JSONOutput.schemaVersion
        var services: [Service]
    }

    struct FilesJSON: Encodable {
        struct File: Encodable { var name: String; var size: Int }
        var version = JSONOutput.schemaVersion
        var inbox: String
        var files: [File]
    }

    struct DevicesJSON: Encodable {
        struct Device: Encodable { var name: String; var pin: String; var revoked: Bool }
        var version = JSONOutput.schemaVersion
        var devices: [Device]
    }

    func run() async throws {
        do {
            let (manager, group) = try options.open()
            if nearby {
                guard (1...60).contains(seconds) else { throw ValidationError("--seconds must be 1...60") }
                let membership = try group.membership()
                let client = try ShareClient(membership: membership,
                                             isRevoked: { pin in (try? group.revokedPins().contains(pin)) ?? true })
                let list = try await ShareNearby.list(client: client, membership: membership, seconds: seconds)
                if json { try JSONOutput.write(NearbyJSON(services: list)); return }
                for service in list {
                    print([service.instance, "\(service.address):\(service.port)", service.state, service.device ?? "-",
                           service.detail ?? ""].joined(separator: "\t"))
                }
                return
            }
            if devices {
                let revoked = try group.revokedPins()
                let list = try group.members().map {
                    DevicesJSON.Device(name: $0.device, pin: "\($0.pin)", revoked: revoked.contains($0.pin))
                }
                if json { try JSONOutput.write(DevicesJSON(devices: list)); return }
                for device in list { print("\(device.name)\t\(device.pin)\t\(device.revoked ? "revoked" : "member")") }
                return
            }
            let directory = options.inbox(inbox)
            if manager.isUnlocked {
                try ShareOpenCommand.upgrade(directory, manager: manager)
            }
            let names = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [])
                .filter { !$0.hasPrefix(".") }.sorted()
            var files: [FilesJSON.File] = []
            for name in names {
                guard let info = try? FileCalls.linkStatus(directory + "/" + name), info.isRegularFile else { continue }
                files.append(.init(name: name, size: Int(info.size)))
            }
            if json { try JSONOutput.write(FilesJSON(inbox: directory, files: files)); return }
            for file in files { print("\(file.name)\t\(file.size)") }
        } catch {
            throw ShareCLI.fail(error)
        }
    }
}

struct ShareOpenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "open",
        abstract: "Read a received file (needs --passcode-file).",
        discussion: "Writes the file's bytes to standard output or -o. Received files are upgraded to class complete first."
    )

    @Argument(help: "The file's name in the inbox.")
    var name: String

    @Option(name: .customLong("inbox"), help: "The inbox (default HOME/share-inbox).")
    var inbox: String?

    @Option(name: [.customShort("o"), .customLong("output")], help: "Where to write the bytes (default stdout).")
    var output: String?

    @OptionGroup var options: ShareOptions

    func run() throws {
        do {
            try ShareWire.checkName(name)
            let (manager, _) = try options.open()
            let directory = options.inbox(inbox)
            let path = directory + "/" + name
            guard FileManager.default.fileExists(atPath: path) else { throw ShareError.notFound("\(name) is not in the inbox") }
            let files = ProtectedFiles(manager: manager)
            if manager.isUnlocked { try Self.upgrade(directory, manager: manager) }
            if let output {
                try files.read(at: path, toFile: output)
            } else {
                try files.read(at: path, to: 1)
            }
        } catch {
            throw ShareCLI.fail(error)
        }
    }

    /// Received files, written completeUnlessOpen, become complete at the first unlock.
    static func upgrade(_ directory: String, manager: CryptoManager) throws {
        guard FileManager.default.fileExists(atPath: directory) else { return }
        let report = try ProtectedFiles(manager: manager).upgradeItems(inDirectory: directory, from: .completeUnlessOpen, to: .complete)
        if !report.changed.isEmpty { CLI.warn("upgraded \(report.changed.count) received file(s) to class complete") }
    }
}

struct ShareRevokeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "revoke",
        abstract: "Refuse a device from now on (by the name it enrolled with here, or its sha256/ pin).",
        discussion: """
        The revocation list is a keychain item of this machine (always class, MAC'd like every \
        item): run revoke on every member that should refuse the device.
        """
    )

    @Argument(help: "The device name or sha256/ pin.")
    var device: String

    @OptionGroup var options: ShareOptions

    func run() throws {
        do {
            let (_, group) = try options.open()
            for record in try group.revoke(device: device) {
                print("revoked \(record.device) \(record.pin)")
            }
        } catch {
            throw ShareCLI.fail(error)
        }
    }
}
